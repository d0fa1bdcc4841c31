"""Gradient saliency, and the deletion test that checks any per-piece score.

A target is one number computed from the input: the similarity of this sentence to another
one, or how far its pooled vector reaches along its own final direction; for a decoder, the
log-probability it gives one next word piece after the text (NextPieceTarget). Gradients say how the
target would change if a word piece's vector moved a little (a local statement: true near this
input only). Two ways to turn that into one score per word piece:

- gradient × input: Σ_d ∂f/∂x_jd · x_jd, with x_j the piece's row of the word-piece table;
- integrated gradients (Sundararajan et al., 2017): the same product with the gradient averaged
  along the straight path from a baseline (here the zero vector for every piece) to the input.
  The scores then add up to f(input) − f(baseline) ("completeness").

Position and segment vectors are kept as they are; only the word-piece rows move.
The deletion test removes the top-k pieces of a ranking, runs the model again and measures the
same Target the gradients explain (one faithfulness check among several: DeYoung et al., 2020;
the shortened inputs are ones the model never saw in training: Hooker et al., 2019).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.similarity import sentence_embedding
from core.text import CLS, SEP
from core.transformer import Trace, Transformer

IG_STEPS = 32
# Completeness: integrated gradients add up to f(input) - f(baseline) once the steps suffice.
# Sundararajan et al. (2017, section 3) found 20 to 300 steps approximate the integral within 5%
# and advise checking that sum before trusting the scores; a sum further off than that share of
# f(input) - f(baseline) did not converge, and the scores explain nothing (ig_converged).
IG_TOLERANCE = 0.05
# What one batched backward pass may hold. Integrated gradients runs as many path points per
# pass as fit (several at once for a short sentence); at 512 word pieces one point alone would
# hold ~90 MB over MiniLM's 6 layers, so there the layers are checkpointed.
PASS_BYTES = 48 * 2**20
SIMILARITY = "similarity"  # f(x) = cos(mean-pooled(x), e_other)
EMBEDDING = "embedding"  # f(x) = mean-pooled(x) · ê_self, ê_self fixed at the real input
NEXT_PIECE = "next_piece"  # f(x) = log p(piece | x) at the last position (decoders)


@dataclass(frozen=True)
class Target:
    """The scalar a saliency method explains."""

    kind: str  # SIMILARITY or EMBEDDING
    reference: np.ndarray  # (d_model,) unit vector: the other sentence's, or this one's own

    def __call__(self, last_hidden: torch.Tensor) -> torch.Tensor:
        """(B, n, d_model) last hidden states -> (B,) target values."""
        pooled = last_hidden.mean(dim=1)  # (B, d_model): mean pooling over the tokens
        reference = torch.as_tensor(self.reference, dtype=pooled.dtype)
        if self.kind == SIMILARITY:
            pooled = pooled / pooled.norm(dim=-1, keepdim=True)  # the sentence embedding
        return pooled @ reference


def similarity_target(other: Trace) -> Target:
    """Explain cos(this sentence, the other): the other sentence's embedding is held fixed."""
    return Target(SIMILARITY, sentence_embedding(other))


def embedding_target(trace: Trace) -> Target:
    """Explain the pooled vector's length along its own (fixed) final direction.

    A cosine with itself would be 1 with a zero gradient; the unnormalised projection is not.
    """
    return Target(EMBEDDING, sentence_embedding(trace))


@dataclass(frozen=True)
class NextPieceTarget:
    """A decoder's log-probability of one next word piece after the whole input.

    f(x) = log softmax(head(FinalNorm(h_last)))[piece]: the last position is the one whose
    vector predicts what follows the text; after a deletion, the last piece that remains.
    """

    model: Transformer
    piece_id: int  # the vocabulary row of the next piece explained
    kind: str = NEXT_PIECE

    def __call__(self, last_hidden: torch.Tensor) -> torch.Tensor:
        """(B, n, d_model) last hidden states -> (B,) log p(piece | input)."""
        logits = self.model.logits(last_hidden[:, -1])  # (B, vocab)
        return torch.log_softmax(logits, dim=-1)[:, self.piece_id]


def next_piece_target(model: Transformer, piece_id: int) -> NextPieceTarget:
    """Explain log p(piece | text) of a decoder (ValueError for an encoder: no head to read)."""
    if not model.is_decoder:
        raise ValueError("an encoder predicts no next word piece")
    return NextPieceTarget(model, int(piece_id))


def _inputs(model: Transformer, trace: Trace) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, d_model) word-piece rows of the Trace and its (n,) segments, as torch tensors."""
    dtype = model.word_embeddings.dtype
    word_vectors = torch.from_numpy(np.array(trace.static)).to(dtype)
    return word_vectors, torch.from_numpy(np.array(trace.segments))


def _input_ids(trace: Trace) -> torch.Tensor:
    """(n,) the Trace's word-piece ids: the differentiable pass reads the positions they read."""
    return torch.from_numpy(np.array(trace.input_ids))


