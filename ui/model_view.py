"""Attention heatmaps' model view: its browser script (ui/js/model_view.js)."""

from __future__ import annotations

import streamlit as st

from ui import scripts

MODEL_VIEW_JS = scripts.script_element("model_view.js")


def install() -> None:
    """The script, on every run of a page that draws html_heatmap.model_view (it takes no room,
    and an element on some runs only would move the widgets after it and lose their focus)."""
    st.html(MODEL_VIEW_JS, unsafe_allow_javascript=True)
