"""What every page reads: the sidebar inputs, the model, the Trace and a few shared results.

It keeps no cache of its own and runs no model outside ui.door, the one door for every cache and
every model run: what it computes (the Trace, the transformers check, the projections, the
word-piece table) is a `@door.shared` function, kept in the door's one cache and run in one of
its run slots, and models come from ui.models through the same door. So a model is loaded once
per process and shared by every browser session, and a Trace is computed once per (model, text,
pair, switches) and shared too — its arrays are read-only, so sharing cannot leak one user's
edit to another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import streamlit as st
import torch

import core
from core.text import MAX_CHARS
from ui import door, housekeeping, models
from ui.models import load_model
from ui.word_level import word_level_switch

# One torch thread per forward pass. Streamlit runs each browser session in its own thread, and
# on 2 cores a multi-threaded torch op collapses as soon as another session competes for
# the cores (bench/RESULTS.md, Cited in code); a single thread barely slows down. Community
# Cloud gives 0.078-2 cores, so the same choice holds there.
torch.set_num_threads(1)

DEFAULT_TEXT = "Time flies like an arrow."
EXAMPLE_PAIR = ("Time flies like an arrow.", "Fruit flies like a banana.")


class PageEnds(Exception):  # noqa: N818 (a signal, not an error)
    """A page has said why it cannot go on (no sentence, nothing shared to compare).

    app.py catches it: the page ends there, and Previous/Next and the progress still follow.
    st.stop() would end the whole script run, and with it the way on to the next page."""


def end_page() -> NoReturn:
    """End the page here, after its message (PageEnds)."""
    raise PageEnds


@dataclass(frozen=True)
class Inputs:
    """What the sidebar holds: the text(s), the model name and the run switches."""

    text: str
    pair: str | None
    model_name: str
    scale: bool
    causal: bool  # the causal mask applies in this run (a decoder's, unless removed)
    word_level: bool = False  # a display switch: figures merge word pieces into words
    causal_by_nature: bool = False  # the model was trained with the mask: a decoder

    @property
    def as_trained(self) -> bool:
        """True when the switches run the model as it was trained (√d_k on, its own mask)."""
        return self.scale and self.causal == self.causal_by_nature


# ---- traces ----------------------------------------------------------------------------------
# A Trace is computed through ui.door: once per (model, text, pair, switches), in one of the
# door's run slots, and kept in its one cache while the memory budget allows (at 512 word pieces
# on MiniLM one Trace holds ~96 MB, mostly its attention weights: 6 layers x 12 heads x 512 x 512
# float32).
def _trace_cost(model_name: str, text: str, pair: str | None, **_: object) -> int:
    model = load_model(model_name)
    return model.run_bytes(door.pieces(model, text, pair))


@door.shared("this run", cost=_trace_cost)
def _cached_trace(
    model_name: str,
    text: str,
    pair: str | None,
    scale: bool,
    causal: bool,
    positions: bool,
    ablate: tuple[tuple[int, int], ...],
) -> core.Trace:
    model = load_model(model_name)
    return model.run(
        text, pair, scale=scale, causal=causal, positions=positions, ablate=frozenset(ablate)
    )


def trace(
    model: core.Transformer,
    text: str,
    pair: str | None = None,
    *,
    scale: bool = True,
    causal: bool | None = None,
    positions: bool = True,
    ablate: frozenset | set | tuple = (),
) -> core.Trace:
    """The cached Trace of a run (raises EmptyInput for empty text). causal None is the model's
    nature (a decoder's mask on, an encoder's off), one cache entry with the explicit value."""
    causal = model.is_decoder if causal is None else bool(causal)
    return _cached_trace(
        model.name, text, pair or None, scale, causal, positions, tuple(sorted(ablate))
    )


def trace_or_stop(model: core.Transformer, inputs: Inputs, **switches: object) -> core.Trace:
    """The Trace of the sidebar's text with its switches; on bad input, a message and end_page()."""
    options = {"scale": inputs.scale, "causal": inputs.causal, **switches}
    try:
        result = trace(model, inputs.text, inputs.pair, **options)  # type: ignore[arg-type]
    except core.EmptyInput as err:
        st.info(f"{err} Enter a sentence in the sidebar to begin.", icon="✍️")
        end_page()
    if result.truncated:
        st.warning(
            f"The input has {result.n_pieces} word pieces; {models.label(model)} reads at most "
            f"{model.max_positions}, so only the first {result.n_tokens} are shown.",
            icon="✂️",
        )
    return result