def pass_bytes(model: Transformer, n: int, batch: int, checkpointed: bool) -> int:
    """Estimated bytes a backward pass over `batch` inputs of n pieces keeps for the way back.

    The differentiable pass runs attention fused (core/attention.py): no (H, n, n) block is kept.
    Per layer and input, autograd keeps the feed-forward's widened activations (2 × (n, d_ff))
    and ~12 (n, d_model) vectors (the input, queries, keys, values, the attention's output and
    the norms' inputs and outputs); a checkpointed pass keeps every layer's input and one
    layer's rest at a time. Measured on MiniLM at 512 pieces, warm: one plain pass +70 MB, one
    checkpointed +42 MB, integrated gradients at 8 steps (two points a checkpointed pass, and
    the two forward passes at its ends) +47 MB; the estimate here is 94 MB, 20 MB and 41 MB.
    """
    per_layer = 2 * n * model.dims.d_ff + 12 * n * model.d_model
    if checkpointed:
        return 4 * batch * (per_layer + model.n_layers * n * model.d_model)
    return 4 * batch * model.n_layers * per_layer


def batch_plan(model: Transformer, n: int, wanted: int, max_bytes: int) -> tuple[int, bool]:
    """(inputs per pass, checkpointed): the most of `wanted` inputs whose pass fits max_bytes,
    with checkpointed layers only where a single input would not fit without them."""
    for checkpointed in (False, True):
        one = pass_bytes(model, n, 1, checkpointed)
        if one <= max_bytes or checkpointed:
            return max(1, min(wanted, max_bytes // one)), checkpointed
    raise AssertionError("unreachable")


def _forward(
    model: Transformer,
    trace: Trace,
    word_vectors: torch.Tensor,
    segments: torch.Tensor,
    checkpointed: bool = False,
    input_ids: torch.Tensor | None = None,
):
    """The differentiable pass under the Trace's switches; input_ids (n,) or (B, n), None: the
    Trace's own (a typed RoBERTa "<pad>" moves no position there either)."""
    options = trace.options
    return model.forward_from_word_vectors(
        word_vectors,
        segments,
        scale=options.scale,
        causal=options.causal,
        positions=options.positions,
        checkpointed=checkpointed,
        input_ids=_input_ids(trace) if input_ids is None else input_ids,
    )


def target_gradient(
    model: Transformer, trace: Trace, target: Target, max_pass_bytes: int = PASS_BYTES
) -> np.ndarray:
    """(n, d_model) ∂f/∂x at the input's word-piece rows."""
    word_vectors, segments = _inputs(model, trace)
    _, checkpointed = batch_plan(model, trace.n_tokens, 1, max_pass_bytes)
    word_vectors = word_vectors[None].requires_grad_(True)  # (1, n, d): a batch of one
    with torch.enable_grad():
        value = target(_forward(model, trace, word_vectors, segments, checkpointed)).sum()
        (gradient,) = torch.autograd.grad(value, word_vectors)
    return gradient[0].detach().numpy()


def gradient_x_input(
    model: Transformer, trace: Trace, target: Target, max_pass_bytes: int = PASS_BYTES
) -> np.ndarray:
    """(n,) Σ_d ∂f/∂x_jd · x_jd per word piece (signed)."""
    gradient = target_gradient(model, trace, target, max_pass_bytes)
    return (gradient * np.array(trace.static, dtype=gradient.dtype)).sum(axis=-1)


def integrated_gradients(
    model: Transformer,
    trace: Trace,
    target: Target,
    steps: int = IG_STEPS,
    max_pass_bytes: int = PASS_BYTES,
) -> tuple[np.ndarray, float, float]:
    """(n,) IG scores from the zero baseline, the completeness gap Σ scores − (f(x) − f(0)),
    and f(x) − f(0), the amount the scores share out (ig_converged compares the two).

    The path integral uses the midpoint rule: steps points t_k = (k + ½)/steps, run in batches
    that each hold at most max_pass_bytes for the backward pass (batch_plan).
    """
    word_vectors, segments = _inputs(model, trace)
    t = (torch.arange(steps, dtype=word_vectors.dtype) + 0.5) / steps  # (steps,)
    mean_gradient = torch.zeros_like(word_vectors)  # (n, d)
    per_pass, checkpointed = batch_plan(model, trace.n_tokens, steps, max_pass_bytes)
    with torch.enable_grad():
        for batch in torch.split(t, per_pass):
            path = (batch[:, None, None] * word_vectors).requires_grad_(True)  # (b, n, d)
            values = target(_forward(model, trace, path, segments, checkpointed))  # (b,)
            (gradient,) = torch.autograd.grad(values.sum(), path)  # each row: its own ∂f/∂x
            mean_gradient += gradient.sum(dim=0).detach() / steps
    scores = (mean_gradient * word_vectors).sum(dim=-1)  # (n,)
    with torch.no_grad():
        ends = torch.stack([torch.zeros_like(word_vectors), word_vectors])  # baseline, input
        f_baseline, f_input = target(_forward(model, trace, ends, segments)).tolist()
    difference = f_input - f_baseline
    gap = float(scores.sum()) - difference
    return scores.numpy(), gap, difference


def ig_converged(gap: float, difference: float, tolerance: float = IG_TOLERANCE) -> bool:
    """Whether the IG scores add up to f(x) − f(0) within tolerance × |f(x) − f(0)|.

    A path through a point where the model is nearly singular (an RMSNorm of an all-zero row
    divides by √ε) can miss by more than the whole difference at any number of steps.
    """
    return abs(gap) <= tolerance * abs(difference)


# ---- the deletion test ------------------------------------------------------------------------


def removable(
    tokens: tuple[str, ...] | list[str], special: Sequence[bool] | None = None
) -> np.ndarray:
    """(n,) bool: True for the word pieces the deletion test may remove: specials stay.

    special: (n,) the Trace's own mask ([CLS], </s>, <s>, …); without one, [CLS] and [SEP]
    are the specials (BERT's, by their text).
    """
    if special is not None and len(special):
        return ~np.asarray(special, dtype=bool)
    return np.array([t not in (CLS, SEP) for t in tokens], dtype=bool)


def ranking(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Positions of the allowed pieces, highest score first (ties: the earlier piece first)."""
    positions = np.flatnonzero(allowed)
    order = np.lexsort((positions, -np.asarray(scores, dtype=np.float64)[positions]))
    return positions[order]


def deletion_curves(
    model: Transformer,
    trace: Trace,
    target: Target,
    rankings: Mapping[str, np.ndarray],
    k_max: int,
) -> dict[str, np.ndarray]:
    """Each ranking -> (k_max + 1,) f(input without its top-k pieces), k = 0 … k_max.

    f is the Target itself, the very function the gradient methods explain: a cosine to the
    other sentence, or the projection on the sentence's own direction. Measuring anything else
    (say a cosine while the gradients explain the projection) would test the rankings on a
    question they were not made for. The pieces are dropped from the input (the rest move up a
    position), and the model runs again: k = 0 is the sentence itself. At each k, every distinct
    set of removed pieces runs once, all of them in one batched pass. At least one piece must
    remain (ValueError otherwise): an empty input has nothing to run.
    """
    word_vectors, segments = _inputs(model, trace)
    input_ids = _input_ids(trace)
    names = list(rankings)
    curves = np.empty((len(names), k_max + 1))
    n = word_vectors.shape[0]
    with torch.no_grad():
        for k in range(k_max + 1):
            removed = [frozenset(int(p) for p in rankings[name][:k]) for name in names]
            distinct = list(dict.fromkeys(removed))  # short sentences: rankings often agree
            kept = [
                torch.tensor([p for p in range(n) if p not in gone], dtype=torch.long)
                for gone in distinct
            ]
            if min(len(rows) for rows in kept) == 0:
                raise ValueError(f"removing {k} pieces leaves nothing to run")
            batch = torch.stack([word_vectors[rows] for rows in kept])  # (U, n − k, d)
            batch_segments = torch.stack([segments[rows] for rows in kept])  # (U, n − k)
            batch_ids = torch.stack([input_ids[rows] for rows in kept])  # (U, n − k)
            values = target(_forward(model, trace, batch, batch_segments, False, batch_ids))
            values = values.numpy()  # (U,)
            curves[:, k] = values[[distinct.index(gone) for gone in removed]]
    return {name: curves[m] for m, name in enumerate(names)}


def leave_one_out(model: Transformer, trace: Trace, target: Target) -> np.ndarray:
    """(n,) f(input) − f(input without piece j) per removable piece j; 0 for the specials and
    for a one-piece input (nothing would remain to run).

    The ablation importance rollout and flow were checked against (Abnar & Zuidema, 2020, who
    blanked out one input at a time): positive when removing the piece lowers f.
    """
    positions = np.flatnonzero(removable(trace.tokens, trace.special))
    if trace.n_tokens < 2:
        positions = positions[:0]
    singles = {str(p): np.array([p]) for p in positions}  # one "ranking" per piece
    curves = deletion_curves(model, trace, target, singles, k_max=1) if singles else {}
    drops = np.zeros(trace.n_tokens)
    for p in positions:
        start, without = curves[str(p)]
        drops[p] = start - without
    return drops


def random_ranking(allowed: np.ndarray, seed: int = 0) -> np.ndarray:
    """A seeded random order of the allowed pieces: one sample of what chance would do."""
    return np.random.default_rng(seed).permutation(np.flatnonzero(allowed))
