"""Page 9's runs of the model (where the meaning comes from), and what both Explain pages share.

Each result is computed once per (model, sentence(s), switches, settings) and shared by every
session: its arrays are not written after they are made. The Traces come from ui.traces' cache.
"""

from __future__ import annotations

import streamlit as st

import core
from core import information_flow as core_information_flow
from core import lens, similarity
from ui import door, models, sidebar, state, traces, vocabulary


# ---- the sidebar's sentences, one at a time ----------------------------------------------------
def sentence_trace(model: core.Transformer, text: str, inputs: sidebar.Inputs) -> core.Trace:
    """The Trace of one sentence on its own (a sentence embedding never sees the other one)."""
    return traces.trace(model, text, None, scale=inputs.scale, causal=inputs.causal)


def stop_unless_readable(model: core.Transformer, inputs: sidebar.Inputs) -> None:
    """A message and state.end_page() when the sidebar's first sentence holds no readable word piece."""
    try:
        sentence_trace(model, inputs.text, inputs)
    except core.EmptyInput as err:
        st.info(f"{err} Enter a sentence in the sidebar to begin.", icon="✍️")
        state.end_page()


def readable_pair(model: core.Transformer, inputs: sidebar.Inputs) -> str | None:
    """The sidebar's second sentence if it holds a readable word piece, else None."""
    if not inputs.pair:
        return None
    try:
        sentence_trace(model, inputs.pair, inputs)
    except core.EmptyInput:
        return None
    return inputs.pair


def trace_by_name(model_name: str, text: str, scale: bool, causal: bool) -> core.Trace:
    """The Trace of one sentence, for cached functions keyed by the model's name (hashable)."""
    return traces.trace(models.load_model(model_name), text, None, scale=scale, causal=causal)


def _flow_cost(model_name: str, text: str, **_: object) -> int:
    # rollout, norm-based contributions and their rollout: three (L, n, n) float64 stacks
    model = models.load_model(model_name)
    n = door.pieces(model, text)
    return 3 * 8 * model.n_layers * n * n


@door.shared("the information flow", cost=_flow_cost, spinner="Following the information flow …")
def _flow(
    model_name: str, text: str, scale: bool, causal: bool
) -> core_information_flow.InformationFlow:
    model = models.load_model(model_name)
    return core_information_flow.information_flow(
        model, trace_by_name(model_name, text, scale, causal)
    )


def information_flow(
    model: core.Transformer, text: str, inputs: sidebar.Inputs
) -> core_information_flow.InformationFlow:
    """Cached rollout, norm rollout and flow of one sentence with the sidebar's switches."""
    return _flow(model.name, text, inputs.scale, inputs.causal)


# ---- the encoder lens ---------------------------------------------------------------------------
def nearest_by_layer(
    model: core.Transformer, trace: core.Trace, token: int, k: int = 5
) -> list[list[str]]:
    """(L + 1) lists of the k word pieces nearest one token's vector at every state."""
    unit_table, allowed = vocabulary.vocabulary_view(
        model
    )  # the Embedding projections page's table
    ids, _ = lens.nearest_by_layer(trace.hidden_states, token, unit_table, allowed, k)
    return [[model.tokenizer.token_of(int(i)) for i in row] for row in ids]


# ---- the logit lens (decoders) -----------------------------------------------------------------
def _lens_cost(model: core.Transformer, **_: object) -> int:
    # (L + 1, vocab) scores in float64, twice (the log-softmax beside them)
    return 2 * 8 * (model.n_layers + 1) * model.dims.vocab_size


@door.shared("the logit lens", cost=_lens_cost)
def logit_lens(model: core.Transformer, trace: core.Trace, position: int) -> lens.LogitLens:
    """core.lens.logit_lens of one position of a decoder's Trace, its five likeliest pieces."""
    return lens.logit_lens(model, trace.hidden_states, position, k=5)


# ---- similarity -------------------------------------------------------------------------------
def pair_similarity(
    model: core.Transformer, first: str, second: str, *, scale: bool, causal: bool
) -> float:
    """cos of two sentences' embeddings, each sentence run on its own (Traces from the cache)."""
    return similarity.sentence_similarity(
        traces.trace(model, first, None, scale=scale, causal=causal),
        traces.trace(model, second, None, scale=scale, causal=causal),
    )


def use_example_pair(index: int) -> None:
    """Callback: put one of core.similarity's example pairs into the sidebar."""
    _, first, second = similarity.EXAMPLE_PAIRS[index]
    st.session_state["text"], st.session_state["pair"] = first, second
