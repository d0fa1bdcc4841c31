"""Caches and shared widgets of the explanation pages (core.explain, core.saliency, core.lens).

Each result is computed once per (model, sentence(s), switches, settings) and shared by every
session: its arrays are not written after they are made. The Traces come from ui.state's cache.
"""

from __future__ import annotations

import threading

import numpy as np
import streamlit as st

import core
from core import explain, lens, saliency, similarity
from ui import state

MAX_GRADIENT_PIECES = 128  # above: integrated gradients with fewer steps, no deletion test
LONG_IG_STEPS = 8  # IG steps above MAX_GRADIENT_PIECES (32 steps at 512 pieces take ~30 s)
DELETION_K = 10  # pieces removed at most by the deletion test
# One gradient computation at a time, whatever the number of visitors: a backward pass keeps
# every layer's attention block for the way back (~230 MB at 512 pieces), where a forward pass
# needs one layer's room at a time.
_GRADIENT_SLOTS = threading.BoundedSemaphore(1)


# ---- the sidebar's sentences, one at a time ----------------------------------------------------
def sentence_trace(model: core.BertEncoder, text: str, inputs: state.Inputs) -> core.Trace:
    """The Trace of one sentence on its own (a sentence embedding never sees the other one)."""
    return state.trace(model, text, None, scale=inputs.scale, causal=inputs.causal)


def stop_unless_readable(model: core.BertEncoder, inputs: state.Inputs) -> None:
    """A message and st.stop() when the sidebar's first sentence holds no readable word piece."""
    try:
        sentence_trace(model, inputs.text, inputs)
    except core.EmptyInput as err:
        st.info(f"{err} Enter a sentence in the sidebar to begin.", icon="✍️")
        st.stop()


def readable_pair(model: core.BertEncoder, inputs: state.Inputs) -> str | None:
    """The sidebar's second sentence if it holds a readable word piece, else None."""
    if not inputs.pair:
        return None
    try:
        sentence_trace(model, inputs.pair, inputs)
    except core.EmptyInput:
        return None
    return inputs.pair


def _trace(model_name: str, text: str, scale: bool, causal: bool) -> core.Trace:
    return state.trace(state.load_model(model_name), text, None, scale=scale, causal=causal)


@st.cache_resource(max_entries=4, show_spinner="Following the information flow …")
def _flow(model_name: str, text: str, scale: bool, causal: bool) -> explain.InformationFlow:
    model = state.load_model(model_name)
    return explain.information_flow(model, _trace(model_name, text, scale, causal))


def information_flow(
    model: core.BertEncoder, text: str, inputs: state.Inputs
) -> explain.InformationFlow:
    """Cached rollout, norm rollout and flow of one sentence with the sidebar's switches."""
    return _flow(model.name, text, inputs.scale, inputs.causal)


def ig_steps_for(n_tokens: int, wanted: int) -> int:
    """The steps integrated gradients gets: as asked up to MAX_GRADIENT_PIECES, then fewer."""
    return wanted if n_tokens <= MAX_GRADIENT_PIECES else min(wanted, LONG_IG_STEPS)


def _target(
    model_name: str, text: str, other: str | None, scale: bool, causal: bool
) -> saliency.Target:
    if other:
        return saliency.similarity_target(_trace(model_name, other, scale, causal))
    return saliency.embedding_target(_trace(model_name, text, scale, causal))


@st.cache_resource(max_entries=4, show_spinner="Computing gradients …")
def _gradients(
    model_name: str, text: str, other: str | None, scale: bool, causal: bool, steps: int
) -> explain.GradientScores:
    trace = _trace(model_name, text, scale, causal)
    target = _target(model_name, text, other, scale, causal)
    with _GRADIENT_SLOTS:
        return explain.gradient_scores(state.load_model(model_name), trace, target, steps)


def gradient_scores(
    model: core.BertEncoder, text: str, other: str | None, inputs: state.Inputs, steps: int
) -> explain.GradientScores:
    """Cached gradient × input and IG of cos(text, other), or of text's own embedding."""
    return _gradients(model.name, text, other or None, inputs.scale, inputs.causal, steps)


@st.cache_resource(max_entries=4, show_spinner="Removing word pieces and running again …")
def _deletion(
    model_name: str,
    text: str,
    other: str | None,
    scale: bool,
    causal: bool,
    orders: tuple[tuple[str, tuple[int, ...]], ...],
    k_max: int,
) -> dict[str, np.ndarray]:
    trace = _trace(model_name, text, scale, causal)
    reference = _target(model_name, text, other, scale, causal).reference
    rankings = {name: np.array(order, dtype=np.int64) for name, order in orders}
    model = state.load_model(model_name)
    with _GRADIENT_SLOTS:  # up to 11 batched passes: the same queue as the gradients
        return saliency.deletion_curves(model, trace, reference, rankings, k_max)


def deletion_curves(
    model: core.BertEncoder,
    text: str,
    other: str | None,
    inputs: state.Inputs,
    rankings: dict[str, np.ndarray],
    k_max: int,
) -> dict[str, np.ndarray]:
    """Cached deletion curves: cos to the reference after removing each ranking's top k."""
    orders = tuple((name, tuple(int(p) for p in order[:k_max])) for name, order in rankings.items())
    return _deletion(model.name, text, other or None, inputs.scale, inputs.causal, orders, k_max)


# ---- the encoder lens ---------------------------------------------------------------------------
def nearest_by_layer(
    model: core.BertEncoder, trace: core.Trace, token: int, k: int = 5
) -> list[list[str]]:
    """(L + 1) lists of the k word pieces nearest one token's vector at every state."""
    unit_table, allowed = state.vocabulary_view(model)  # the Embedding projections page's table
    ids, _ = lens.nearest_by_layer(trace.hidden_states, token, unit_table, allowed, k)
    return [[model.tokenizer.token_of(int(i)) for i in row] for row in ids]


# ---- similarity -------------------------------------------------------------------------------
def pair_similarity(
    model: core.BertEncoder, first: str, second: str, *, scale: bool, causal: bool
) -> float:
    """cos of two sentences' embeddings, each sentence run on its own (Traces from the cache)."""
    return similarity.sentence_similarity(
        state.trace(model, first, None, scale=scale, causal=causal),
        state.trace(model, second, None, scale=scale, causal=causal),
    )


def use_example_pair(index: int) -> None:
    """Callback: put one of core.similarity's example pairs into the sidebar."""
    _, first, second = similarity.EXAMPLE_PAIRS[index]
    st.session_state["text"], st.session_state["pair"] = first, second