def refetch(
    model: core.Transformer, inputs: Inputs, **switches: object
) -> Callable[[], core.Trace]:
    """A callable that fetches the sidebar's Trace again (from the cache, or recomputed).

    For lazy download buttons: holding the Trace itself would pin ~96 MB per visitor at 512
    tokens for as long as their page is open, whatever the cache's bound.
    """
    name, text, pair = model.name, inputs.text, inputs.pair
    options = {"scale": inputs.scale, "causal": inputs.causal, **switches}
    return lambda: trace(load_model(name), text, pair, **options)  # type: ignore[arg-type]


# ---- the sidebar ------------------------------------------------------------------------------
# The switches' one wording, used by the sidebar and by the pages with switches of their own (3 ·
# Scaling's comparison, the lab): on means the same thing wherever a learner meets it.
SCALE_LABEL = "Scale scores by 1/√d_k"
CAUSAL_LABEL = "Causal mask"
UNMASK_LABEL = "Remove the causal mask (off-distribution)"
SCALE_HELP = (
    "Off: softmax(QKᵀ) instead of softmax(QKᵀ/√d_k) in every layer. The weights were trained with "
    "the scale, so off shows them on scores √d_k times larger than any they met in training, not "
    "a model trained without it."
)
CAUSAL_HELP = (
    "On: each token may attend only to itself and earlier tokens, in every layer. The model was "
    "trained to read both ways, so this is an experiment on it, not a model trained to read left "
    "to right."
)
UNMASK_HELP = (
    "On: each token may attend to later tokens too, in every layer. A decoder was trained to read "
    "only itself and what came before, so this is an experiment on it, off its training "
    "distribution, not a model trained to read both ways."
)


OWN_TEXT_NOTE = "Not used on this page: it has its own sentences, in the page."


def sidebar_text_and_model(text_page: bool = True) -> tuple[str, str | None, str]:
    """Draw the sidebar's text, second sentence and model picker (kept in the URL so a copied
    link reopens the same view); the text cut to MAX_CHARS, the model's name.

    text_page: whether the page about to run reads the sidebar's sentences. Where it has its
    own, both boxes are greyed out with a line saying so, as the switches are, and keep their
    text for the next page."""
    with st.sidebar:
        if not text_page:
            st.caption(OWN_TEXT_NOTE)
        text = st.text_area(
            "Sentence",
            value=DEFAULT_TEXT,
            key="text",
            bind="query-params",
            max_chars=MAX_CHARS,
            height=100,
            disabled=not text_page,
        )
        pair = st.text_input(
            "Second sentence (optional)",
            key="pair",
            bind="query-params",
            max_chars=MAX_CHARS,
            placeholder="e.g. " + EXAMPLE_PAIR[1],
            disabled=not text_page,
        )
        if len(text or "") >= MAX_CHARS or len(pair or "") >= MAX_CHARS:
            st.caption(f"Text is cut at {MAX_CHARS:,} characters.")
        model_name = models.model_picker()
    # the browser's max_chars is advice; the server decides
    return (text or "")[:MAX_CHARS], (pair or "")[:MAX_CHARS] or None, model_name


def sidebar_switches(
    model: core.Transformer, word_level_page: bool = True, switches_page: bool = True
) -> tuple[bool, bool, bool]:
    """Draw the switches for the loaded model: (scale, causal mask applies, word level).

    An encoder's switch adds a causal mask (key `causal`); a decoder's removes its own (key
    `unmask`): either way the switch off is the model as trained, and on is off-distribution.
    word_level_page: whether the page about to run draws word pieces (the switch is greyed
    out elsewhere, not hidden, so its value survives a visit to another page).
    switches_page: whether it runs the model with the √d_k and causal-mask switches (greyed
    out the same way where it does not).
    """
    with st.sidebar:
        st.markdown("**Switches for every layer**")
        if not switches_page:
            st.caption(
                "Not used on this page: it has its own switches, in the page, or no model layers."
            )
        scale = st.toggle(
            SCALE_LABEL,
            value=True,
            key="scale",
            bind="query-params",
            disabled=not switches_page,
            help=SCALE_HELP,
        )
        if model.is_decoder:
            unmask = st.toggle(
                UNMASK_LABEL,
                value=False,
                key="unmask",
                bind="query-params",
                disabled=not switches_page,
                help=UNMASK_HELP,
            )
            causal = not unmask
        else:
            causal = st.toggle(
                CAUSAL_LABEL,
                value=False,
                key="causal",
                bind="query-params",
                disabled=not switches_page,
                help=CAUSAL_HELP,
            )
        st.markdown("**How to show it**")
        word_level = word_level_switch(disabled=not word_level_page)
    return bool(scale), bool(causal), word_level


