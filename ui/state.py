"""The app's shared state: the sidebar inputs, the loaded models and the cached Traces.

This is the one module that caches. A model is loaded once per process and shared by every
browser session (st.cache_resource); a Trace is computed once per (model, text, pair, switches)
and shared too — its arrays are read-only, so sharing cannot leak one user's edit to another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
import torch

import core
from core.text import MAX_CHARS
from ui import housekeeping, models
from ui.models import load_model
from ui.word_level import word_level_switch

# One torch thread per forward pass. Streamlit runs each browser session in its own thread, and
# on 2 cores a multi-threaded torch op collapses 20-47x as soon as another session competes for
# the cores; a single thread barely slows down. Community Cloud gives 0.078-2 cores, so the same
# choice holds there.
torch.set_num_threads(1)

DEFAULT_TEXT = "Time flies like an arrow."
EXAMPLE_PAIR = ("Time flies like an arrow.", "Fruit flies like a banana.")


@dataclass(frozen=True)
class Inputs:
    """What the sidebar holds: the text(s), the model name and the run switches."""

    text: str
    pair: str | None
    model_name: str
    scale: bool
    causal: bool
    word_level: bool = False  # a display switch: figures merge word pieces into words


# ---- traces -----------------------------------------------------------------------------------
# At most two forward passes run at once, whatever the number of visitors. With one torch thread
# each, more parallel passes add no throughput on 2 cores, but every pass in flight holds its
# attention block (~80 MB at 512 tokens): 20 visitors typing at once would otherwise need 2+ GB.
_FORWARD_SLOTS = threading.BoundedSemaphore(2)


@st.cache_resource(max_entries=4, show_spinner=False)
def _cached_trace(
    model_name: str,
    text: str,
    pair: str | None,
    scale: bool,
    causal: bool,
    positions: bool,
    ablate: tuple[tuple[int, int], ...],
) -> core.Trace:
    # At most 4 Traces live at once: at 512 tokens one holds ~96 MB, mostly its attention
    # weights (6 layers x 12 heads x 512 x 512 float32). With 6 entries (and the scores stored
    # too), ten visitors typing 512-token texts took the server to 2.2 GB (bench/load_test.py);
    # a page needs at most 4 runs at a time.
    model = load_model(model_name)
    with _FORWARD_SLOTS:
        return model.run(
            text, pair, scale=scale, causal=causal, positions=positions, ablate=frozenset(ablate)
        )


def trace(
    model: core.BertEncoder,
    text: str,
    pair: str | None = None,
    *,
    scale: bool = True,
    causal: bool = False,
    positions: bool = True,
    ablate: frozenset | set | tuple = (),
) -> core.Trace:
    """The cached Trace of a run (raises EmptyInput for empty text)."""
    return _cached_trace(
        model.name, text, pair or None, scale, causal, positions, tuple(sorted(ablate))
    )


def trace_or_stop(model: core.BertEncoder, inputs: Inputs, **switches: object) -> core.Trace:
    """The Trace of the sidebar's text with its switches; on bad input, a message and st.stop()."""
    options = {"scale": inputs.scale, "causal": inputs.causal, **switches}
    try:
        result = trace(model, inputs.text, inputs.pair, **options)  # type: ignore[arg-type]
    except core.EmptyInput as err:
        st.info(f"{err} Enter a sentence in the sidebar to begin.", icon="✍️")
        st.stop()
    if result.truncated:
        st.warning(
            f"The input has {result.n_pieces} word pieces; {models.label(model)} reads at most "
            f"{model.max_positions}, so only the first {result.n_tokens} are shown.",
            icon="✂️",
        )
    return result


def refetch(
    model: core.BertEncoder, inputs: Inputs, **switches: object
) -> Callable[[], core.Trace]:
    """A callable that fetches the sidebar's Trace again (from the cache, or recomputed).

    For lazy download buttons: holding the Trace itself would pin ~96 MB per visitor at 512
    tokens for as long as their page is open, whatever the cache's bound.
    """
    name, text, pair = model.name, inputs.text, inputs.pair
    options = {"scale": inputs.scale, "causal": inputs.causal, **switches}
    return lambda: trace(load_model(name), text, pair, **options)  # type: ignore[arg-type]


# ---- the sidebar ------------------------------------------------------------------------------
def sidebar_inputs(word_level_page: bool = True, switches_page: bool = True) -> Inputs:
    """Draw the shared sidebar (kept in the URL so a copied link reopens the same view).

    word_level_page: whether the page about to run draws word pieces (the switch is greyed
    out elsewhere, not hidden, so its value survives a visit to another page).
    switches_page: whether it runs the model with the √d_k and causal-mask switches (greyed
    out the same way where it does not).
    """
    with st.sidebar:
        text = st.text_area(
            "Sentence",
            value=DEFAULT_TEXT,
            key="text",
            bind="query-params",
            max_chars=MAX_CHARS,
            height=100,
        )
        pair = st.text_input(
            "Second sentence (optional)",
            key="pair",
            bind="query-params",
            max_chars=MAX_CHARS,
            placeholder="e.g. " + EXAMPLE_PAIR[1],
        )
        if len(text or "") >= MAX_CHARS or len(pair or "") >= MAX_CHARS:
            st.caption(f"Text is cut at {MAX_CHARS:,} characters.")
        model_name = models.model_picker()
        st.markdown("**Switches for every layer**")
        if not switches_page:
            st.caption("Not used on this page: it has its own, or no model layers.")
        scale = st.toggle(
            "Scale scores by 1/√d_k",
            value=True,
            key="scale",
            bind="query-params",
            disabled=not switches_page,
            help="Off: softmax(QKᵀ) instead of softmax(QKᵀ/√d_k) in every layer. The weights were "
            "trained with the scale, so off shows them on scores √d_k times larger than any they "
            "met in training, not a model trained without it.",
        )
        causal = st.toggle(
            "Causal mask",
            value=False,
            key="causal",
            bind="query-params",
            disabled=not switches_page,
            help="On: each token may attend only to itself and earlier tokens, in every layer. The "
            "model was trained to read both ways, so this is an experiment on it, not a model "
            "trained to read left to right.",
        )
        st.markdown("**How to show it**")
        word_level = word_level_switch(disabled=not word_level_page)
    return Inputs(
        text=(text or "")[:MAX_CHARS],  # the browser's max_chars is advice; the server decides
        pair=(pair or "")[:MAX_CHARS] or None,
        model_name=model_name,
        scale=bool(scale),
        causal=bool(causal),
        word_level=word_level,
    )


