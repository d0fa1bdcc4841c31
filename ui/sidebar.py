"""The sidebar: the sentence boxes, the model picker and the run switches (kept in the URL so a
copied link reopens the same view), their one wording, and the same sentence box in the page for
screens where the sidebar is folded away.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import streamlit as st

import core
from core.text import MAX_CHARS
from ui import models
from ui.word_level import word_level_switch

DEFAULT_TEXT = "Time flies like an arrow."
EXAMPLE_PAIR = ("Time flies like an arrow.", "Fruit flies like a banana.")


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
        scale = _layer_switch(SCALE_LABEL, SCALE_HELP, switches_page, key="scale", as_trained=True)
        if model.is_decoder:
            unmask = _layer_switch(UNMASK_LABEL, UNMASK_HELP, switches_page, key="unmask")
            causal = not unmask
        else:
            causal = _layer_switch(CAUSAL_LABEL, CAUSAL_HELP, switches_page, key="causal")
        st.markdown("**How to show it**")
        word_level = word_level_switch(disabled=not word_level_page)
    return bool(scale), bool(causal), word_level


def _layer_switch(
    label: str, help_text: str, applies: bool, *, key: str, as_trained: bool = False
) -> bool:
    """One switch for every layer, bound to the URL (key: a literal at every call, which
    tests/bound_keys.py reads); as_trained: its value for the model as trained; greyed out,
    its value kept, where it does not apply."""
    return st.toggle(
        label,
        value=as_trained,
        key=key,
        bind="query-params",
        disabled=not applies,
        help=help_text,
    )


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


# ---- the sentence box in the page, for narrow screens ------------------------------------------
# Below 768 px Streamlit folds the sidebar away behind an unlabelled arrow, and a phone visitor
# would not find where to type. This box sits in the page, shown only at those widths by
# PAGE_SENTENCE_CSS, and writes into the sidebar's own box (key "text"): one sentence, one URL.
PAGE_SENTENCE_KEY = "text_in_page"  # a prefix: page_sentence_key adds the text's digest


def page_sentence_key(text: str) -> str:
    """The in-page box's key while the sidebar holds `text`: a box is drawn afresh, under a new
    key, whenever the sidebar's text changes, so its key says which text it was drawn with."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{PAGE_SENTENCE_KEY}_{digest}"


def _to_the_sidebar(key: str) -> None:
    """Callback: the page's box was edited; the sidebar's box takes its text (before the run).

    Only the box drawn for the sidebar's present text is the visitor's. A browser that has not
    yet drawn the new box (the visitor committed a sentence in the sidebar, then typed on
    before the page came back) sends the old box back as it was, and Streamlit calls its
    callback too: read as an edit, it put the old sentence back into the sidebar (seen in
    tests/test_browser_suite.py's hostile typing, under load; tests/test_overview.py).
    """
    sidebar_text = (st.session_state.get("text") or "")[:MAX_CHARS]  # as sidebar_text_and_model
    if key == page_sentence_key(sidebar_text):
        st.session_state["text"] = st.session_state[key]


def sentence_box_in_page(inputs: Inputs) -> None:
    """The sidebar's sentence box again, in the page, for screens where the sidebar is folded
    (hidden elsewhere by its container's class, st-key-page_sentence)."""
    key = page_sentence_key(inputs.text)
    with st.container(key="page_sentence"):
        st.text_area(
            "Your sentence (the sidebar's, here while the sidebar is folded)",
            value=inputs.text,
            key=key,
            max_chars=MAX_CHARS,
            height=80,
            on_change=_to_the_sidebar,
            args=(key,),
        )
