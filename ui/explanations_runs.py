"""Page 10's runs of the model (explanations side by side): gradients, deletion, the paper check.

Each result is computed once per (model, sentence(s), switches, settings) through ui.door and
shared by every session: its arrays are not written after they are made. The sentence's Trace
and the readable-pair checks come from ui/information_flow_runs.py.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

import core
from core import explanations, saliency
from core import information_flow as core_information_flow
from core import next_word as core_next_word
from ui import door, models, next_word, sidebar
from ui.information_flow_runs import (
    sentence_trace,
    trace_by_name,
)

MAX_GRADIENT_PIECES = 128  # above: no deletion test (11 re-runs of every method)


DELETION_K = 10  # pieces removed at most by the deletion test


def deletion_steps(allowed: np.ndarray) -> int:
    """How many pieces the deletion test removes from a sentence whose removable pieces are
    `allowed` (n,) bool: DELETION_K at most, no more than it may remove, and at least one piece
    left (a decoder without specials, GPT-2, would otherwise run on nothing)."""
    return min(DELETION_K, int(allowed.sum()), len(allowed) - 1)


# The work one deletion pass may hold: word pieces × rankings (the methods and the random
# orders). Ten random orders fit up to 72 pieces beside six methods; at 128 pieces three do,
# and the page says how many it ran. Three is the fewest that still make a band.
DELETION_WORK = 128 * 9


MIN_RANDOM_ORDERS = 3


# The work one request may ask of the gradients: word pieces × integrated-gradient steps. Each
# step is a forward and a backward pass over the whole sentence, so 32 steps at 128 pieces
# (bench/bench_explain.py) is the most one visitor's request may take; fewer steps past it, and
# the page says how many it ran. It keeps a slider moved to 64 steps, or a 512-piece text, from
# holding one of the server's two run slots for ten seconds.
GRADIENT_WORK = 128 * 32


def ig_steps_for(n_tokens: int, wanted: int) -> int:
    """The steps integrated gradients gets: as asked while pieces × steps ≤ GRADIENT_WORK."""
    return max(1, min(wanted, GRADIENT_WORK // max(1, n_tokens)))


def _target(
    model_name: str,
    text: str,
    other: str | None,
    scale: bool,
    causal: bool,
    next_piece: int | None = None,
) -> saliency.Target | saliency.NextPieceTarget:
    if next_piece is not None:  # a decoder: log p(next_piece | text)
        return saliency.next_piece_target(models.load_model(model_name), next_piece)
    if other:
        return saliency.similarity_target(trace_by_name(model_name, other, scale, causal))
    return saliency.embedding_target(trace_by_name(model_name, text, scale, causal))


def _gradient_cost(model_name: str, text: str, steps: int, **_: object) -> int:
    """Twice the backward pass's bytes at its batch plan (core.saliency.batch_plan): the
    measured peak of the whole computation was up to twice that estimate."""
    model = models.load_model(model_name)
    n = door.pieces(model, text)
    batch, checkpointed = saliency.batch_plan(model, n, steps, saliency.PASS_BYTES)
    return 2 * saliency.pass_bytes(model, n, batch, checkpointed)


@door.shared("the gradients", cost=_gradient_cost, spinner="Computing gradients …")
def _gradients(
    model_name: str,
    text: str,
    other: str | None,
    scale: bool,
    causal: bool,
    steps: int,
    next_piece: int | None = None,
) -> explanations.GradientScores:
    trace = trace_by_name(model_name, text, scale, causal)
    target = _target(model_name, text, other, scale, causal, next_piece)
    return explanations.gradient_scores(models.load_model(model_name), trace, target, steps)


def gradient_scores(
    model: core.Transformer,
    text: str,
    other: str | None,
    inputs: sidebar.Inputs,
    steps: int,
    next_piece: int | None = None,
) -> explanations.GradientScores:
    """Cached gradient × input and IG of cos(text, other), or of text's own embedding, or (a
    decoder, next_piece given) of log p(next_piece | text); the steps are cut to the request's
    budget first (ig_steps_for)."""
    steps = ig_steps_for(door.pieces(model, text), steps)
    return _gradients(
        model.name, text, other or None, inputs.scale, inputs.causal, steps, next_piece
    )


def random_orders_for(n_tokens: int, n_methods: int) -> int:
    """Seeded random orders for the deletion band: explanations.RANDOM_ORDERS while word pieces ×
    (methods + orders) stays within DELETION_WORK, never fewer than MIN_RANDOM_ORDERS."""
    fits = DELETION_WORK // max(1, n_tokens) - n_methods
    return max(MIN_RANDOM_ORDERS, min(explanations.RANDOM_ORDERS, fits))


def _deletion_cost(
    model_name: str, text: str, orders: tuple[tuple[str, tuple[int, ...]], ...], **_: object
) -> int:
    # one batched pass per k, every ranking at once: one layer's scores and softmax per ranking
    model = models.load_model(model_name)
    n = door.pieces(model, text)
    return 4 * len(orders) * 2 * (model.n_heads * n * n + n * model.dims.d_ff)


@door.shared(
    "the deletion test",
    cost=_deletion_cost,
    spinner="Removing word pieces and running again …",
)
def _deletion(
    model_name: str,
    text: str,
    other: str | None,
    scale: bool,
    causal: bool,
    orders: tuple[tuple[str, tuple[int, ...]], ...],
    k_max: int,
    next_piece: int | None = None,
) -> dict[str, np.ndarray]:
    trace = trace_by_name(model_name, text, scale, causal)
    target = _target(model_name, text, other, scale, causal, next_piece)  # the gradients' own f
    rankings = {name: np.array(order, dtype=np.int64) for name, order in orders}
    model = models.load_model(model_name)
    return saliency.deletion_curves(model, trace, target, rankings, k_max)


def deletion_curves(
    model: core.Transformer,
    text: str,
    other: str | None,
    inputs: sidebar.Inputs,
    rankings: dict[str, np.ndarray],
    k_max: int,
    next_piece: int | None = None,
) -> dict[str, np.ndarray]:
    """Cached deletion curves: the gradients' target f after removing each ranking's top k."""
    orders = tuple((name, tuple(int(p) for p in order[:k_max])) for name, order in rankings.items())
    return _deletion(
        model.name, text, other or None, inputs.scale, inputs.causal, orders, k_max, next_piece
    )


# ---- rollout and flow against what removing a piece does (Abnar & Zuidema, 2020) -------------
def _leave_one_out_cost(model_name: str, text: str, **_: object) -> int:
    # one batched pass: n − 2 inputs of n − 1 pieces, one layer's scores and softmax each
    model = models.load_model(model_name)
    n = door.pieces(model, text)
    return 4 * max(1, n - 2) * 2 * (model.n_heads * n * n + n * model.dims.d_ff)


@door.shared(
    "removing one word piece at a time",
    cost=_leave_one_out_cost,
    spinner="Removing one word piece at a time …",
)
def _leave_one_out(
    model_name: str, text: str, scale: bool, causal: bool, next_piece: int | None = None
) -> np.ndarray:
    trace = trace_by_name(model_name, text, scale, causal)
    target = _target(model_name, text, None, scale, causal, next_piece)
    return saliency.leave_one_out(models.load_model(model_name), trace, target)


def paper_check(
    model: core.Transformer,
    text: str,
    inputs: sidebar.Inputs,
    flow: core_information_flow.InformationFlow,
) -> explanations.PaperCheck:
    """Raw last-layer attention, rollout and flow against removing each piece alone and
    against integrated gradients, all of the sentence's own vector (the embedding target); for
    a decoder, of the log-probability of its likeliest next piece (what its last vector is for).
    Integrated gradients are left out when they did not converge (GradientScores.ig_converged).
    """
    trace = sentence_trace(model, text, inputs)
    piece = likeliest_next_piece(model, text, inputs)
    removed = _leave_one_out(model.name, text, inputs.scale, inputs.causal, piece)
    gradients = gradient_scores(model, text, None, inputs, saliency.IG_STEPS, piece)
    references = {"removal": removed}
    if gradients.ig_converged:  # scores that miss what they share out are no reference
        references["integrated_gradients"] = gradients.integrated_gradients
    allowed = saliency.removable(trace.tokens, trace.special)
    return explanations.paper_check(flow.scores(), references, allowed)


# ---- a decoder's target: the next word piece ---------------------------------------------------
NEXT_PIECE_CHOICES = 10  # the likeliest next pieces a learner may pick a target from


def next_piece_choices(
    model: core.Transformer, text: str, inputs: sidebar.Inputs
) -> list[tuple[int, float]]:
    """A decoder's NEXT_PIECE_CHOICES likeliest next pieces after `text`, run with the sidebar's
    switches (one cached run through the door): (vocabulary row, probability), likeliest first."""
    log_probs = next_word.log_probs(model, text, scale=inputs.scale, causal=inputs.causal)
    rows = core_next_word.top_k(log_probs, NEXT_PIECE_CHOICES)
    return [(int(row), float(np.exp(np.float64(log_probs[row])))) for row in rows]


def likeliest_next_piece(model: core.Transformer, text: str, inputs: sidebar.Inputs) -> int | None:
    """The vocabulary row of a decoder's likeliest next piece after `text`; None (the
    sentence-vector target) for an encoder."""
    if not model.is_decoder:
        return None
    return next_piece_choices(model, text, inputs)[0][0]


def next_piece_picker(model: core.Transformer, text: str, inputs: sidebar.Inputs, key: str) -> int:
    """A decoder's target: a select box of the likeliest next pieces (the first by default);
    its vocabulary row."""
    choices = next_piece_choices(model, text, inputs)
    probability = dict(choices)
    rows = [row for row, _ in choices]
    picked = st.selectbox(
        "Next piece to explain",
        rows,
        format_func=lambda row: f"{model.tokenizer.token_of(row)}  (p {probability[row]:.3f})",
        key=key,
        help="The gradients and the deletion test explain log p(this piece | the sentence): "
        "the model's likeliest next piece by default, or another of its ten likeliest.",
    )
    return int(picked if picked in probability else rows[0])
