"""Let the browser fetch plotly.js while the server is still importing torch.

Streamlit's frontend downloads and compiles its plotly bundle (~4.7 MB of JavaScript, 1-2 s of
browser time) only when the first figure of a page arrives. On a fresh visit that figure comes
after torch's import (~1.3 s) and the model run, so the two waits add up. Showing a blank
10-pixel figure while the slow imports run lets the two happen at the same time: cold start to
the first heatmap went from 5.5 s to 4.2 s on 2 cores (bench/bench_speed.py). Imports numpy and
pandas (through ui.charts), not torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

# numpy and pandas in full before the blank figure is drawn (ui/charts.py says why).
from ui import charts  # noqa: F401

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


_slow_imports_done = False  # set once the first session's block has run in this process

# Plotly shows its toolbar permanently on devices without hover (phones, tablets), where it sat on
# every figure's title. Hidden there until the figure is touched (a tap gives it :hover), as a
# mouse user sees it. On narrow screens display formulas and static tables get smaller and a tab
# bar wraps onto a second row (scrolled sideways, a link to the last tab opened with that tab out
# of sight).
# Style-only HTML: Streamlit puts it in its event container, outside the page's element order,
# and runs no script.
_TOUCH_TOOLBAR_CSS = """<style>
@media (hover: none) {
  .js-plotly-plot .modebar-container { visibility: hidden; }
  .js-plotly-plot:hover .modebar-container { visibility: visible; }
}
/* KaTeX draws display formulas at 1.21em and never breaks them: on a phone most scrolled
   inside their box. At 0.9em a formula up to ~480 px wide on a desktop fits 358 px. */
@media (max-width: 640px) {
  .katex-display > .katex { font-size: 0.9em; }
  [data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; }
  /* A static table wraps its cells, but four columns of neighbour lists still came out ~60 px
     wider than a phone and were cut at the right edge: smaller type and padding there. */
  [data-testid="stTable"] { overflow-x: auto; }  /* five sentences' columns still do not fit */
  [data-testid="stTable"] table { font-size: 0.8em; }
  [data-testid="stTable"] th, [data-testid="stTable"] td { padding: 0.25rem 0.3rem; }
}
/* An every-head figure's stores (widgets.stores_aside) are data, not content: their element
   takes no room, so no gap of the page's layout opens under the figure. */
[data-testid="stElementContainer"]:has(> [data-testid="stHtml"] > .ae-stores) { display: none; }
</style>"""


@contextmanager
def plotly_download(needed: bool = True) -> Iterator[None]:
    """On a cold server's first run of a session, show a blank figure while the block runs.

    needed: whether the page about to run draws with plotly. The Overview does not (its head is
    HTML), and plotly's ~0.8 s of browser work would be spent there for nothing.

    Every run creates the same placeholder first, filled or not: Streamlit identifies elements
    by their position, and a placeholder present on the first run but missing on the next would
    shift every later element by one. The frontend then rebuilt every widget on the page, and a
    slider moved with the keyboard lost its focus after the first key (issue 13).
    Once the slow imports are done in this process, the block takes microseconds: no blank
    figure then, which spares the browser a plotly draw on every new visit.
    """
    global _slow_imports_done
    st.html(_TOUCH_TOOLBAR_CSS)
    slot = st.empty()
    if not needed or _slow_imports_done or st.session_state.get(_DONE_KEY):
        yield  # no figure to come, imports done, or this browser tab has plotly.js already
        _slow_imports_done = True
        return
    st.session_state[_DONE_KEY] = True
    slot.plotly_chart(
        _BLANK_FIGURE, config={"staticPlot": True, "displayModeBar": False}, key=PRELOAD_KEY
    )
    try:
        yield
        _slow_imports_done = True
    finally:
        slot.empty()