def off_distribution_note(
    inputs: Inputs, model_label: str, scale: bool | None = None, causal: bool | None = None
) -> None:
    """A warning wherever the model runs with √d_k scaling off or its mask changed (an encoder's
    added, a decoder's removed; the sidebar's switches, or a page's own): the trained weights on
    inputs they never met, not a model trained that way. Nothing when both are as trained."""
    scale = inputs.scale if scale is None else scale
    causal = inputs.causal if causal is None else causal
    nature = inputs.causal_by_nature
    mask_change = "the causal mask is removed" if nature else "the causal mask is on"
    changed = [
        *(["√d_k scaling is off"] if not scale else []),
        *([mask_change] if causal != nature else []),
    ]
    if changed:
        st.warning(
            f"{' and '.join(changed).capitalize()}: {model_label} never saw this in training. "
            "What follows is the trained model pushed off its training distribution, not a model "
            "trained this way.",
            icon="🧪",
        )


def use_example_pair() -> None:
    """Callback: put the classic garden-path pair into the sidebar."""
    st.session_state["text"], st.session_state["pair"] = EXAMPLE_PAIR


# ---- what a page reads ------------------------------------------------------------------------
_CONTEXT_KEY = "_page_context"


def prepare_page_context(
    word_level_page: bool = True, switches_page: bool = True, text_page: bool = True
) -> tuple[Inputs, core.Transformer]:
    """app.py: draw the sidebar, load the model, and keep both for the page of this rerun.

    The model is loaded between the picker and the switches: the mask switch says what it does
    to this model (add a mask to an encoder, remove a decoder's)."""
    text, pair, model_name = sidebar_text_and_model(text_page)
    model = models.active_model(model_name)
    scale, causal, word_level = sidebar_switches(model, word_level_page, switches_page)
    inputs = Inputs(
        text, pair, model_name, scale, causal, word_level, causal_by_nature=model.is_decoder
    )
    st.session_state[_CONTEXT_KEY] = (inputs, model)
    return inputs, model


def page_context() -> tuple[Inputs, core.Transformer]:
    """A page: the sidebar's inputs and the loaded model (drawn here if run outside app.py)."""
    context = st.session_state.get(_CONTEXT_KEY)
    return context if context is not None else prepare_page_context()


# ---- the sentence box in the page, for narrow screens ------------------------------------------
# Below 768 px Streamlit folds the sidebar away behind an unlabelled arrow, and a phone visitor
# would not find where to type. This box sits in the page, shown only at those widths by
# PAGE_SENTENCE_CSS, and writes into the sidebar's own box (key "text"): one sentence, one URL.
PAGE_SENTENCE_KEY = "text_in_page"


def _to_the_sidebar() -> None:
    """Callback: the page's box was edited; the sidebar's box takes its text (before the run)."""
    st.session_state["text"] = st.session_state[PAGE_SENTENCE_KEY]


def sentence_box_in_page(inputs: Inputs) -> None:
    """The sidebar's sentence box again, in the page, for screens where the sidebar is folded
    (hidden elsewhere by its container's class, st-key-page_sentence)."""
    st.session_state[PAGE_SENTENCE_KEY] = inputs.text  # what the sidebar holds this run
    with st.container(key="page_sentence"):
        st.text_area(
            "Your sentence (the sidebar's, here while the sidebar is folded)",
            key=PAGE_SENTENCE_KEY,
            max_chars=MAX_CHARS,
            height=80,
            on_change=_to_the_sidebar,
        )


# ---- the reference check ----------------------------------------------------------------------
# Loading transformers' reference model of MiniLM adds its own copy of the weights (~90 MB) and
# transformers' modeling code to the server's memory (bench/RESULTS.md, Cited in code).
REFERENCE_IMPORT_BYTES = 70 * door.MB


