"""Induction heads, found in a trained model and learned from scratch.

Found. Olsson et al. (2022) measured two kinds of head on a sequence of random tokens repeated
twice: r₀ r₁ … r_{T-1} r₀ r₁ … r_{T-1} (after a beginning-of-sequence token where the model has
one). With the first copy starting at position s, for every head:
    previous-token score  = mean over i in (s, s + 2T) of α_{i, i-1}
    induction score       = mean over i in [s + T, s + 2T) of α_{i, i-T+1}
The second copy's token at i saw the same token before, at i - T; the token after that earlier
occurrence, at i - T + 1, is the one that comes next. A head that attends there (and copies
what it finds) predicts the rest of the repeat. Random tokens carry no meaning and no grammar,
so nothing but the repeat tells a head where to look. The scores are a pure function of an
attention block (L, H, n, n) and where the copies sit, so any model's Trace can be measured.

Learned. An attention-only decoder (no feed-forward, no LayerNorm) is trained from scratch on
sequences that hold one random segment twice:
    [random prefix of random length] segment segment [random tail],  n tokens in all,
with the segment's length and the prefix's length drawn afresh for every sequence. The loss is
the next-token cross-entropy on the second copy, the only tokens a model can predict. The distance
from a token back to the token after its earlier occurrence (T - 1) changes from sequence to
sequence, so no head attending at a fixed offset can predict the repeat: it takes a head that
finds the earlier occurrence by its content. One such circuit (Elhage et al., 2021) needs two
layers: a layer-0 head writes "my previous token was a" into every position, and a layer-1 head
whose query is "a" finds the position written "previous was a" and copies its token. A single
layer has no earlier head to read from.

Everything is seeded through one torch.Generator, so a seed gives the same numbers every time
(on one torch thread; the caller chooses the thread count). Shapes: B sequences, n tokens, V
words, L layers, H heads, d_model residual width, d_head = d_model / H.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.nn import functional as F

from core.attention import (
    apply_mask,
    attention_scores,
    causal_mask,
    masked_softmax,
    merge_heads,
    split_heads,
)
from core.lab import Adam

if TYPE_CHECKING:
    from core.transformer import Transformer

# ---------------------------------------------------------------------------------------------
# Found: the two scores of every head, from an attention block and where the copies sit
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepeatLayout:
    """Where a segment and its repeat sit: copy one at [start, start + T), copy two right after."""

    start: int  # position of the first copy's first token (1 after a BOS token, else 0)
    segment_length: int  # T, tokens in one copy

    def __post_init__(self) -> None:
        if self.start < 0 or self.segment_length < 2:
            raise ValueError("a repeat needs a start ≥ 0 and a segment of at least 2 tokens")

    @property
    def second_start(self) -> int:
        """Position of the second copy's first token."""
        return self.start + self.segment_length

    @property
    def end(self) -> int:
        """One past the second copy's last token: the sequence holds at least this many."""
        return self.start + 2 * self.segment_length

    def previous_token_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(queries, keys): every token of the two copies after the first, and the token before."""
        queries = np.arange(self.start + 1, self.end)
        return queries, queries - 1

    def induction_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(queries, keys): every token of the second copy, and the token after its earlier
        occurrence (i − T + 1)."""
        queries = np.arange(self.second_start, self.end)
        return queries, queries - self.segment_length + 1


