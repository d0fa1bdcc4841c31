"""The Head view's hover: pointing at a token keeps only its lines (ui/js/head_view_hover.js)."""

from __future__ import annotations

import streamlit as st

from ui import scripts

HEAD_VIEW_HOVER_JS = scripts.script_element("head_view_hover.js")


def install() -> None:
    """The script, once per run of a page that draws a head view. It takes no room, and it is
    on every run, so the widgets after it keep their places (and their keyboard focus)."""
    st.html(HEAD_VIEW_HOVER_JS, unsafe_allow_javascript=True)