def _reference_cost(model_name: str) -> int:
    return REFERENCE_IMPORT_BYTES + door.nbytes(load_model(model_name))


@door.shared("the transformers check", cost=_reference_cost)
def _reference_model(model_name: str) -> object:
    from core.reference import load_reference

    reference = load_reference(load_model(model_name).model_dir)
    # transformers' modeling code adds ~190,000 long-lived objects: out of gc's walk with them.
    housekeeping.freeze_long_lived_objects()
    return reference


def parity_report(model: core.Transformer, result: core.Trace) -> object:
    """Max |Δ| between the Trace and transformers' BertModel on the same word pieces."""
    from core.reference import compare

    return compare(_reference_model(model.name), result)


# ---- embedding geometry (views/embeddings.py, views/positional.py) ----------------------------
# The work one projection request may ask for: word pieces summed over its sentences. Each
# sentence is a forward pass, and t-SNE's time grows faster than the number of points.
PROJECTION_PIECES = 2_048


def within_projection_budget(
    model: core.Transformer, sentences: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The first sentences whose word pieces add up to at most PROJECTION_PIECES, and a note on
    the lines left out (none when every sentence fits)."""
    total = 0
    for number, sentence in enumerate(sentences, start=1):
        total += door.pieces(model, sentence)
        if total > PROJECTION_PIECES:
            note = (
                f"Lines {number} to {len(sentences)} are left out: one projection reads at most "
                f"{PROJECTION_PIECES:,} word pieces, and the lines above already have "
                f"{total - door.pieces(model, sentence):,}."
            )
            return sentences[: number - 1], (note,)
    return sentences, ()


@door.shared("the projection's runs")
def _cached_points(
    model_name: str, sentences: tuple[str, ...], scale: bool, causal: bool
) -> tuple[object, tuple[str, ...]]:
    # One PointSet per (sentences, switches): moving a slider must not rerun a dozen Traces.
    from core.embeddings import TraceRows, gather_points

    model = load_model(model_name)
    sentences, notes = within_projection_budget(model, sentences)
    rows, kept, notes = [], [], list(notes)
    for number, sentence in enumerate(sentences, start=1):
        try:
            result = trace(model, sentence, None, scale=scale, causal=causal)
        except core.EmptyInput:
            notes.append(f"Line {number} holds no readable characters and is skipped.")
            continue
        if result.truncated:
            notes.append(f"Line {number} is cut to {model.max_positions} word pieces.")
        rows.append(TraceRows.of(result))  # not the Trace: its attention blocks can go
        kept.append(sentence)
    return gather_points(rows, kept), tuple(notes)


def point_set(
    model: core.Transformer, sentences: tuple[str, ...], *, scale: bool, causal: bool
) -> tuple[object, tuple[str, ...]]:
    """Cached core.embeddings.PointSet of several sentences' Traces, and notes on lines left out
    (past PROJECTION_PIECES, unreadable, or cut to the model's positions)."""
    return _cached_points(model.name, tuple(sentences), scale, causal)


@door.shared("a projection", spinner="Projecting …")
def projection(vectors: object, method: str, n_components: int, ids: object = None) -> object:
    """Cached core.embeddings projection of (m, d) vectors (t-SNE takes seconds)."""
    from core.embeddings import project, project_unique

    if ids is not None:
        return project_unique(vectors, ids, method, n_components)
    return project(vectors, method, n_components)


@door.shared("a projection")
def trajectory_projection(hidden: object, n_components: int) -> object:
    """Cached core.embeddings.trajectories: (L + 1, m, d) -> (L + 1, m, c) in one PCA plane."""
    from core.embeddings import trajectories

    return trajectories(hidden, n_components)


@door.shared("the word-piece table")
def _vocabulary_view(model_name: str) -> tuple[object, object]:
    from core.embeddings import word_mask
    from core.positional import unit_rows

    model = load_model(model_name)
    unit_table = unit_rows(model.word_vectors()).astype("float32")  # (vocab, d) unit rows
    unit_table.setflags(write=False)
    vocabulary = [model.tokenizer.token_of(i) for i in range(unit_table.shape[0])]
    return unit_table, word_mask(vocabulary)


def vocabulary_view(model: core.Transformer) -> tuple[object, object]:
    """(vocab, d) word-piece table with unit rows, and the (vocab,) mask of real word pieces."""
    return _vocabulary_view(model.name)