def mean_weight_on(attentions: np.ndarray, queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """(..., n, n) weights -> (...) mean of α[..., q_k, k_k] over the pairs (q_k, k_k), float64."""
    weights = np.asarray(attentions, dtype=np.float64)
    n = weights.shape[-1]
    if len(queries) == 0 or max(queries.max(), keys.max()) >= n:
        raise ValueError(f"the pairs need positions below the block's {n} tokens")
    return weights[..., queries, keys].mean(axis=-1)  # (..., pairs) -> (...)


def previous_token_scores(attentions: np.ndarray, layout: RepeatLayout) -> np.ndarray:
    """(..., n, n) -> (...): mean α_{i, i-1} over the tokens of both copies after the first."""
    return mean_weight_on(attentions, *layout.previous_token_pairs())


def induction_scores(attentions: np.ndarray, layout: RepeatLayout) -> np.ndarray:
    """(..., n, n) -> (...): mean α_{i, i-T+1} over the tokens of the second copy."""
    return mean_weight_on(attentions, *layout.induction_pairs())


SCORE_NAMES = {"previous_token": "previous-token score", "induction": "induction score"}


@dataclass(frozen=True)
class HeadScores:
    """(L, H) previous-token and induction score of every head, each in [0, 1]."""

    previous_token: np.ndarray  # (L, H)
    induction: np.ndarray  # (L, H)

    def grid(self, kind: str) -> np.ndarray:
        """(L, H) the scores of one kind: "previous_token" or "induction"."""
        return {"previous_token": self.previous_token, "induction": self.induction}[kind]

    def at_least(self, kind: str, bar: float) -> list[tuple[int, int]]:
        """(layer, head) of every head whose score of that kind is ≥ bar, in layer order."""
        return [(int(layer), int(head)) for layer, head in np.argwhere(self.grid(kind) >= bar)]

    def best(self, kind: str) -> tuple[int, int, float]:
        """(layer, head, score) of the head with the highest score of that kind."""
        grid = self.grid(kind)
        layer, head = np.unravel_index(int(np.argmax(grid)), grid.shape)
        return int(layer), int(head), float(grid[layer, head])


def head_scores(attentions: np.ndarray, layout: RepeatLayout) -> HeadScores:
    """One run's (L, H, n, n) attention block over a repeated sequence -> both scores per head."""
    return HeadScores(
        previous_token=previous_token_scores(attentions, layout),
        induction=induction_scores(attentions, layout),
    )


def mean_head_scores(
    attention_blocks: Sequence[np.ndarray], layouts: Sequence[RepeatLayout]
) -> HeadScores:
    """Several sequences' (L, H, n, n) blocks, each with its own layout -> scores averaged over
    the sequences (each sequence weighs the same)."""
    if not attention_blocks or len(attention_blocks) != len(layouts):
        raise ValueError("one layout per attention block, at least one block")
    scores = [
        head_scores(block, layout) for block, layout in zip(attention_blocks, layouts, strict=True)
    ]
    return HeadScores(
        previous_token=np.mean([s.previous_token for s in scores], axis=0),
        induction=np.mean([s.induction for s in scores], axis=0),
    )


@dataclass(frozen=True)
class RepeatedSequence:
    """Token ids holding a random segment twice, and where the copies are."""

    input_ids: np.ndarray  # (n,) int64: [BOS] segment segment
    layout: RepeatLayout


def repeated_sequence(
    candidate_ids: Sequence[int] | np.ndarray,
    segment_length: int,
    seed: int,
    bos_id: int | None = None,
) -> RepeatedSequence:
    """[bos_id] + segment + segment, the segment T ids drawn from candidate_ids (seeded).

    Drawn without replacement, so every token of the second copy occurs exactly once before it:
    the token after "its earlier occurrence" is one position, not a choice. The caller leaves
    special tokens out of the candidates.
    """
    candidates = np.unique(np.asarray(candidate_ids, dtype=np.int64))
    if len(candidates) < segment_length:
        raise ValueError(f"{segment_length} distinct tokens asked for, {len(candidates)} given")
    segment = np.random.default_rng(seed).choice(candidates, segment_length, replace=False)
    head = [] if bos_id is None else [bos_id]
    input_ids = np.concatenate([np.asarray(head, dtype=np.int64), segment, segment])
    return RepeatedSequence(input_ids, RepeatLayout(start=len(head), segment_length=segment_length))


# Measured on a loaded model: a few repeated sequences of its ordinary word pieces, wrapped in the
# specials its tokenizer puts around any text, each head's scores averaged over the sequences.
FOUND_SEGMENT_LENGTH = 25  # T: enough rows per score to average, short enough for any model
FOUND_SEQUENCES = 4  # seeds 0 … 3: one random draw alone can favour a head by chance


@dataclass(frozen=True)
class FoundScores:
    """Every head's two scores on a model, and the sequences they were measured on."""

    scores: HeadScores  # (L, H) each, averaged over the sequences
    n_sequences: int
    segment_length: int  # T
    n_tokens: int  # n of every sequence: specials + 2 T
    start_tokens: tuple[str, ...]  # the specials before the first copy ("[CLS]", "<s>" or none)
    end_tokens: tuple[str, ...]  # the specials after the second copy ("[SEP]" or none)
    even_spread: tuple[float, float]  # (previous-token, induction) score of a head that spreads
    # every row evenly over the keys it may see: what a score is worth before it means anything


def even_spread_scores(layout: RepeatLayout, n_tokens: int, causal: bool) -> tuple[float, float]:
    """(previous-token, induction) score of a head whose row i is uniform over its keys: 1/n for
    an encoder, 1/(i + 1) under a causal mask."""
    keys_seen = np.arange(1, n_tokens + 1) if causal else np.full(n_tokens, n_tokens)  # (n,)
    block = np.tril(np.ones((n_tokens, n_tokens))) if causal else np.ones((n_tokens, n_tokens))
    block = block / keys_seen[:, None]  # (n, n): rows sum to 1
    return float(previous_token_scores(block, layout)), float(induction_scores(block, layout))


def found_sequences(
    model: Transformer,
    n_sequences: int = FOUND_SEQUENCES,
    segment_length: int = FOUND_SEGMENT_LENGTH,
) -> list[RepeatedSequence]:
    """Seeded repeated sequences of the model's ordinary pieces (no specials, no added pieces),
    each as its tokenizer would frame a text: [CLS] r r [SEP] for BERT, r r for GPT-2."""
    start_ids, end_ids = model.tokenizer.template_ids()
    candidates = [i for i in model.tokenizer.plain_ids() if i < model.dims.vocab_size]
    room = (model.max_positions - len(start_ids) - len(end_ids)) // 2
    length = min(segment_length, room, len(candidates))
    sequences = []
    for seed in range(n_sequences):
        repeat = repeated_sequence(candidates, length, seed)  # segment segment, no BOS
        input_ids = np.concatenate(
            [np.asarray(start_ids, np.int64), repeat.input_ids, np.asarray(end_ids, np.int64)]
        )
        sequences.append(RepeatedSequence(input_ids, RepeatLayout(len(start_ids), length)))
    return sequences


def found_scores(
    model: Transformer,
    n_sequences: int = FOUND_SEQUENCES,
    segment_length: int = FOUND_SEGMENT_LENGTH,
) -> FoundScores:
    """Run the model (as trained: its own mask, scaled) on every found sequence and average each
    head's previous-token and induction scores over them."""
    sequences = found_sequences(model, n_sequences, segment_length)
    blocks = [model.run_ids(sequence.input_ids).attentions for sequence in sequences]
    first = sequences[0]
    start, length = first.layout.start, first.layout.segment_length
    return FoundScores(
        scores=mean_head_scores(blocks, [sequence.layout for sequence in sequences]),
        n_sequences=len(sequences),
        segment_length=length,
        n_tokens=len(first.input_ids),
        start_tokens=tuple(model.tokenizer.token_of(int(i)) for i in first.input_ids[:start]),
        end_tokens=tuple(
            model.tokenizer.token_of(int(i)) for i in first.input_ids[start + 2 * length :]
        ),
        even_spread=even_spread_scores(first.layout, len(first.input_ids), model.is_decoder),
    )


# ---------------------------------------------------------------------------------------------
# Learned: the task, an attention-only decoder, training
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InductionSettings:
    """Everything that decides a training run; equal settings give equal numbers."""

    n_layers: int = 2  # 2 can form an induction circuit; 1 cannot
    seed: int = 0
    max_steps: int = 400  # the run stops earlier once solved (the default: after ~200)
    vocab_size: int = 48  # V words
    n_tokens: int = 40  # n positions of every sequence
    shortest_segment: int = 8  # T is drawn from shortest … longest for every sequence
    longest_segment: int = 16
    d_model: int = 64
    n_heads: int = 4
    batch_size: int = 64
    learning_rate: float = 0.01  # Adam's step
    solved_loss: float = 0.1  # nats on the repeated half of the probe batch: ~90 % on the answer
    snapshot_every: int = 5  # steps between two measurements of the probe batch

    def __post_init__(self) -> None:
        if not 2 <= self.shortest_segment <= self.longest_segment:
            raise ValueError("segments need 2 ≤ shortest ≤ longest tokens")
        if 2 * self.longest_segment > self.n_tokens:
            raise ValueError("two copies of the longest segment must fit the sequence")
        if self.longest_prefix + self.longest_segment > self.vocab_size:
            # the prefix and the segment are drawn without repeats: they need that many words
            raise ValueError("the vocabulary is too small for the prefix and segment")
        if self.d_model % self.n_heads:
            raise ValueError("d_model must split evenly into the heads")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def longest_prefix(self) -> int:
        """Random words before the first copy: 0 … n − 2·longest, drawn per sequence."""
        return self.n_tokens - 2 * self.longest_segment

    @property
    def chance_loss(self) -> float:
        """ln V: the loss of a uniform guess over the vocabulary, in nats."""
        return math.log(self.vocab_size)


@dataclass(frozen=True)
class RepeatBatch:
    """B sequences, each [prefix] segment segment [tail], and where each one's copies sit."""

    tokens: torch.Tensor  # (B, n) int64
    starts: torch.Tensor  # (B,) int64: first copy's first position (= the prefix's length)
    segment_lengths: torch.Tensor  # (B,) int64: T of each sequence

    def layouts(self) -> list[RepeatLayout]:
        return [
            RepeatLayout(int(start), int(length))
            for start, length in zip(
                self.starts.tolist(), self.segment_lengths.tolist(), strict=True
            )
        ]

    def _predictions_between(self, first: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """(B, n - 1) bool: the prediction made at position i (of token i + 1) is in [first, last)."""
        position = torch.arange(self.tokens.shape[1] - 1)  # (n - 1,) where each prediction is made
        return (position >= first.unsqueeze(1)) & (position < last.unsqueeze(1))

    def first_half(self) -> torch.Tensor:
        """(B, n - 1) bool: predictions of the first copy's 2nd … T-th tokens (all random)."""
        return self._predictions_between(self.starts, self.starts + self.segment_lengths - 1)

    def repeated_half(self) -> torch.Tensor:
        """(B, n - 1) bool: predictions of the second copy's 2nd … T-th tokens (all repeats)."""
        second = self.starts + self.segment_lengths
        return self._predictions_between(second, second + self.segment_lengths - 1)


def make_batch(
    settings: InductionSettings, n_sequences: int, generator: torch.Generator
) -> RepeatBatch:
    """n_sequences fresh sequences: T and the prefix length drawn per sequence, then the words.

    The prefix and the segment are the first words of a random ordering of the vocabulary, so no
    word occurs twice before the second copy: every repeated token has one earlier occurrence,
    and the token after it is the answer. The tail after the second copy is uniform noise.
    """
    n, vocab_size = settings.n_tokens, settings.vocab_size
    # 1. Each sequence's segment length T and prefix length (0 … n − 2·longest: both copies fit).
    lengths = torch.randint(
        settings.shortest_segment, settings.longest_segment + 1, (n_sequences,), generator=generator
    )
    starts = torch.randint(settings.longest_prefix + 1, (n_sequences,), generator=generator)
    # 2. A random ordering of the vocabulary per sequence (argsort of uniform noise): (B, V).
    orderings = torch.rand(n_sequences, vocab_size, generator=generator).argsort(dim=1)
    tail = torch.randint(vocab_size, (n_sequences, n), generator=generator)
    # 3. Position p reads ordering[p] up to the first copy's end, ordering[p − T] in the second.
    position = torch.arange(n).unsqueeze(0)  # (1, n)
    length, start = lengths.unsqueeze(1), starts.unsqueeze(1)  # (B, 1)
    in_second_copy = position >= start + length
    index = torch.where(in_second_copy, position - length, position).clamp(max=vocab_size - 1)
    repeated = orderings.gather(1, index)  # (B, n)
    tokens = torch.where(position < start + 2 * length, repeated, tail)
    return RepeatBatch(tokens=tokens, starts=starts, segment_lengths=lengths)


@dataclass(frozen=True)
class AttentionLayer:
    """One layer's projections, every head side by side, in torch's (out, in) layout."""

    w_query: torch.Tensor  # (d_model, d_model): rows h·d_head … (h+1)·d_head − 1 are head h's
    w_key: torch.Tensor  # (d_model, d_model)
    w_value: torch.Tensor  # (d_model, d_model)
    w_out: torch.Tensor  # (d_model, d_model): the heads' concatenated outputs back to the stream


@dataclass(frozen=True)
class Decoder:
    """An attention-only decoder: embeddings, L attention layers on a residual stream, unembedding."""

    token_embedding: torch.Tensor  # (V, d_model)
    position_embedding: torch.Tensor  # (n, d_model), learned
    layers: tuple[AttentionLayer, ...]
    unembedding: torch.Tensor  # (V, d_model)
    n_heads: int

    def tensors(self) -> list[torch.Tensor]:
        weights = [self.token_embedding, self.position_embedding, self.unembedding]
        for layer in self.layers:
            weights += [layer.w_query, layer.w_key, layer.w_value, layer.w_out]
        return weights


def init_decoder(settings: InductionSettings, generator: torch.Generator) -> Decoder:
    """Embeddings N(0, 1); every matrix N(0, 1/d_model), so a projection keeps entries ~N(0, 1)."""
    d_model = settings.d_model

    def normal(*shape: int, std: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=generator) * std).requires_grad_()

    def matrix() -> torch.Tensor:
        return normal(d_model, d_model, std=d_model**-0.5)

    return Decoder(
        token_embedding=normal(settings.vocab_size, d_model),
        position_embedding=normal(settings.n_tokens, d_model),
        layers=tuple(
            AttentionLayer(matrix(), matrix(), matrix(), matrix()) for _ in range(settings.n_layers)
        ),
        unembedding=normal(settings.vocab_size, d_model, std=d_model**-0.5),
        n_heads=settings.n_heads,
    )


def forward(
    decoder: Decoder, tokens: torch.Tensor
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """(B, n) tokens -> (logits (B, n, V), one (B, H, n, n) attention block per layer), causal.

    x = E_tok[token] + E_pos[position]; per layer x ← x + W_out · concat_h(softmax(q_h k_hᵀ/√d_head) v_h);
    logits = x W_Uᵀ. The blocks are not stacked here: a training step does not need them, and
    stacking under autograd costs a copy of every weight forward and backward.

    The one layer loop outside core/transformer.py (OWN_LAYER_LOOP below names it). The
    Transformer there is the model the course explains: a loaded checkpoint of one of five
    families, read-only, every layer with its norms and feed-forward, and every sentence a page
    states about it read from its anatomy. This toy is not that model: it is trained here, from
    random weights, by autograd, and it is the smallest thing that can form an induction
    circuit, so it has neither norms nor a feed-forward, which no family lacks. Describing it as
    a Transformer would add an architecture no checkpoint has to the one the pages describe. Its
    attention is the explained model's own pieces (core/attention.py), so a head computes the
    same softmax(q kᵀ / √d_head) v in both.
    """
    n = tokens.shape[1]
    n_heads = decoder.n_heads
    x = decoder.token_embedding[tokens] + decoder.position_embedding[:n]  # (B, n, d_model)
    mask = causal_mask(n)  # (n, n): query i sees keys 0 … i
    attentions = []
    for layer in decoder.layers:
        query = split_heads(x @ layer.w_query.T, n_heads)  # (B, H, n, d_head)
        key = split_heads(x @ layer.w_key.T, n_heads)  # (B, H, n, d_head)
        value = split_heads(x @ layer.w_value.T, n_heads)  # (B, H, n, d_head)
        attn_weights = masked_softmax(
            apply_mask(attention_scores(query, key), mask)
        )  # (B, H, n, n)
        # (B, H, n, d_head) -> (B, n, d_model): the heads' outputs side by side
        concatenated = merge_heads(attn_weights @ value)
        x = x + concatenated @ layer.w_out.T  # the residual stream keeps what came before
        attentions.append(attn_weights)
    logits = x @ decoder.unembedding.T  # (B, n, V)
    return logits, tuple(attentions)


# The one exception to "the layer loop is written once" (forward's docstring says why), read by
# tests/test_architecture.py: a second function here that loops over layers still fails it.
OWN_LAYER_LOOP = forward


def next_token_losses(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """(B, n, V) logits, (B, n) tokens -> (B, n − 1): −log p(token i + 1 | tokens 0 … i), nats."""
    n_sequences, n, vocab_size = logits.shape
    flat = F.cross_entropy(
        logits[:, :-1].reshape(-1, vocab_size), tokens[:, 1:].reshape(-1), reduction="none"
    )
    return flat.view(n_sequences, n - 1)


N_PROBE_SEQUENCES = 64  # held-out sequences, drawn once per run, measured at every snapshot


def training_bytes(settings: InductionSettings) -> int:
    """Peak bytes a run holds while it trains: (6 L + 4) blocks of B × H × n × n float32.

    Autograd keeps each layer's scores, masked scores and weights, and the backward pass makes as
    many again; logits, the probe batch and the allocator's slack take about four blocks more.
    Measured here (peak RSS growth, defaults): 23 MB for 2 layers, 16 MB for 1; this gives 26
    and 16 MB.
    """
    block = (
        4 * max(settings.batch_size, N_PROBE_SEQUENCES) * settings.n_heads * settings.n_tokens**2
    )
    return (6 * settings.n_layers + 4) * block


@dataclass(frozen=True)
class InductionRun:
    """One training run: the two halves' loss per step and snapshots of every head's scores.

    Memory: a few hundred floats per array and one (L, H, n, n) block, well under 100 kB.
    """

    settings: InductionSettings
    first_half_loss: np.ndarray  # (steps,) training batch, before each update
    repeated_loss: np.ndarray  # (steps,) training batch, before each update
    snapshot_steps: np.ndarray  # (k,) updates done at each snapshot: 0, every, 2·every, …
    probe_first_half_loss: np.ndarray  # (k,) held-out probe batch
    probe_repeated_loss: np.ndarray  # (k,)
    previous_token: np.ndarray  # (k, L, H) previous-token score of every head on the probe batch
    induction: np.ndarray  # (k, L, H) induction score of every head on the probe batch
    solved_at: int | None  # updates done when the probe's repeated-half loss fell below the bar
    example_tokens: np.ndarray  # (n,) the first probe sequence
    example_layout: RepeatLayout
    example_attention: np.ndarray  # (L, H, n, n) its attention at the last snapshot
    seconds: float  # wall time of the training loop

    @property
    def steps(self) -> int:
        """Updates done (fewer than settings.max_steps when the run stopped early)."""
        return len(self.repeated_loss)

    def scores_at(self, index: int) -> HeadScores:
        """Both scores of every head at one snapshot."""
        return HeadScores(self.previous_token[index], self.induction[index])

    def crossings(
        self, threshold: float = 0.5, kind: str = "induction"
    ) -> dict[tuple[int, int], int]:
        """(layer, head) -> the first snapshot step where its score of that kind ("induction" or
        "previous_token") is ≥ threshold, for every head that gets there."""
        over_run = self.induction if kind == "induction" else self.previous_token  # (k, L, H)
        found = {}
        for layer, head in np.ndindex(*over_run.shape[1:]):
            above = np.flatnonzero(over_run[:, layer, head] >= threshold)
            if len(above):
                found[(layer, head)] = int(self.snapshot_steps[above[0]])
        return found

    def snapshot_index(self, step: int) -> int:
        """The last snapshot taken at or before `step` updates."""
        return max(0, int(np.searchsorted(self.snapshot_steps, step, side="right")) - 1)

    def fall(self, begun: float = 0.2, done: float = 0.8) -> LossFall | None:
        """How fast the probe's repeated-half loss fell below a uniform guess: the last snapshot
        before it had made `begun` of its way from ln V down to its final value, and the first
        where it had made `done` of it. None when the final loss is not below ln V."""
        chance, losses = self.settings.chance_loss, self.probe_repeated_loss  # (k,)
        final = float(losses[-1])
        if final >= chance:
            return None
        start = int(np.argmax(losses < chance - begun * (chance - final)))
        end = int(np.argmax(losses < chance - done * (chance - final)))
        before = max(start - 1, 0)
        return LossFall(
            int(self.snapshot_steps[before]),
            float(losses[before]),
            int(self.snapshot_steps[end]),
            float(losses[end]),
        )


@dataclass(frozen=True)
class LossFall:
    """The stretch of a run in which the held-out repeated-half loss fell most of its way."""

    from_step: int
    from_loss: float  # nats, held-out repeated half
    to_step: int
    to_loss: float

    @property
    def steps(self) -> int:
        return self.to_step - self.from_step


def train_induction(
    settings: InductionSettings, on_step: Callable[[int, int], None] | None = None
) -> InductionRun:
    """Train the decoder with Adam on fresh batches until solved or max_steps; on_step(done,
    total) reports after every update. The loss trains the repeated half only: the prefix and
    the first copy are random words that no model can predict (their best loss is about ln V),
    so training on them would add noise and no signal; their loss is recorded all the same."""
    generator = torch.Generator().manual_seed(settings.seed)
    decoder = init_decoder(settings, generator)
    probe = make_batch(settings, N_PROBE_SEQUENCES, generator)
    probe_layouts = probe.layouts()
    optimizer = Adam(decoder.tensors(), lr=settings.learning_rate)
    first_losses, repeated_losses = [], []
    snapshots: list[tuple[int, float, float, HeadScores]] = []
    example_attention = np.zeros(0)
    solved_at = None

    def snapshot(step: int) -> float:
        """Measure the probe batch; returns its repeated-half loss."""
        nonlocal example_attention
        with torch.no_grad():
            logits, attentions = forward(decoder, probe.tokens)
            per_prediction = next_token_losses(logits, probe.tokens)
        blocks = torch.stack(attentions, dim=1).numpy()  # L × (B, H, n, n) -> (B, L, H, n, n)
        scores = mean_head_scores(list(blocks), probe_layouts)
        repeated = float(per_prediction[probe.repeated_half()].mean())
        first = float(per_prediction[probe.first_half()].mean())
        snapshots.append((step, first, repeated, scores))
        example_attention = blocks[0].copy()
        return repeated

    started = time.perf_counter()
    for step in range(settings.max_steps + 1):
        measure = step % settings.snapshot_every == 0 or step == settings.max_steps
        if measure and snapshot(step) < settings.solved_loss:
            solved_at = step
            break
        if step == settings.max_steps:
            break
        # 1. A fresh batch, 2. the next-token loss on its repeated half, 3. one Adam update.
        batch = make_batch(settings, settings.batch_size, generator)
        logits, _ = forward(decoder, batch.tokens)
        per_prediction = next_token_losses(logits, batch.tokens)  # (B, n − 1)
        repeated = per_prediction[batch.repeated_half()].mean()
        gradients = torch.autograd.grad(repeated, decoder.tensors())
        optimizer.step(list(gradients))
        first_losses.append(float(per_prediction.detach()[batch.first_half()].mean()))
        repeated_losses.append(float(repeated.detach()))
        if on_step is not None:
            on_step(step + 1, settings.max_steps)
    seconds = time.perf_counter() - started

    steps, probe_first, probe_repeated, scores = zip(*snapshots, strict=True)
    return InductionRun(
        settings=settings,
        first_half_loss=np.array(first_losses),
        repeated_loss=np.array(repeated_losses),
        snapshot_steps=np.array(steps),
        probe_first_half_loss=np.array(probe_first),
        probe_repeated_loss=np.array(probe_repeated),
        previous_token=np.stack([s.previous_token for s in scores]),
        induction=np.stack([s.induction for s in scores]),
        solved_at=solved_at,
        example_tokens=probe.tokens[0].numpy().copy(),
        example_layout=probe_layouts[0],
        example_attention=example_attention,
        seconds=seconds,
    )
