"""Let the browser fetch plotly.js while the server is still importing torch.

Streamlit's frontend downloads and compiles its plotly bundle (~4.7 MB of JavaScript, 1-2 s of
browser time) only when the first figure of a page arrives. On a fresh visit that figure comes
after torch's import (~1.3 s) and the model run, so the two waits add up. Showing a blank
10-pixel figure while the slow imports run lets the two happen at the same time: cold start to
the first heatmap went from 5.5 s to 4.2 s on 2 cores (bench/bench_speed.py). Imports numpy and
pandas (see below), not torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# Imported in full before any figure is drawn. plotly's validators look numpy and pandas up in
# sys.modules without the import lock; if one session drew the blank figure below while another
# session's thread was still importing them (through torch), plotly found a half-initialised
# module and raised "partially initialized module 'numpy' has no attribute 'ndarray'".
import numpy  # noqa: F401
import pandas  # noqa: F401
import streamlit as st

PRELOAD_KEY = "_plotly_preload"  # tests skip the element with this key when they look for figures
_DONE_KEY = "_plotly_preloaded"
_BLANK_FIGURE = {
    "data": [{"type": "scatter", "x": [], "y": [], "hoverinfo": "skip"}],
    "layout": {
        "height": 10,  # plotly's minimum
        "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
        "xaxis": {"visible": False},
        "yaxis": {"visible": False},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
    },
}


@contextmanager
def plotly_download() -> Iterator[None]:
    """On a session's first run, show a blank figure while the block runs, then remove it."""
    if st.session_state.get(_DONE_KEY):
        yield  # this browser tab has plotly.js already
        return
    st.session_state[_DONE_KEY] = True
    slot = st.empty()
    slot.plotly_chart(
        _BLANK_FIGURE, config={"staticPlot": True, "displayModeBar": False}, key=PRELOAD_KEY
    )
    try:
        yield
    finally:
        slot.empty()