def use_example_pair() -> None:
    """Callback: put the classic garden-path pair into the sidebar."""
    st.session_state["text"], st.session_state["pair"] = EXAMPLE_PAIR


# ---- what a page reads ------------------------------------------------------------------------
_CONTEXT_KEY = "_page_context"


def prepare_page_context(
    word_level_page: bool = True, switches_page: bool = True
) -> tuple[Inputs, core.BertEncoder]:
    """app.py: draw the sidebar, load the model, and keep both for the page of this rerun."""
    inputs = sidebar_inputs(word_level_page, switches_page)
    model = models.active_model(inputs.model_name)
    st.session_state[_CONTEXT_KEY] = (inputs, model)
    return inputs, model


def page_context() -> tuple[Inputs, core.BertEncoder]:
    """A page: the sidebar's inputs and the loaded model (drawn here if run outside app.py)."""
    context = st.session_state.get(_CONTEXT_KEY)
    return context if context is not None else prepare_page_context()


# ---- the reference check ----------------------------------------------------------------------
@st.cache_resource(max_entries=1, show_spinner=False)
def _reference_model(model_name: str) -> object:
    from core.reference import load_reference

    reference = load_reference(load_model(model_name).model_dir)
    # transformers' modeling code adds ~190,000 long-lived objects: out of gc's walk with them.
    housekeeping.freeze_long_lived_objects()
    return reference


def parity_report(model: core.BertEncoder, result: core.Trace) -> object:
    """Max |Δ| between the Trace and transformers' BertModel on the same word pieces."""
    from core.reference import compare

    return compare(_reference_model(model.name), result)


# ---- embedding geometry (views/embeddings.py, views/positional.py) ----------------------------
@st.cache_resource(max_entries=4, show_spinner=False)
def _cached_points(
    model_name: str, sentences: tuple[str, ...], scale: bool, causal: bool
) -> tuple[object, tuple[str, ...]]:
    # One PointSet per (sentences, switches): moving a slider must not rerun a dozen Traces.
    from core.geometry import gather_points

    model = load_model(model_name)
    traces, kept, notes = [], [], []
    for number, sentence in enumerate(sentences, start=1):
        try:
            result = trace(model, sentence, None, scale=scale, causal=causal)
        except core.EmptyInput:
            notes.append(f"Line {number} holds no readable characters and is skipped.")
            continue
        if result.truncated:
            notes.append(f"Line {number} is cut to {model.max_positions} word pieces.")
        traces.append(result)
        kept.append(sentence)
    return gather_points(traces, kept), tuple(notes)


def point_set(
    model: core.BertEncoder, sentences: tuple[str, ...], *, scale: bool, causal: bool
) -> tuple[object, tuple[str, ...]]:
    """Cached core.geometry.PointSet of several sentences' Traces, and notes on skipped lines."""
    return _cached_points(model.name, tuple(sentences), scale, causal)


@st.cache_data(max_entries=32, show_spinner="Projecting …")
def projection(vectors: object, method: str, n_components: int, ids: object = None) -> object:
    """Cached core.geometry projection of (m, d) vectors (t-SNE takes seconds)."""
    from core.geometry import project, project_unique

    if ids is not None:
        return project_unique(vectors, ids, method, n_components)
    return project(vectors, method, n_components)


@st.cache_data(max_entries=16, show_spinner=False)
def trajectory_projection(hidden: object, n_components: int) -> object:
    """Cached core.geometry.trajectories: (L + 1, m, d) -> (L + 1, m, c) in one PCA plane."""
    from core.geometry import trajectories

    return trajectories(hidden, n_components)


@st.cache_resource(max_entries=2, show_spinner=False)
def _vocabulary_view(model_name: str) -> tuple[object, object]:
    from core.geometry import word_mask
    from core.positional import unit_rows

    model = load_model(model_name)
    unit_table = unit_rows(model.word_vectors()).astype("float32")  # (vocab, d) unit rows
    unit_table.setflags(write=False)
    vocabulary = [model.tokenizer.token_of(i) for i in range(unit_table.shape[0])]
    return unit_table, word_mask(vocabulary)


def vocabulary_view(model: core.BertEncoder) -> tuple[object, object]:
    """(vocab, d) word-piece table with unit rows, and the (vocab,) mask of real word pieces."""
    return _vocabulary_view(model.name)
