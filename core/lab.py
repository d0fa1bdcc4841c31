"""A lab where attention is learned: one attention head trained from scratch on a toy task.

Each task's answer *is* an attention pattern: for every query i there is one key t(i) it should
attend to. The model is a single head over learned embeddings,
    x_i = E_tok[token_i] (+ E_pos[i] when positions are on),
    q_i = W_q x_i,  k_j = W_k x_j,  s_ij = q_i · k_j (/ √d_head when scaled),
    α_i = softmax(masked s_i),
and the loss compares each row α_i with the one-hot row y_i of its target key t(i):
    squared (default): L = mean_i Σ_j (α_ij − y_ij)²,
    cross-entropy:     L = −mean_i log α_{i, t(i)}   (the way a pointer network is trained).
There is no value path and no readout on purpose: the row of weights is the prediction, so
nothing but attention can solve the task. The two losses differ where the training-time argument
for 1/√d_k lives: the squared loss reaches the scores through the softmax's slope, which is
nearly flat when the softmax is saturated, as the loss of a real layer does through its values;
the cross-entropy's log undoes the softmax's exponential, so its gradient never vanishes.

A query whose target is hidden by the causal mask (t(i) > i) cannot put any weight on it: such
queries are left out of the loss (log 0 would be −∞) but still count as wrong in the accuracy.

Everything is seeded through one torch.Generator, so a seed gives the same numbers every time
(on one torch thread; the caller chooses the thread count). Shapes: B sequences, n tokens,
V words in the vocabulary, d_model embedding width, d_head query/key width.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch.nn import functional as F
from torch.optim.adam import adam

from core.attention import apply_mask, causal_mask

# ---------------------------------------------------------------------------------------------
# Tasks: token sequences and the key every query should attend to
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """A toy task: its words, its sequence length and a fixed probe sequence to draw."""

    name: str
    title: str
    vocabulary: tuple[str, ...]
    n_tokens: int
    probe: tuple[int, ...]  # token ids of the sequence whose attention map the page draws


LETTERS = tuple("abcdefgh")
BRACKETS = ("(", ")", "[", "]", "{", "}", "<", ">")  # id 2k opens kind k, id 2k + 1 closes it

TASKS = {
    "previous": Task(
        "previous", "copy the previous token", LETTERS, 10, (2, 0, 5, 1, 1, 4, 0, 3, 6, 7)
    ),
    "first": Task(
        "first", "first occurrence of the word", LETTERS[:5], 10, (0, 1, 0, 2, 1, 3, 0, 2, 4, 1)
    ),
    "bracket": Task("bracket", "matching bracket", BRACKETS, 8, (0, 2, 3, 4, 6, 7, 5, 1)),
}


def previous_targets(tokens: torch.Tensor) -> torch.Tensor:
    """(B, n) tokens -> (B, n) targets t(i) = i − 1; the first token has none and points to itself."""
    n_sequences, n = tokens.shape
    return (torch.arange(n) - 1).clamp(min=0).expand(n_sequences, n)


def first_occurrence_targets(tokens: torch.Tensor) -> torch.Tensor:
    """(B, n) tokens -> (B, n) targets: the first position j holding the same word as i."""
    same_word = tokens.unsqueeze(2) == tokens.unsqueeze(1)  # (B, n_q, n_k): word_j == word_i
    return same_word.int().argmax(dim=2)  # argmax returns the first of equal maxima: earliest j


def bracket_targets(tokens: torch.Tensor) -> torch.Tensor:
    """(B, n) bracket ids, each kind at most once per sequence -> (B, n) the partner's position."""
    kind = tokens // 2  # ( and ) share kind 0, [ and ] kind 1, …
    same_kind = kind.unsqueeze(2) == kind.unsqueeze(1)  # (B, n_q, n_k)
    other = ~torch.eye(tokens.shape[1], dtype=torch.bool)  # the partner is not the bracket itself
    return (same_kind & other).int().argmax(dim=2)


def balanced_bracket_sequences(n_pairs: int = 4) -> torch.Tensor:
    """Every balanced sequence of n_pairs brackets using each kind once: (count, 2 n_pairs) ids.

    4 pairs: 14 nesting shapes × 4! ways to give the kinds to the pairs = 336 sequences.
    """
    sequences = []
    for opens in itertools.product((True, False), repeat=2 * n_pairs):
        depth = list(itertools.accumulate(1 if is_open else -1 for is_open in opens))
        if min(depth) < 0 or depth[-1] != 0:
            continue  # a closing bracket before its opener, or brackets left open
        for kinds in itertools.permutations(range(n_pairs)):
            unused, stack, ids = iter(kinds), [], []
            for is_open in opens:
                kind = next(unused) if is_open else stack.pop()
                if is_open:
                    stack.append(kind)
                ids.append(2 * kind + (0 if is_open else 1))
            sequences.append(ids)
    return torch.tensor(sequences)


_BRACKET_POOL = balanced_bracket_sequences()


def draw_tokens(task: Task, n_sequences: int, generator: torch.Generator) -> torch.Tensor:
    """n_sequences random sequences of the task: (B, n) int64 token ids."""
    if task.name == "bracket":
        rows = torch.randint(len(_BRACKET_POOL), (n_sequences,), generator=generator)
        return _BRACKET_POOL[rows]
    shape = (n_sequences, task.n_tokens)
    return torch.randint(len(task.vocabulary), shape, generator=generator)


