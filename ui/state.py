"""What every page reads: the sidebar's inputs and the loaded model (page_context), and how a
page ends early (end_page). app.py draws the sidebar (ui/sidebar.py) and keeps both here for the
page of that rerun.
"""

from __future__ import annotations

from typing import NoReturn

import streamlit as st

import core
from ui import models, sidebar


class PageEnds(Exception):  # noqa: N818 (a signal, not an error)
    """A page has said why it cannot go on (no sentence, nothing shared to compare).

    app.py catches it: the page ends there, and Previous/Next and the progress still follow.
    st.stop() would end the whole script run, and with it the way on to the next page."""


def end_page() -> NoReturn:
    """End the page here, after its message (PageEnds)."""
    raise PageEnds


# ---- what a page reads ------------------------------------------------------------------------
_CONTEXT_KEY = "_page_context"


def prepare_page_context(
    word_level_page: bool = True, switches_page: bool = True, text_page: bool = True
) -> tuple[sidebar.Inputs, core.Transformer]:
    """app.py: draw the sidebar, load the model, and keep both for the page of this rerun.

    The model is loaded between the picker and the switches: the mask switch says what it does
    to this model (add a mask to an encoder, remove a decoder's)."""
    text, pair, model_name = sidebar.sidebar_text_and_model(text_page)
    model = models.active_model(model_name)
    scale, causal, word_level = sidebar.sidebar_switches(model, word_level_page, switches_page)
    inputs = sidebar.Inputs(
        text, pair, model_name, scale, causal, word_level, causal_by_nature=model.is_decoder
    )
    st.session_state[_CONTEXT_KEY] = (inputs, model)
    return inputs, model


def page_context() -> tuple[sidebar.Inputs, core.Transformer]:
    """A page: the sidebar's inputs and the loaded model (drawn here if run outside app.py)."""
    context = st.session_state.get(_CONTEXT_KEY)
    return context if context is not None else prepare_page_context()
