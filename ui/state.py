"""The app's shared state: the sidebar inputs, the loaded models and the cached Traces.

This is the one module that caches. A model is loaded once per process and shared by every
browser session (st.cache_resource); a Trace is computed once per (model, text, pair, switches)
and shared too — its arrays are read-only, so sharing cannot leak one user's edit to another.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import streamlit as st
import torch

import core
from core.text import MAX_CHARS

# One torch thread per forward pass. Streamlit runs each browser session in its own thread, and
# on 2 cores a multi-threaded torch op collapses 20-47x as soon as another session competes for
# the cores; a single thread barely slows down. Community Cloud gives 0.078-2 cores, so the same
# choice holds there.
torch.set_num_threads(1)

DEFAULT_TEXT = "Time flies like an arrow."
EXAMPLE_PAIR = ("Time flies like an arrow.", "Fruit flies like a banana.")
OTHER_MODEL = "other"
FAILURE_MEMORY_S = (
    60.0  # a model that failed is not retried for a minute (the hub check costs 1.5 s)
)

_failures: dict[str, tuple[float, str]] = {}
_failures_lock = threading.Lock()


@dataclass(frozen=True)
class Inputs:
    """What the sidebar holds: the text(s), the model name and the run switches."""

    text: str
    pair: str | None
    model_name: str
    scale: bool
    causal: bool


# ---- models -----------------------------------------------------------------------------------
@st.cache_resource(max_entries=3, show_spinner=False)
def _load_model(name: str) -> core.BertEncoder:
    return core.load_model(name)


def _remembered_failure(name: str) -> str | None:
    with _failures_lock:
        failed = _failures.get(name)
    if failed and time.monotonic() - failed[0] < FAILURE_MEMORY_S:
        return failed[1]
    return None


def load_model(name: str) -> core.BertEncoder:
    """The shared model, or ModelUnavailable (remembered for a minute so retries stay cheap)."""
    reason = _remembered_failure(name)
    if reason:
        raise core.ModelUnavailable(reason)
    try:
        return _load_model(name)
    except core.ModelUnavailable as err:
        with _failures_lock:
            _failures[name] = (time.monotonic(), str(err))
        raise


def active_model(name: str) -> core.BertEncoder:
    """The chosen model; if it cannot be loaded, say why and fall back to the bundled one."""
    if name != core.BUNDLED:
        try:
            with st.spinner(f"Loading {name} …"):
                return load_model(name)
        except core.ModelUnavailable as err:
            st.error(
                f"Could not load **{name}**: {err}. Showing the bundled MiniLM instead.", icon="⚠️"
            )
    with st.spinner("Loading the bundled MiniLM …"):
        return load_model(core.BUNDLED)


# ---- traces -----------------------------------------------------------------------------------
@st.cache_resource(max_entries=6, show_spinner=False)
def _cached_trace(
    model_name: str,
    text: str,
    pair: str | None,
    scale: bool,
    causal: bool,
    positions: bool,
    ablate: tuple[tuple[int, int], ...],
) -> core.Trace:
    # At most 6 Traces live at once: at 512 tokens one holds ~165 MB (scores and weights for
    # 6 layers x 12 heads x 512 x 512), and the server must stay well under 2 GB.
    model = load_model(model_name)
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
            f"The input has {result.n_pieces} word pieces; {model.name} reads at most "
            f"{model.max_positions}, so only the first {result.n_tokens} are shown.",
            icon="✂️",
        )
    return result


# ---- the sidebar ------------------------------------------------------------------------------
def _model_choice() -> str:
    options = [*core.SUGGESTED_MODELS, OTHER_MODEL]
    labels = {**core.SUGGESTED_MODELS, OTHER_MODEL: "other · a hub id or a local folder"}
    choice = st.selectbox(
        "Model", options, format_func=labels.__getitem__, key="model", bind="query-params"
    )
    if choice != OTHER_MODEL:
        return choice
    custom = st.text_input(
        "Hub id or local folder",
        key="custom_model",
        bind="query-params",
        placeholder="e.g. bert-base-cased or /path/to/model",
        max_chars=200,
    )
    return (custom or "").strip()[:200] or core.BUNDLED


def sidebar_inputs() -> Inputs:
    """Draw the shared sidebar (kept in the URL so a copied link reopens the same view)."""
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
        model_name = _model_choice()
        st.markdown("**Switches for every layer**")
        scale = st.toggle(
            "Scale scores by 1/√d_k",
            value=True,
            key="scale",
            bind="query-params",
            help="Off: softmax(QKᵀ) instead of softmax(QKᵀ/√d_k) in every layer.",
        )
        causal = st.toggle(
            "Causal mask",
            value=False,
            key="causal",
            bind="query-params",
            help="On: each token may attend only to itself and earlier tokens, in every layer.",
        )
    return Inputs(
        text=(text or "")[:MAX_CHARS],  # the browser's max_chars is advice; the server decides
        pair=(pair or "")[:MAX_CHARS] or None,
        model_name=model_name,
        scale=bool(scale),
        causal=bool(causal),
    )


def use_example_pair() -> None:
    """Callback: put the classic garden-path pair into the sidebar."""
    st.session_state["text"], st.session_state["pair"] = EXAMPLE_PAIR


# ---- what a page reads ------------------------------------------------------------------------
_CONTEXT_KEY = "_page_context"


def prepare_page_context() -> tuple[Inputs, core.BertEncoder]:
    """app.py: draw the sidebar, load the model, and keep both for the page of this rerun."""
    inputs = sidebar_inputs()
    model = active_model(inputs.model_name)
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

    return load_reference(load_model(model_name).model_dir)


def parity_report(model: core.BertEncoder, result: core.Trace) -> object:
    """Max |Δ| between the Trace and transformers' BertModel on the same word pieces."""
    from core.reference import compare

    return compare(_reference_model(model.name), result)