def make_batch(
    task: Task, n_sequences: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """n_sequences random sequences of the task -> (tokens (B, n), targets (B, n)), both int64."""
    tokens = draw_tokens(task, n_sequences, generator)
    return tokens, task_targets(task, tokens)


def task_targets(task: Task, tokens: torch.Tensor) -> torch.Tensor:
    """The targets of given (B, n) sequences of a task."""
    rule = {
        "previous": previous_targets,
        "first": first_occurrence_targets,
        "bracket": bracket_targets,
    }[task.name]
    return rule(tokens).clone()  # previous_targets is an expanded view: give a tensor of its own


# ---------------------------------------------------------------------------------------------
# The model: embeddings, W_q, W_k and one softmax
# ---------------------------------------------------------------------------------------------

D_MODEL = 32  # embedding width: enough room for 8 words and 10 positions to be told apart
SOLVED_ACCURACY = 0.99  # a run is "solved" when this share of held-out queries is right
LOCKED_WEIGHT = 0.99  # a row with this much weight on one wrong key: its softmax is flat there


@dataclass(frozen=True)
class Settings:
    """Everything that decides a run; equal settings give equal numbers."""

    task: str = "previous"
    d_head: int = 8
    scale: bool = True
    causal: bool = False
    positions: bool = True
    seed: int = 0
    steps: int = 300
    loss: str = "squared"  # "squared" (through the softmax) or "cross_entropy" (log α)
    learning_rate: float = 0.02  # Adam's step: every default run is solved well within 300 steps
    batch_size: int = 32
    # W_q and W_k start rescaled so that the starting score spread is the *other* head's: an
    # unscaled head starts where a scaled one would, and the reverse (start_factor).
    start_at_other_spread: bool = False


def start_factor(settings: Settings) -> float:
    """The factor on W_q and W_k at the start: d_head^(−¼) for an unscaled head started at the
    scaled spread, d_head^(+¼) for a scaled head started at the unscaled spread, else 1.

    A score is bilinear in W_q and W_k, so it moves by the factor squared, d_head^(∓½): exactly
    the 1/√d_head that the other head has or lacks.
    """
    if not settings.start_at_other_spread:
        return 1.0
    return settings.d_head ** (0.25 if settings.scale else -0.25)


def with_other_scale(settings: Settings) -> Settings:
    """The same run (seed, start, batches) with the 1/√d_head switched the other way."""
    return replace(settings, scale=not settings.scale)


# What runs trained side by side must share: the shapes of their tensors and their schedule.
SHARED_FIELDS = ("task", "d_head", "steps", "batch_size", "learning_rate", "positions", "causal")


@dataclass(frozen=True)
class Stack:
    """Runs trained side by side in one set of tensors, each from its own seed.

    They share SHARED_FIELDS; the seed, the 1/√d_head, the start and the loss may differ from run
    to run. Every operation acts on one run's slice of the stacked tensors, so a run's numbers are
    the ones it gets when trained alone (tests/test_lab.py checks it).
    """

    runs: tuple[Settings, ...]

    def __post_init__(self) -> None:
        if not self.runs:
            raise ValueError("a stack needs at least one run")
        for name in SHARED_FIELDS:
            values = {getattr(settings, name) for settings in self.runs}
            if len(values) > 1:
                raise ValueError(f"runs trained together must share {name}, not {values}")

    @property
    def shared(self) -> Settings:
        """The first run's settings, read only for SHARED_FIELDS."""
        return self.runs[0]

    @property
    def task(self) -> Task:
        return TASKS[self.shared.task]

    def score_factors(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """(R, 1, 1, 1): 1/√d_head for a scaled run, 1 for an unscaled one."""
        d_head = self.shared.d_head
        factors = [d_head**-0.5 if settings.scale else 1.0 for settings in self.runs]
        return torch.tensor(factors, dtype=dtype).view(-1, 1, 1, 1)

    def cross_entropy(self) -> torch.Tensor:
        """(R, 1, 1) bool: True for the runs trained with the cross-entropy."""
        return torch.tensor([s.loss == "cross_entropy" for s in self.runs]).view(-1, 1, 1)

    def part(self, start: int, stop: int) -> Stack:
        return Stack(self.runs[start:stop])


@dataclass(frozen=True)
class Parameters:
    """The trainable tensors of R one-head models stacked on a leading run axis (torch's
    (out, in) layout for W_q and W_k)."""

    token_embedding: torch.Tensor  # (R, V, d_model)
    position_embedding: torch.Tensor  # (R, n, d_model)
    w_query: torch.Tensor  # (R, d_head, d_model)
    w_key: torch.Tensor  # (R, d_head, d_model)

    def tensors(self) -> list[torch.Tensor]:
        return [self.token_embedding, self.position_embedding, self.w_query, self.w_key]

    def part(self, start: int, stop: int) -> Parameters:
        """Runs start … stop − 1 (views, no copies)."""
        return Parameters(*(tensor[start:stop] for tensor in self.tensors()))


def init_parameters(
    task: Task,
    d_head: int,
    generator: torch.Generator,
    d_model: int = D_MODEL,
    dtype: torch.dtype = torch.float32,
) -> Parameters:
    """One run's start, R = 1: embeddings N(0, 1); W_q, W_k N(0, 1/d_model), so each query/key
    entry has variance ≈ 1.

    With that start, an unscaled score q·k has variance ≈ d_head (a wide head starts with
    a nearly one-hot softmax) and a scaled one variance ≈ 1, whatever d_head.
    """

    def normal(*shape: int, std: float = 1.0) -> torch.Tensor:
        values = torch.randn(*shape, generator=generator, dtype=dtype) * std
        return values.unsqueeze(0).requires_grad_()  # (1, *shape): a stack of one run

    return Parameters(
        token_embedding=normal(len(task.vocabulary), d_model),
        position_embedding=normal(task.n_tokens, d_model),
        w_query=normal(d_head, d_model, std=d_model**-0.5),
        w_key=normal(d_head, d_model, std=d_model**-0.5),
    )


def stack_parameters(starts: Sequence[Parameters], factors: Sequence[float]) -> Parameters:
    """Single-run starts (R = 1 each) -> one stack, each run's W_q and W_k times its factor."""
    with torch.no_grad():
        tensors = [
            torch.cat([getattr(start, name) for start in starts]).clone()
            for name in ("token_embedding", "position_embedding", "w_query", "w_key")
        ]
        factor = torch.tensor(factors, dtype=tensors[0].dtype).view(-1, 1, 1)  # (R, 1, 1)
        tensors[2].mul_(factor)
        tensors[3].mul_(factor)
    return Parameters(*(tensor.requires_grad_() for tensor in tensors))


def query_key_map(params: Parameters, stack: Stack) -> torch.Tensor:
    """(R, d_model, d_model) = W_qᵀ W_k, times 1/√d_head in a scaled run: s_ij = x_iᵀ (this) x_j."""
    factors = stack.score_factors(params.w_query.dtype)[:, 0]  # (R, 1, 1): 1/√d_head or 1
    return (params.w_query.transpose(1, 2) @ params.w_key) * factors


def possible_inputs(params: Parameters, stack: Stack) -> torch.Tensor:
    """(R, V·n, d_model): every vector a position can hold, x = E_tok[w] + E_pos[i], at row
    w·n + i (with positions off, the V word vectors: row w)."""
    if not stack.shared.positions:
        return params.token_embedding  # (R, V, d_model)
    words = params.token_embedding.unsqueeze(2)  # (R, V, 1, d_model)
    positions = params.position_embedding.unsqueeze(1)  # (R, 1, n, d_model)
    return (words + positions).flatten(1, 2)  # (R, V, n, d_model) -> (R, V·n, d_model)


def input_rows(tokens: torch.Tensor, stack: Stack) -> torch.Tensor:
    """(R, B, n) tokens -> (R, B, n) the row of possible_inputs each position holds."""
    if not stack.shared.positions:
        return tokens
    n = tokens.shape[-1]
    return tokens * n + torch.arange(n)


def masked_scores(params: Parameters, tokens: torch.Tensor, stack: Stack) -> torch.Tensor:
    """(R, B, n) tokens, run r's through run r's model -> (R, B, n, n) scores s_ij, −inf where
    the causal mask forbids j > i.

    s_ij = (W_q x_i)·(W_k x_j) = x_iᵀ (W_qᵀ W_k) x_j. A position holds one of only V·n vectors
    (a word plus a position: 80 at most), so the score of every pair the head can ever see is
    computed once, X (W_qᵀ W_k) Xᵀ over those vectors, and a batch's scores are looked up in
    that (V·n × V·n) table. Same numbers as q·k pair by pair (tests check), at a cost that does
    not grow with the batch.
    """
    n_runs, _, n = tokens.shape
    inputs = possible_inputs(params, stack)  # (R, P, d_model), P = V·n
    table = inputs @ query_key_map(params, stack) @ inputs.transpose(1, 2)  # (R, P, P)
    n_possible = table.shape[-1]
    rows = input_rows(tokens, stack)  # (R, B, n)
    runs = torch.arange(n_runs).view(n_runs, 1, 1, 1) * n_possible * n_possible
    # Flat index of (run r, query row a, key row b) in the table: r·P² + a·P + b.
    flat = runs + rows.unsqueeze(-1) * n_possible + rows.unsqueeze(-2)  # (R, B, n, n)
    scores = table.reshape(-1)[flat]  # (R, B, n_q, n_k)
    mask = causal_mask(n) if stack.shared.causal else None
    return apply_mask(scores, mask)


def softmax_rows(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis, written out: exp(s − max) / Σ exp(s − max).

    The lab's rows are short (n ≤ 10 keys), where torch.softmax, built for long rows, measured
    several times slower here. No row is ever fully masked (a query always sees itself).
    Near and below log(smallest normal float), about −87 in float32, exp gives a denormal or 0,
    and the CPU's vectorised exp takes a path ~100× slower there (measured: a saturated unscaled
    row is full of such scores). Exponents are raised to one above that floor, which changes
    only weights below ~1e-37; masked keys still get exactly 0.
    """
    shifted = scores - scores.amax(dim=-1, keepdim=True)  # ≤ 0, −∞ where masked
    floor = math.log(torch.finfo(scores.dtype).tiny) + 1.0
    exponentials = shifted.clamp(min=floor).exp().masked_fill(torch.isneginf(shifted), 0.0)
    return exponentials / exponentials.sum(dim=-1, keepdim=True)


def attention_weights(params: Parameters, tokens: torch.Tensor, stack: Stack) -> torch.Tensor:
    """(R, B, n) tokens -> (R, B, n, n) attention weights; every row sums to 1."""
    return softmax_rows(masked_scores(params, tokens, stack))


def reachable(targets: torch.Tensor, causal: bool) -> torch.Tensor:
    """(..., n) bool: True where query i may see its target (always, unless the mask hides it)."""
    if not causal:
        return torch.ones_like(targets, dtype=torch.bool)
    return targets <= torch.arange(targets.shape[-1])  # the causal mask allows j ≤ i only


def loss(
    params: Parameters, tokens: torch.Tensor, targets: torch.Tensor, stack: Stack
) -> torch.Tensor:
    """(R,) each run's mean over the queries that can see their target of, per query i,

    squared:        Σ_j (α_ij − y_ij)²,  y_i = the one-hot row of the target key t(i);
    cross_entropy:  −log α_{i, t(i)}.
    """
    scores = masked_scores(params, tokens, stack)  # (R, B, n, n)
    n = tokens.shape[-1]
    # The weights themselves are compared, so the gradient passes through the softmax's slope,
    # as in a real layer whose loss reaches α only through the values it mixes.
    attn_weights = softmax_rows(scores)  # (R, B, n, n)
    wanted = F.one_hot(targets, n).to(attn_weights.dtype)  # (R, B, n, n)
    per_query = ((attn_weights - wanted) ** 2).sum(dim=-1)  # (R, B, n)
    uses_log = stack.cross_entropy()  # (R, 1, 1)
    if uses_log.any():
        # −log softmax(s_i)_t computed as logsumexp(s_i) − s_it: a tiny weight cannot round to
        # 0 and give log 0, and the exponential inside the softmax is undone by the log.
        flat = F.cross_entropy(scores.reshape(-1, n), targets.reshape(-1), reduction="none")
        per_query = torch.where(uses_log, flat.view(targets.shape), per_query)  # (R, B, n)
    visible = reachable(targets, stack.shared.causal)  # (R, B, n)
    counted = per_query.where(visible, 0.0)  # a hidden target is left out (its log α is −∞)
    return counted.sum(dim=(1, 2)) / visible.sum(dim=(1, 2))


@dataclass(frozen=True)
class Score:
    """How each run's attention compares with the target pattern: one entry per run."""

    mass: np.ndarray  # (R,) mean α_{i, t(i)}: the weight put on the right key (1 = perfect)
    accuracy: np.ndarray  # (R,) share of queries whose largest weight is on the right key only
    spread: np.ndarray  # (R,) standard deviation of the scores the mask leaves visible
    locked: np.ndarray  # (R,) share of queries with ≥ LOCKED_WEIGHT on one wrong key


def score_spread(scores: torch.Tensor) -> torch.Tensor:
    """(R, ...) scores -> (R,) standard deviation (n − 1) of each run's finite scores."""
    visible = scores.isfinite()
    dims = tuple(range(1, scores.dim()))
    count = visible.sum(dim=dims)
    mean = scores.where(visible, 0.0).sum(dim=dims) / count
    centred = (scores - mean.view(-1, *[1] * len(dims))).where(visible, 0.0)
    return ((centred**2).sum(dim=dims) / (count - 1)).sqrt()


def measure(scores: torch.Tensor, targets: torch.Tensor) -> Score:
    """(R, B, n, n) scores and (R, B, n) targets -> each run's Score."""
    attn_weights = softmax_rows(scores)
    is_target = F.one_hot(targets, attn_weights.shape[-1]).bool()  # (R, B, n_q, n_k)
    on_target = attn_weights.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (R, B, n)
    # A hit needs the target strictly above every other key: a row split evenly between two
    # copies of a word is a tie, not an answer (argmax alone would pick the first copy).
    best_other = attn_weights.masked_fill(is_target, -1.0).amax(dim=-1)  # (R, B, n)
    hit = on_target > best_other
    locked = best_other >= LOCKED_WEIGHT  # a wrong key holds (nearly) all of the row
    return Score(
        mass=on_target.mean(dim=(1, 2)).double().numpy(),
        accuracy=hit.double().mean(dim=(1, 2)).numpy(),
        spread=score_spread(scores).double().numpy(),
        locked=locked.double().mean(dim=(1, 2)).numpy(),
    )


def bilinear_form(params: Parameters, stack: Stack) -> torch.Tensor:
    """(R, m, m) = E W_qᵀ W_k Eᵀ (/ √d_head), E = the V token rows, then the n position rows.

    Entry (a, b) is what embedding row a, as a query, adds to the score of row b as a key:
    s_ij = x_iᵀ W_qᵀ W_k x_j, and x is a sum of rows, so s_ij is a sum of these entries.
    """
    rows = [params.token_embedding]
    if stack.shared.positions:
        rows.append(params.position_embedding)
    embeddings = torch.cat(rows, dim=1)  # (R, m, d_model), m = V (+ n)
    return embeddings @ query_key_map(params, stack) @ embeddings.transpose(1, 2)  # (R, m, m)


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


@dataclass
class Adam:
    """Adam (Kingma & Ba, 2015), torch's own update: each parameter moves by about lr per step.

    m ← β₁m + (1 − β₁)g,  v ← β₂v + (1 − β₂)g²,  p ← p − lr · m̂ / (√v̂ + ε),
    with m̂ = m / (1 − β₁ᵗ) and v̂ = v / (1 − β₂ᵗ) undoing the zero start of m and v. Element by
    element: stacked runs do not touch each other.
    """

    # torch.optim.Adam's constructor imports torch._dynamo; adam() is its update without that
    # import (bench/bench_lab.py --imports).
    params: list[torch.Tensor]
    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    moments: list[torch.Tensor] = field(init=False)  # m, one per parameter
    squares: list[torch.Tensor] = field(init=False)  # v, one per parameter
    steps: list[torch.Tensor] = field(init=False)  # t, one per parameter, as adam() counts it

    def __post_init__(self) -> None:
        self.moments = [torch.zeros_like(p) for p in self.params]
        self.squares = [torch.zeros_like(p) for p in self.params]
        self.steps = [torch.tensor(0.0) for _ in self.params]

    @torch.no_grad()
    def step(self, gradients: list[torch.Tensor]) -> None:
        """Update every parameter in place from its gradient."""
        adam(
            [p.detach() for p in self.params],
            gradients,
            self.moments,
            self.squares,
            [],  # no AMSGrad maxima
            self.steps,
            foreach=False,
            capturable=False,
            differentiable=False,
            fused=None,
            grad_scale=None,
            found_inf=None,
            has_complex=False,
            amsgrad=False,
            beta1=self.beta1,
            beta2=self.beta2,
            lr=self.lr,
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
        )


N_SNAPSHOTS = 50  # pictures kept along the way: enough for a smooth slider, small to send
N_EVAL_SEQUENCES = 256  # held-out sequences, drawn once per run, scored at every snapshot
EVAL_CHUNK_BYTES = 24_000_000  # held-out scoring is done a few runs at a time, within this


@dataclass(frozen=True)
class TrainingRun:
    """One run: the loss at every step and, at each snapshot, held-out measures and pictures.

    Memory: ~50 snapshots × ((n × n) + (V + n)² + 4) floats, under 100 kB.
    """

    settings: Settings
    loss: np.ndarray  # (steps,) training loss of each step's batch, before its update
    snapshot_steps: np.ndarray  # (k,) updates done when each snapshot was taken, 0 … steps
    probe_attention: np.ndarray  # (k, n, n) weights on the task's probe sequence
    bilinear: np.ndarray  # (k, m, m) the bilinear form of W_qᵀW_k over the embedding rows
    eval_mass: np.ndarray  # (k,) mean weight on the target key, held-out sequences
    eval_accuracy: np.ndarray  # (k,) argmax accuracy, held-out sequences
    score_spread: np.ndarray  # (k,) standard deviation of the held-out scores (unmasked pairs)
    locked_share: np.ndarray  # (k,) held-out queries with ≥ LOCKED_WEIGHT on one wrong key
    probe_targets: np.ndarray  # (n,) the probe's target keys
    reachable_share: float  # share of held-out queries whose target the mask leaves visible
    seconds: float  # wall time of the training loop (of the whole stack it was trained in)

    @property
    def task(self) -> Task:
        return TASKS[self.settings.task]

    @property
    def initial_score_std(self) -> float:
        """Spread of the held-out scores before training."""
        return float(self.score_spread[0])

    @property
    def solved(self) -> bool:
        """At least SOLVED_ACCURACY of the held-out queries right after the last step."""
        return bool(self.eval_accuracy[-1] >= SOLVED_ACCURACY)

    @property
    def probe_tokens(self) -> list[str]:
        return [self.task.vocabulary[token] for token in self.task.probe]

    @property
    def bilinear_labels(self) -> list[str]:
        labels = list(self.task.vocabulary)
        if self.settings.positions:
            labels += [f"p{i}" for i in range(self.task.n_tokens)]  # position i's vector
        return labels

    def snapshot_index(self, step: int) -> int:
        """Index of the last snapshot taken at or before `step` (any int; clamped to the run)."""
        return max(0, int(np.searchsorted(self.snapshot_steps, step, side="right")) - 1)

    @property
    def target_pattern(self) -> np.ndarray:
        """(n, n) one-hot rows: the attention map that solves the probe."""
        n = len(self.probe_targets)
        return np.eye(n, dtype=np.float32)[self.probe_targets]


def snapshot_steps(steps: int, n_snapshots: int = N_SNAPSHOTS) -> np.ndarray:
    """Step counts 0, every, 2·every, … and the last step, every = max(1, steps // n_snapshots)."""
    every = max(1, steps // n_snapshots)
    return np.unique(np.append(np.arange(0, steps + 1, every), steps))


def map_moves(maps: np.ndarray) -> np.ndarray:
    """(k, ..., n, n) attention maps -> (k − 1, ...) how far each map moved from the one before:
    the share of a row's weight that changed keys, ½ Σ_j |α_ij − α'_ij|, averaged over the rows.

    0 = the same map; 1 = every row moved all its weight (one-hot rows that all changed key).
    """
    moved_per_row = 0.5 * np.abs(np.diff(maps, axis=0)).sum(axis=-1)  # (k − 1, ..., n)
    return moved_per_row.mean(axis=-1)


# A page's run snapshots the probe map again once it has moved by this much (map_moves): well
# under what one of Play's ~50 frames moves on the default runs (about 0.05), so frames chosen
# among the snapshots are spaced by the map's moves, not by where snapshots happened to fall.
SNAPSHOT_MOVES = 0.01


EVAL_BYTES_PER_RUN = 4 * 10  # float32 (n × n) per held-out sequence: scores, weights, masks …
STACK_OVERHEAD_BYTES = 8_000_000  # what a stack of any size holds besides its tensors


def eval_runs_per_chunk(stack: Stack) -> int:
    """How many runs to score on the held-out sequences at once within EVAL_CHUNK_BYTES."""
    n = stack.task.n_tokens
    per_run = EVAL_BYTES_PER_RUN * N_EVAL_SEQUENCES * n * n
    return max(1, EVAL_CHUNK_BYTES // per_run)


def kept_bytes(settings: Settings, n_snapshots: int = N_SNAPSHOTS) -> int:
    """Bytes of the arrays a finished TrainingRun keeps."""
    task = TASKS[settings.task]
    n, m = task.n_tokens, len(task.vocabulary) + task.n_tokens
    k = len(snapshot_steps(settings.steps, n_snapshots))
    pictures = 4 * k * (n * n + m * m)  # float32 probe maps and bilinear forms
    curves = 8 * (settings.steps + 5 * k + n)  # float64 loss and measures, int64 steps, targets
    return pictures + curves


def stack_bytes(runs: Sequence[Settings], n_snapshots: int = N_SNAPSHOTS) -> int:
    """Bytes a stack holds while it trains, an upper estimate: what the door admits it for.

    Per run: the parameters with their gradients and Adam's two moments (4 copies); one step's
    batch of (n × n) tensors with what autograd keeps for the backward pass (~20 of them) and
    the (V·n)² score table (~6 copies); the held-out sequences; the pictures and curves kept.
    Plus one chunk of held-out scoring; all of it doubled, and STACK_OVERHEAD_BYTES, for the
    allocator's slack and autograd's bookkeeping. Measured here (peak resident memory grown):
    40 runs at d_head 128, 64–75 MB (estimated 105 MB); 4 runs, 13 MB (21 MB); one run of 500
    steps, 4 MB (13 MB).
    """
    shared = runs[0]
    task = TASKS[shared.task]
    n, vocabulary = task.n_tokens, len(task.vocabulary)
    m, possible = vocabulary + n, vocabulary * n
    floats = (
        4 * (m * D_MODEL + 2 * shared.d_head * D_MODEL)  # parameters, gradients, m, v
        + 20 * shared.batch_size * n * n  # one step's (n × n) tensors, forward and backward
        + 6 * possible * possible  # the score table, its gradient and products
        + (n_snapshots + 1) * (n * n + m * m + 4)  # pictures and curves
    )
    per_run = 4 * floats + 2 * 8 * N_EVAL_SEQUENCES * n  # + held-out tokens and targets (int64)
    chunk = min(len(runs), eval_runs_per_chunk(Stack((shared,))))
    scoring = chunk * EVAL_BYTES_PER_RUN * N_EVAL_SEQUENCES * n * n
    return int(2 * (len(runs) * per_run + scoring)) + STACK_OVERHEAD_BYTES


@contextlib.contextmanager
def denormals_flushed() -> Iterator[None]:
    """Inside: float results below ~1e-38 (denormals) are flushed to zero, on this thread only.

    A saturated row's backward pass multiplies tiny weights into denormals, which this CPU
    computes ~100× slower (measured); flushed to zero they change nothing measurable. The flag
    lives in the calling thread's floating-point control register, so other sessions' threads
    never see it, and it is cleared on the way out.
    """
    supported = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if supported:
            torch.set_flush_denormal(False)


def train(
    runs: Sequence[Settings],
    on_step: Callable[[int, int], None] | None = None,
    n_snapshots: int = N_SNAPSHOTS,
    snapshot_moves: float | None = None,
) -> list[TrainingRun]:
    """Train runs side by side (a Stack), each with Adam on fresh random batches drawn from its
    own seed; on_step(done, total) reports after each update. Returns one TrainingRun per run.

    Snapshots at the steps of snapshot_steps(steps, n_snapshots), and, when snapshot_moves is
    given, after any update that leaves a run's probe map moved by that much or more
    (map_moves) since the last snapshot: they crowd where the map changes, one per step while
    it changes fast, and skip the steps where it sits still (a snapshot scores the held-out
    sequences, about the cost of an update). Snapshots only look (no random draws), so they
    change what is kept, not the run.
    """
    stack = Stack(tuple(runs))
    shared, task, n_runs = stack.shared, stack.task, len(stack.runs)
    generators = [torch.Generator().manual_seed(settings.seed) for settings in stack.runs]
    # Each run draws from its own generator in one order: its start, its held-out sequences,
    # then one batch per step. So a run is the same run in any stack.
    starts = [init_parameters(task, shared.d_head, generator) for generator in generators]
    params = stack_parameters(starts, [start_factor(settings) for settings in stack.runs])
    held_out = [make_batch(task, N_EVAL_SEQUENCES, generator) for generator in generators]
    eval_tokens = torch.stack([tokens for tokens, _ in held_out])  # (R, N_EVAL, n)
    eval_targets = torch.stack([targets for _, targets in held_out])  # (R, N_EVAL, n)
    probe = torch.tensor(task.probe).expand(n_runs, 1, task.n_tokens)  # (R, 1, n)
    probe_targets = task_targets(task, probe[0])[0]  # (n,)
    optimizer = Adam(params.tensors(), lr=shared.learning_rate)
    keep_set = set(snapshot_steps(shared.steps, n_snapshots).tolist())
    taken: list[int] = []  # the steps snapshotted
    chunk = eval_runs_per_chunk(stack)
    losses: list[torch.Tensor] = []  # (R,) per step
    pictures: list[tuple[torch.Tensor, torch.Tensor]] = []  # probe (R, n, n), form (R, m, m)
    scores: list[list[Score]] = []  # per snapshot, one Score per chunk of runs

    @torch.no_grad()
    def probe_map() -> torch.Tensor:
        """(R, n, n) every run's attention on the probe sequence now."""
        return attention_weights(params, probe, stack)[:, 0]

    def moved_enough(now: torch.Tensor) -> bool:
        """Some run's probe map moved by snapshot_moves or more since the last snapshot."""
        if snapshot_moves is None or not pictures:
            return False
        maps = torch.stack([pictures[-1][0], now]).double().numpy()  # (2, R, n, n)
        return bool((map_moves(maps) >= snapshot_moves).any())

    @torch.no_grad()
    def snapshot(step: int, now: torch.Tensor) -> None:
        taken.append(step)
        pictures.append((now, bilinear_form(params, stack)))
        chunks = []
        for start in range(0, n_runs, chunk):  # a few runs at a time: bounded memory
            stop = start + chunk
            chunk_scores = masked_scores(
                params.part(start, stop), eval_tokens[start:stop], stack.part(start, stop)
            )
            chunks.append(measure(chunk_scores, eval_targets[start:stop]))
        scores.append(chunks)

    started = time.perf_counter()
    with denormals_flushed():
        for step in range(shared.steps + 1):
            now = probe_map() if snapshot_moves is not None or step in keep_set else None
            if step in keep_set or moved_enough(now):
                snapshot(step, now)
            if step == shared.steps:
                break
            # 1. A fresh batch per run, 2. each run's loss on it, 3. one Adam update.
            tokens = torch.stack(
                [draw_tokens(task, shared.batch_size, generator) for generator in generators]
            )  # (R, B, n)
            targets = task_targets(task, tokens.flatten(0, 1)).view(tokens.shape)  # (R, B, n)
            run_losses = loss(params, tokens, targets, stack)  # (R,)
            # The sum's gradient with respect to run r's tensors is run r's own loss's gradient.
            # Without positions the position table is unused: its gradient is zero, Adam keeps it.
            gradients = torch.autograd.grad(
                run_losses.sum(), params.tensors(), allow_unused=True, materialize_grads=True
            )
            optimizer.step(list(gradients))
            losses.append(run_losses.detach())
            if on_step is not None:
                on_step(step + 1, shared.steps)
    seconds = time.perf_counter() - started

    def per_snapshot(name: str) -> np.ndarray:
        """(k, R) one Score field at every snapshot, chunks joined."""
        return np.stack([np.concatenate([getattr(s, name) for s in chunks]) for chunks in scores])

    mass, accuracy = per_snapshot("mass"), per_snapshot("accuracy")
    spread, locked = per_snapshot("spread"), per_snapshot("locked")
    loss_history = torch.stack(losses).double().numpy() if losses else np.zeros((0, n_runs))
    probe_history = torch.stack([probe for probe, _ in pictures]).numpy()  # (k, R, n, n)
    form_history = torch.stack([form for _, form in pictures]).numpy()  # (k, R, m, m)
    visible = reachable(eval_targets, shared.causal).double().mean(dim=(1, 2)).numpy()  # (R,)
    # Copies, not views: the door counts a view by its whole buffer, the stack's.
    return [
        TrainingRun(
            settings=settings,
            loss=loss_history[:, r].copy(),
            snapshot_steps=np.array(taken),
            probe_attention=probe_history[:, r].copy(),
            bilinear=form_history[:, r].copy(),
            eval_mass=mass[:, r].copy(),
            eval_accuracy=accuracy[:, r].copy(),
            score_spread=spread[:, r].copy(),
            locked_share=locked[:, r].copy(),
            probe_targets=probe_targets.numpy().copy(),
            reachable_share=float(visible[r]),
            seconds=seconds,
        )
        for r, settings in enumerate(stack.runs)
    ]


def train_one(
    settings: Settings,
    on_step: Callable[[int, int], None] | None = None,
    n_snapshots: int = N_SNAPSHOTS,
    snapshot_moves: float | None = None,
) -> TrainingRun:
    """One run: a stack of one."""
    return train([settings], on_step, n_snapshots, snapshot_moves)[0]


# ---------------------------------------------------------------------------------------------
# Many seeds side by side: does 1/√d_head help, and is it the start or the training?
# ---------------------------------------------------------------------------------------------

# "Clearly more often": a one-sided Fisher exact test below this. Ten seeds a cell at 0.05 let
# borderline counts decide a verdict that another block of seeds reversed.
CLEAR_P = 0.01
COMPARISON_SNAPSHOTS = 20  # the comparison keeps curves, not a slider: fewer snapshots


@dataclass(frozen=True)
class Start:
    """One way the comparison trains a head: with 1/√d_head or without, from its own starting
    score spread or from the other head's (Settings.start_at_other_spread)."""

    scale: bool
    other_spread: bool

    @property
    def label(self) -> str:
        head = "scaled" if self.scale else "unscaled"
        if not self.other_spread:
            return head
        return f"{head}, started at the {'unscaled' if self.scale else 'scaled'} spread"


SCALED, UNSCALED = Start(True, False), Start(False, False)
UNSCALED_NARROW, SCALED_WIDE = Start(False, True), Start(True, True)
STARTS = (SCALED, UNSCALED, UNSCALED_NARROW, SCALED_WIDE)


def comparison_settings(
    task: str, start: Start, d_head: int, steps: int, loss_name: str, seeds: int
) -> list[Settings]:
    """The runs of one cell of the comparison: seeds 0 … seeds − 1, other switches default."""
    return [
        Settings(
            task=task,
            d_head=d_head,
            scale=start.scale,
            start_at_other_spread=start.other_spread,
            steps=steps,
            loss=loss_name,
            seed=seed,
        )
        for seed in range(seeds)
    ]


@dataclass(frozen=True)
class Comparison:
    """Every start of STARTS on every task, once per seed; each run is the run Train gives for
    the same settings (same seed, same numbers)."""

    d_head: int
    steps: int
    loss: str
    seeds: int
    tasks: tuple[str, ...]
    runs: dict[tuple[str, Start], tuple[TrainingRun, ...]]  # one run per seed, seed order
    seconds: float  # wall time of all the training loops together

    @property
    def seed_list(self) -> list[int]:
        """The seeds of every cell, in order."""
        return [run.settings.seed for run in self.runs[self.tasks[0], SCALED]]

    def solved(self, task: str, start: Start) -> int:
        return sum(run.solved for run in self.runs[task, start])

    def mean_mass(self, task: str, start: Start) -> float:
        """Mean over seeds of the final held-out weight on the right key."""
        return float(np.mean([run.eval_mass[-1] for run in self.runs[task, start]]))

    def snapshot_steps(self, task: str) -> np.ndarray:
        return self.runs[task, SCALED][0].snapshot_steps

    def median_spread(self, task: str, start: Start) -> np.ndarray:
        """(k,) median over seeds of the held-out score spread at each snapshot."""
        return np.median([run.score_spread for run in self.runs[task, start]], axis=0)

    def mean_locked(self, task: str, start: Start) -> np.ndarray:
        """(k,) mean over seeds of the share of rows locked on a wrong key at each snapshot."""
        return np.mean([run.locked_share for run in self.runs[task, start]], axis=0)

    def early_growth(self, task: str, start: Start) -> float:
        """How much the median score spread grew over the first snapshot interval."""
        spread = self.median_spread(task, start)
        return float(spread[1] - spread[0])

    def growth_ratio(self, task: str) -> float:
        """Early spread growth of the unscaled head started at the scaled spread over that of
        the scaled head: both start at the same spread, only the 1/√d_head differs."""
        scaled = self.early_growth(task, SCALED)
        narrow = self.early_growth(task, UNSCALED_NARROW)
        return narrow / scaled if scaled > 0 else math.inf

    def peak_locked(self, task: str, start: Start) -> float:
        """The largest share of rows locked on a wrong key at any snapshot (mean over seeds)."""
        return float(self.mean_locked(task, start).max())

    def verdict(self, task: str) -> Verdict:
        return Verdict(*(self.solved(task, start) for start in STARTS), seeds=self.seeds)


def compare(
    tasks: Sequence[str],
    d_head: int,
    steps: int,
    loss_name: str,
    seeds: int,
    on_step: Callable[[int, int], None] | None = None,
) -> Comparison:
    """Train every start × seed, one stack per task; on_step(done, total) counts the updates of
    all the stacks together."""
    runs: dict[tuple[str, Start], tuple[TrainingRun, ...]] = {}
    seconds = 0.0
    for index, task in enumerate(tasks):
        stack = [
            settings
            for start in STARTS
            for settings in comparison_settings(task, start, d_head, steps, loss_name, seeds)
        ]

        def report(done: int, total: int, before: int = index * steps) -> None:
            if on_step is not None:
                on_step(before + done, len(tasks) * total)

        trained = train(stack, report, n_snapshots=COMPARISON_SNAPSHOTS)
        seconds += trained[0].seconds
        for position, start in enumerate(STARTS):
            runs[task, start] = tuple(trained[position * seeds : (position + 1) * seeds])
    return Comparison(d_head, steps, loss_name, seeds, tuple(tasks), runs, seconds)


def more_often_p(solved_a: int, solved_b: int, n: int) -> float:
    """One-sided Fisher exact test: if a and b solved equally often, the chance that a would
    solve solved_a or more of its n runs, given solved_a + solved_b solved of the 2n in all."""
    # imported on first use: scipy.stats adds hundreds of modules and tens of MB to a server
    # that may never compare seeds (bench/bench_lab.py --imports)
    from scipy.stats import fisher_exact

    table = [[solved_a, n - solved_a], [solved_b, n - solved_b]]
    return float(fisher_exact(table, alternative="greater").pvalue)


def clearly_more(solved_a: int, solved_b: int, n: int) -> bool:
    """a solved more of its n runs than b did, by more than chance would explain (CLEAR_P)."""
    return more_often_p(solved_a, solved_b, n) < CLEAR_P


@dataclass(frozen=True)
class Verdict:
    """What one task's comparison shows, from its solved counts (out of `seeds` each)."""

    scaled: int
    unscaled: int
    unscaled_narrow: int  # unscaled, started at the scaled spread
    scaled_wide: int  # scaled, started at the unscaled spread
    seeds: int

    @property
    def scale_helps(self) -> bool:
        return clearly_more(self.scaled, self.unscaled, self.seeds)

    @property
    def scale_hurts(self) -> bool:
        return clearly_more(self.unscaled, self.scaled, self.seeds)

    @property
    def narrow_start_rescues(self) -> bool:
        """The unscaled head did clearly better from the scaled head's starting spread."""
        return clearly_more(self.unscaled_narrow, self.unscaled, self.seeds)

    @property
    def wide_start_hurts(self) -> bool:
        """The scaled head did clearly worse from the unscaled head's starting spread."""
        return clearly_more(self.scaled, self.scaled_wide, self.seeds)

    @property
    def story(self) -> str:
        """'same': scaled and unscaled not clearly apart; 'reversed': unscaled clearly ahead;
        else which explanation the controls support: 'start' (both swaps move the outcome),
        'training' (neither does), or 'both' (one does)."""
        if self.scale_hurts:
            return "reversed"
        if not self.scale_helps:
            return "same"
        if self.narrow_start_rescues and self.wide_start_hurts:
            return "start"
        if not self.narrow_start_rescues and not self.wide_start_hurts:
            return "training"
        return "both"
