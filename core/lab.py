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

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn import functional as F

from core.attention import apply_mask, attention_scores, causal_mask, masked_softmax

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


def make_batch(
    task: Task, n_sequences: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """n_sequences random sequences of the task -> (tokens (B, n), targets (B, n)), both int64."""
    if task.name == "bracket":
        rows = torch.randint(len(_BRACKET_POOL), (n_sequences,), generator=generator)
        tokens = _BRACKET_POOL[rows]
        return tokens, bracket_targets(tokens)
    shape = (n_sequences, task.n_tokens)
    tokens = torch.randint(len(task.vocabulary), shape, generator=generator)
    if task.name == "previous":
        return tokens, previous_targets(tokens).clone()
    return tokens, first_occurrence_targets(tokens)


def task_targets(task: Task, tokens: torch.Tensor) -> torch.Tensor:
    """The targets of given (B, n) sequences of a task."""
    rule = {
        "previous": previous_targets,
        "first": first_occurrence_targets,
        "bracket": bracket_targets,
    }[task.name]
    return rule(tokens)


# ---------------------------------------------------------------------------------------------
# The model: embeddings, W_q, W_k and one softmax
# ---------------------------------------------------------------------------------------------

D_MODEL = 32  # embedding width: enough room for 8 words and 10 positions to be told apart


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


@dataclass(frozen=True)
class Parameters:
    """The trainable tensors of the one-head model (torch's (out, in) layout for W_q and W_k)."""

    token_embedding: torch.Tensor  # (V, d_model)
    position_embedding: torch.Tensor  # (n, d_model)
    w_query: torch.Tensor  # (d_head, d_model)
    w_key: torch.Tensor  # (d_head, d_model)

    def tensors(self) -> list[torch.Tensor]:
        return [self.token_embedding, self.position_embedding, self.w_query, self.w_key]


def init_parameters(
    task: Task,
    d_head: int,
    generator: torch.Generator,
    d_model: int = D_MODEL,
    dtype: torch.dtype = torch.float32,
) -> Parameters:
    """Embeddings N(0, 1); W_q, W_k N(0, 1/d_model), so each query/key entry has variance ≈ 1.

    With that start, an unscaled score q·k has variance ≈ d_head (a wide head starts with
    a nearly one-hot softmax) and a scaled one variance ≈ 1, whatever d_head.
    """

    def normal(*shape: int, std: float = 1.0) -> torch.Tensor:
        values = torch.randn(*shape, generator=generator, dtype=dtype) * std
        return values.requires_grad_()

    return Parameters(
        token_embedding=normal(len(task.vocabulary), d_model),
        position_embedding=normal(task.n_tokens, d_model),
        w_query=normal(d_head, d_model, std=d_model**-0.5),
        w_key=normal(d_head, d_model, std=d_model**-0.5),
    )


def masked_scores(params: Parameters, tokens: torch.Tensor, settings: Settings) -> torch.Tensor:
    """(B, n) tokens -> (B, n, n) scores s_ij, −inf where the causal mask forbids j > i."""
    x = params.token_embedding[tokens]  # (B, n, d_model)
    if settings.positions:
        n = tokens.shape[1]
        x = x + params.position_embedding[:n]  # (n, d_model) broadcasts over the B sequences
    query = x @ params.w_query.T  # (B, n, d_head)
    key = x @ params.w_key.T  # (B, n, d_head)
    scores = attention_scores(query, key, scale=settings.scale)  # (B, n_q, n_k)
    mask = causal_mask(tokens.shape[1]) if settings.causal else None
    return apply_mask(scores, mask)


def attention_weights(params: Parameters, tokens: torch.Tensor, settings: Settings) -> torch.Tensor:
    """(B, n) tokens -> (B, n, n) attention weights; every row sums to 1."""
    return masked_softmax(masked_scores(params, tokens, settings))


def reachable(targets: torch.Tensor, causal: bool) -> torch.Tensor:
    """(B, n) bool: True where query i may see its target (always, unless the mask hides it)."""
    if not causal:
        return torch.ones_like(targets, dtype=torch.bool)
    return targets <= torch.arange(targets.shape[1])  # the causal mask allows j ≤ i only


def loss(
    params: Parameters, tokens: torch.Tensor, targets: torch.Tensor, settings: Settings
) -> torch.Tensor:
    """Mean over the queries that can see their target (a scalar) of, per query i,

    squared:        Σ_j (α_ij − y_ij)²,  y_i = the one-hot row of the target key t(i);
    cross_entropy:  −log α_{i, t(i)}.
    """
    scores = masked_scores(params, tokens, settings)  # (B, n, n)
    n = tokens.shape[1]
    if settings.loss == "cross_entropy":
        # −log softmax(s_i)_t computed as logsumexp(s_i) − s_it: a tiny weight cannot round to 0
        # and give log 0, and the exponential inside the softmax is undone by the log.
        flat = F.cross_entropy(scores.reshape(-1, n), targets.reshape(-1), reduction="none")
        per_query = flat.reshape(targets.shape)  # (B, n)
    else:
        # The weights themselves are compared, so the gradient passes through the softmax's
        # slope, as in a real layer whose loss reaches α only through the values it mixes.
        attn_weights = masked_softmax(scores)  # (B, n, n)
        wanted = F.one_hot(targets, n).to(attn_weights.dtype)  # (B, n, n)
        per_query = ((attn_weights - wanted) ** 2).sum(dim=2)  # (B, n)
    return per_query[reachable(targets, settings.causal)].mean()


@dataclass(frozen=True)
class Score:
    """How close attention is to the target pattern on a set of sequences."""

    mass: float  # mean α_{i, t(i)}: the weight put on the right key (1 = perfect)
    accuracy: float  # share of queries whose largest weight is on the right key, and only there


def evaluate(attn_weights: torch.Tensor, targets: torch.Tensor) -> Score:
    """(B, n, n) weights and (B, n) targets -> mean target weight and argmax accuracy."""
    is_target = F.one_hot(targets, attn_weights.shape[2]).bool()  # (B, n_q, n_k)
    on_target = attn_weights.gather(2, targets.unsqueeze(2)).squeeze(2)  # (B, n)
    # A hit needs the target strictly above every other key: a row split evenly between two
    # copies of a word is a tie, not an answer (argmax alone would pick the first copy).
    best_other = attn_weights.masked_fill(is_target, -1.0).amax(dim=2)  # (B, n)
    hit = on_target > best_other
    return Score(mass=float(on_target.mean()), accuracy=float(hit.float().mean()))


def bilinear_form(params: Parameters, settings: Settings) -> torch.Tensor:
    """(m, m) = E W_qᵀ W_k Eᵀ (/ √d_head), E = the V token rows, then the n position rows.

    Entry (a, b) is what embedding row a, as a query, adds to the score of row b as a key:
    s_ij = x_iᵀ W_qᵀ W_k x_j, and x is a sum of rows, so s_ij is a sum of these entries.
    """
    rows = [params.token_embedding]
    if settings.positions:
        rows.append(params.position_embedding)
    embeddings = torch.cat(rows)  # (m, d_model), m = V (+ n)
    form = embeddings @ params.w_query.T @ params.w_key @ embeddings.T  # (m, m)
    return form * params.w_query.shape[0] ** -0.5 if settings.scale else form


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


@dataclass
class Adam:
    """Adam (Kingma & Ba, 2015), written out: each parameter moves by about lr per step.

    m ← β₁m + (1 − β₁)g,  v ← β₂v + (1 − β₂)g²,  p ← p − lr · m̂ / (√v̂ + ε),
    with m̂ = m / (1 − β₁ᵗ) and v̂ = v / (1 − β₂ᵗ) undoing the zero start of m and v.
    (torch.optim.Adam computes the same; its first use imports torch._dynamo, which costs
    seconds and ~800 modules on a server that otherwise never needs them.)
    """

    params: list[torch.Tensor]
    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    moments: list[torch.Tensor] = field(init=False)  # m, one per parameter
    squares: list[torch.Tensor] = field(init=False)  # v, one per parameter

    def __post_init__(self) -> None:
        self.moments = [torch.zeros_like(p) for p in self.params]
        self.squares = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, gradients: list[torch.Tensor], t: int) -> None:
        """Update every parameter in place from its gradient; t counts updates from 1."""
        correction1, correction2 = 1 - self.beta1**t, 1 - self.beta2**t
        for p, g, m, v in zip(self.params, gradients, self.moments, self.squares, strict=True):
            m.mul_(self.beta1).add_(g, alpha=1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denominator = (v / correction2).sqrt_().add_(self.eps)  # √v̂ + ε
            p.addcdiv_(m, denominator, value=-self.lr / correction1)  # − lr · m̂ / (√v̂ + ε)


N_SNAPSHOTS = 50  # pictures kept along the way: enough for a smooth slider, small to send
N_EVAL_SEQUENCES = 256  # held-out sequences, drawn once per run, scored at every snapshot


@dataclass(frozen=True)
class TrainingRun:
    """One run: the loss at every step and snapshots of attention and W_qᵀW_k along the way.

    Memory: ~50 snapshots × ((n × n) + (V + n)²) floats, under 100 kB.
    """

    settings: Settings
    loss: np.ndarray  # (steps,) training loss of each step's batch, before its update
    snapshot_steps: np.ndarray  # (k,) updates done when each snapshot was taken, 0 … steps
    probe_attention: np.ndarray  # (k, n, n) weights on the task's probe sequence
    bilinear: np.ndarray  # (k, m, m) the bilinear form of W_qᵀW_k over the embedding rows
    eval_mass: np.ndarray  # (k,) mean weight on the target key, held-out sequences
    eval_accuracy: np.ndarray  # (k,) argmax accuracy, held-out sequences
    probe_targets: np.ndarray  # (n,) the probe's target keys
    reachable_share: float  # share of held-out queries whose target the mask leaves visible
    initial_score_std: float  # spread of the held-out scores before training (unmasked pairs)
    seconds: float  # wall time of the training loop

    @property
    def task(self) -> Task:
        return TASKS[self.settings.task]

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


def train(settings: Settings, on_step: Callable[[int, int], None] | None = None) -> TrainingRun:
    """Train the one-head model with Adam on fresh random batches; on_step(done, total) reports."""
    task = TASKS[settings.task]
    generator = torch.Generator().manual_seed(settings.seed)
    params = init_parameters(task, settings.d_head, generator)
    eval_tokens, eval_targets = make_batch(task, N_EVAL_SEQUENCES, generator)
    probe = torch.tensor([task.probe])  # (1, n)
    probe_targets = task_targets(task, probe)[0]
    optimizer = Adam(params.tensors(), lr=settings.learning_rate)
    keep = set(snapshot_steps(settings.steps).tolist())
    losses, snapshots = [], []

    def snapshot() -> None:
        with torch.no_grad():
            score = evaluate(attention_weights(params, eval_tokens, settings), eval_targets)
            snapshots.append(
                (
                    attention_weights(params, probe, settings)[0].numpy().copy(),
                    bilinear_form(params, settings).numpy().copy(),
                    score,
                )
            )

    with torch.no_grad():
        initial_scores = masked_scores(params, eval_tokens, settings)
        initial_score_std = float(initial_scores[initial_scores.isfinite()].std())
    started = time.perf_counter()
    for step in range(settings.steps + 1):
        if step in keep:
            snapshot()
        if step == settings.steps:
            break
        # 1. A fresh batch, 2. the loss on it, 3. one Adam update.
        tokens, targets = make_batch(task, settings.batch_size, generator)
        batch_loss = loss(params, tokens, targets, settings)
        # Without positions the position table is unused: its gradient is zero, and Adam keeps it.
        gradients = torch.autograd.grad(
            batch_loss, params.tensors(), allow_unused=True, materialize_grads=True
        )
        optimizer.step(list(gradients), t=step + 1)
        losses.append(batch_loss.item())
        if on_step is not None:
            on_step(step + 1, settings.steps)
    seconds = time.perf_counter() - started

    probe_attention, bilinear, scores = zip(*snapshots, strict=True)
    return TrainingRun(
        settings=settings,
        loss=np.array(losses),
        snapshot_steps=np.array(sorted(keep)),
        probe_attention=np.stack(probe_attention),
        bilinear=np.stack(bilinear),
        eval_mass=np.array([score.mass for score in scores]),
        eval_accuracy=np.array([score.accuracy for score in scores]),
        probe_targets=probe_targets.numpy(),
        reachable_share=float(reachable(eval_targets, settings.causal).float().mean()),
        initial_score_std=initial_score_std,
        seconds=seconds,
    )
