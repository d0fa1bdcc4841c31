"""Let the browser fetch plotly.js while the server is still importing torch.

Streamlit's frontend downloads and compiles its plotly bundle (~4.7 MB of JavaScript, 1-2 s of
browser time) only when the first figure of a page arrives. On a fresh visit that figure comes
after torch's import (~1.3 s) and the model run, so the two waits add up. Showing a blank
10-pixel figure while the slow imports run lets the two happen at the same time: cold start to
the first heatmap went from 5.5 s to 4.2 s on 2 cores (bench/bench_speed.py). Imports neither
torch nor pandas; a page that may draw with plotly imports pandas here (plotly_download).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

# numpy in full before the blank figure is drawn (figures_ready says why).
from ui import (
    charts,  # noqa: F401
)

APP_TEMPLATE = "attention_explorer"  # plotly's default once figures_ready has run
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
  /* A page title at Streamlit's 44 px took two or three lines of a phone's first screen; at
     30 px most take one, and a section's heading one line less: the figure comes up. */
  [data-testid="stMain"] [data-testid="stHeading"] h1 { font-size: 1.875rem; }
  [data-testid="stMain"] [data-testid="stHeading"] h3 { font-size: 1.375rem; }
  .katex-display > .katex { font-size: 0.9em; }
  [data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; }
  /* A static table wraps its cells, but four columns of neighbour lists still came out ~60 px
     wider than a phone and were cut at the right edge: smaller type and padding there. */
  [data-testid="stTable"] { overflow-x: auto; }  /* five sentences' columns still do not fit */
  [data-testid="stTable"] table { font-size: 0.8em; }
  [data-testid="stTable"] th, [data-testid="stTable"] td { padding: 0.25rem 0.3rem; }
}
/* An every-head figure's stores (display.stores_aside) are data, not content: their element
   takes no room, so no gap of the page's layout opens under the figure. A script's element
   (the head switch, the head view's hover) neither. */
[data-testid="stElementContainer"]:has(> [data-testid="stHtml"] > .ae-stores) { display: none; }
[data-testid="stElementContainer"]:has(> [data-testid="stHtml"] > script:only-child) {
  display: none; }
/* sidebar.sentence_box_in_page: shown only where Streamlit folds the sidebar away (its "md"
   breakpoint, 768 px), so a phone visitor sees where to type. */
@media (min-width: 768px) { .st-key-page_sentence { display: none; } }
/* A text box writes "Press Ctrl+Enter to apply · 1956/20000" inside its bottom edge: room
   under the last line, so the two never overlap. */
[data-testid="stTextArea"] textarea { padding-bottom: 1.7rem; }
/* Keyboard focus on a sidebar link: an outline, where the current page has a grey fill. */
[data-testid="stSidebarNav"] a:focus-visible { outline: 3px solid #1c83e1; outline-offset: 1px; }
/* A slider's thumb with keyboard focus: the same outline (Streamlit's own is a faint halo of
   the thumb's colour, hard to find on a page of sliders). The focused input sits in the thumb. */
[data-testid="stSlider"] div:has(> div > input[type="range"]:focus-visible) {
  outline: 3px solid #1c83e1; outline-offset: 2px; }
/* Streamlit leaves 6rem above a page, under its 3.75rem header: the map and the page's title
   start ~2 rem higher, so more of each page's payoff is on the first screen. */
[data-testid="stMainBlockContainer"] { padding-top: 4rem; }
</style>"""

# The styles of every HTML figure (ui/html_heatmap.py builds their markup, with none of its own).
# Once per run here, style-only, so it stays one element in Streamlit's event container: a figure
# that carried its own <style> added it to the page again on every update, and each new style
# element makes the browser recompute the styles of the whole page.
_HTML_FIGURE_CSS = """<style>
/* ---- ui/html_heatmap.py's figures. Text inherits the theme's colour and font, so they
   read in light and dark alike. */
/* attention_grid: cells are squares (aspect-ratio) sized by the column's width; 1 px gaps
   show the page. */
.ae-heatmap { margin: 0; max-width: 36rem; font-size: 12px; line-height: 1.2; }
.ae-heatmap figcaption { font-size: 14px; margin-bottom: 0.4rem; }
.ae-heatmap .ae-note { display: block; font-size: 11px; opacity: 0.8; }
.ae-heatmap .ae-note:empty { display: none; }
.ae-body { display: flex; align-items: stretch; gap: 0.3rem; }
/* The row title, centred on the rows, is sticky: where the figure runs past the screen's edge
   (the first screen's fold cut "query (attending)" in half) it moves along to stay whole. */
.ae-axis-query { writing-mode: vertical-rl; transform: rotate(180deg); text-align: center;
  opacity: 0.8; align-self: center; position: sticky; top: 4rem; bottom: 0.5rem; }
.ae-axis-key { text-align: center; opacity: 0.8; margin-top: 0.2rem; }
.ae-grid { flex: 1; min-width: 0; display: grid; grid-template-columns:
  minmax(0, max-content) repeat(var(--pieces), minmax(0, 1fr)) 3rem; }
.ae-grid i { aspect-ratio: 1; font-style: normal; font-size: 11px; display: flex;
  align-items: center; justify-content: center; overflow: hidden; }
/* A row is as tall as its cells: a label takes no height (it overflows its row's centre line),
   so 128 rows of 3 px cells are not 128 rows of 14 px text. */
.ae-query { grid-column: 1; max-width: 7rem; height: 0; line-height: 0; align-self: center;
  overflow-x: clip; overflow-y: visible; text-overflow: ellipsis; white-space: nowrap;
  text-align: right; padding-right: 0.25rem; }
.ae-key { writing-mode: vertical-rl; transform: rotate(180deg); max-height: 6rem;
  overflow: hidden; text-overflow: ellipsis; white-space: nowrap; align-self: end;
  justify-self: center; padding-top: 0.25rem; }
.ae-key.ae-upright { writing-mode: horizontal-tb; transform: none; max-height: none;
  max-width: 100%; padding: 0 0 0.2rem 0; }
.ae-cells { width: 100%; aspect-ratio: 1; display: block; image-rendering: pixelated;
  cursor: crosshair; }
.ae-grid i { cursor: crosshair; }
/* the clicked or tapped cell (ui/js/head_switch.js): framed in the page's red */
.ae-grid { position: relative; }
.ae-grid i.ae-picked { outline: 2px solid #FF4B4B; outline-offset: -2px; }
.ae-mark { position: absolute; outline: 2px solid #FF4B4B; pointer-events: none;
  min-width: 4px; min-height: 4px; }
.ae-lab { visibility: hidden; }
.ae-lab.ae-wide { visibility: visible; }
.ae-bar-title { align-self: end; justify-self: start; padding: 0 0 0.2rem 0.3rem;
  font-size: 11px; opacity: 0.8; }
.ae-colourbar { position: relative; font-size: 10px; }
.ae-ramp { position: absolute; left: 0.3rem; width: 0.7rem; top: 0; bottom: 0; }
.ae-top { position: absolute; left: 1.15rem; top: 0; line-height: 1; }
.ae-bottom { position: absolute; left: 1.15rem; bottom: 0; line-height: 1; }
.ae-readout { font-size: 12px; min-height: 1.2em; margin-top: 0.3rem; opacity: 0.9; }
/* 33 to 48 pieces keep every label: a wider frame and a smaller font (html_heatmap.many_class) */
.ae-heatmap.ae-many, .ae-matrix.ae-image.ae-many { max-width: 52rem; }
.ae-many .ae-lab { font-size: 10px; }
.ae-phone-note { display: none; }
@media (max-width: 640px) {
  .ae-wide-note { display: none; }
  .ae-lab.ae-wide:not(.ae-narrow) { visibility: hidden; }
  .ae-lab.ae-narrow { visibility: visible; }
  .ae-phone-note { display: inline; }
  .ae-query { max-width: 4.5rem; }
  .ae-matrix .ae-query { max-width: 6rem; }  /* a method's name, cut, and six cells still fit */
}
/* value_grid and value_strip: a frame that fills a column up to a size where four cells
   still read as a matrix, not a table (cells, labels and colour bar as above). */
.ae-matrix { margin: 0 0 1rem 0; max-width: 22rem; font-size: 12px; line-height: 1.2; }
.ae-matrix figcaption { font-size: 14px; margin-bottom: 0.4rem; }
.ae-matrix .ae-grid i { font-size: 13px; cursor: default; }
.ae-matrix.ae-dense .ae-grid i { font-size: 11px; }
.ae-matrix .ae-gap { background: transparent; }
/* room for a method's name ("integrated gradients") on either side */
.ae-matrix .ae-query { max-width: 8rem; }
.ae-matrix .ae-key { max-height: 8rem; }
.ae-matrix.ae-wide, .ae-matrix.ae-image { max-width: 36rem; }
/* A value grid's image in a third of a page (Q, K and V side by side) is as narrow as on a
   phone: its labels thin to the phone's set by the figure's own width, not the screen's. */
.ae-matrix.ae-image { container: ae-figure / inline-size; }
@container ae-figure (max-width: 26rem) {
  .ae-lab.ae-wide:not(.ae-narrow) { visibility: hidden; }
  .ae-lab.ae-narrow { visibility: visible; }
}
.ae-strip { aspect-ratio: auto; cursor: default; }
.ae-strip-ends { grid-column: 2; display: flex; justify-content: space-between; font-size: 11px;
  opacity: 0.8; padding-bottom: 0.2rem; }
/* bar_rows: labels in a column as wide as the longest (up to 7rem, then cut with …), bars in
   the rest; the series' colours are mid-tones. */
.ae-bars { margin: 0 0 1rem 0; max-width: 36rem; font-size: 12px; line-height: 1.2; }
.ae-bars figcaption { font-size: 14px; margin-bottom: 0.4rem; }
.ae-legend { display: block; font-size: 12px; margin-top: 0.25rem; }
.ae-swatch { display: inline-block; width: 0.7rem; height: 0.7rem; margin: 0 0.3rem 0 0.8rem;
  vertical-align: -0.05rem; }
.ae-key-item { white-space: nowrap; }
.ae-key-item:first-child .ae-swatch { margin-left: 0; }
.ae-bar-grid { display: grid; grid-template-columns: minmax(0, max-content) minmax(0, 1fr);
  column-gap: 0.4rem; row-gap: 1px; align-items: center; }
.ae-bar-label { grid-column: 1; max-width: 7rem; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; text-align: right; align-self: center; padding: 0.15rem 0; }
.ae-bar-row { grid-column: 2; display: flex; align-items: center; gap: 0.3rem; height: 1.1rem;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
.ae-bar { display: block; height: 0.8rem; flex: none; }
.ae-marked { font-weight: 700; }
.ae-group-end { margin-bottom: 0.35rem; }  /* a little air between one label's bars and the next */
.ae-bars .ae-axis-key { text-align: left; opacity: 0.8; margin-top: 0.3rem; }
/* model_view: one row of tiles per layer, H to a row, at most six on a phone (a finger wide);
   the chosen head framed in the page's red. */
.ae-model-view { margin: 0 0 0.5rem 0; max-width: 48rem; font-size: 11px; line-height: 1.2; }
.ae-model-view figcaption { font-size: 14px; margin-bottom: 0.4rem; }
.ae-model-view .ae-note { display: block; font-size: 11px; opacity: 0.8; }
.ae-model-view .ae-note:empty { display: none; }
.ae-mv-layer { display: grid; grid-template-columns: 1.8rem minmax(0, 1fr); align-items: center;
  margin-bottom: 0.35rem; }
.ae-mv-l { opacity: 0.8; }
.ae-mv-tiles { display: grid; grid-template-columns: repeat(var(--heads), minmax(0, 1fr));
  gap: 4px; }
.ae-mv-tile { display: flex; flex-direction: column; align-items: center; cursor: pointer; }
.ae-mv-tile img { width: 100%; aspect-ratio: 1; display: block; image-rendering: pixelated; }
.ae-mv-tile.ae-mv-on img { outline: 3px solid #FF4B4B; outline-offset: 1px; }
.ae-mv-h { font-size: 10px; opacity: 0.7; }
.ae-mv-scale { display: flex; align-items: center; gap: 0.4rem; margin: 0.2rem 0 0 1.8rem; }
.ae-mv-ramp { width: 8rem; height: 0.6rem; }
@media (max-width: 640px) {
  .ae-mv-tiles { grid-template-columns: repeat(var(--phone-heads), minmax(0, 1fr)); gap: 6px; }
  /* a layer's two rows of tiles: its name at the top, more air before the next layer */
  .ae-mv-layer { align-items: start; margin-bottom: 0.9rem; }
}
</style>"""


def figures_ready() -> None:
    """Make this process ready to build plotly figures: pandas in full, then the app's template.

    Plotly's validators look pandas up in sys.modules without waiting for its import lock. On a
    cold server two sessions may run at once, and one thread then finds pandas half-imported by
    the other ("partially initialized module 'pandas' has no attribute 'Series'"). An import
    statement does wait for that lock, so a page that may draw with plotly imports it here,
    first. The Overview never draws with plotly (path.Step.plotly_free) and skips it: pandas
    and pyarrow are a large share of a cold server's imports before its first heatmap
    (bench/bench_speed.py, bench/RESULTS.md).

    The template is merged here, after pandas, and not when a module is imported: merging
    validates plotly objects too, and the server's head start (serve.py) imports the modules
    while a visitor's page may be importing pandas (tests/test_serve.py stages that race)."""
    import pandas  # noqa: F401

    if pio.templates.default != APP_TEMPLATE:
        _register_app_template()


def _register_app_template() -> None:
    """The app's plotly template: Streamlit's, with tick labels allowed past the plot area.

    Plotly's default for numeric axes, "hide past div", hides a tick label that would stick out
    of the figure. To know, it measures every label's box on every draw: half of what a 32-piece
    heatmap costs to redraw (bench/RESULTS.md, Cited in code). The app fits its margins to labels
    (charts.label_margin, automargin on), so no label sticks out and none was ever hidden; the
    phone check in tests/test_browser_devices.py (assert_phone_dark) looks on every page.
    Streamlit's template ("streamlit", registered when streamlit is imported) is merged in for
    its light and dark theme to apply; the chart modules import no streamlit. Merged once: a
    default written "streamlit+x" is merged anew for every figure built (bench/RESULTS.md,
    Cited in code)."""
    pio.templates[APP_TEMPLATE] = pio.templates.merge_templates(
        pio.templates["streamlit"],
        go.layout.Template(
            layout={
                "xaxis": {"ticklabeloverflow": "allow"},
                "yaxis": {"ticklabeloverflow": "allow"},
            }
        ),
    )
    pio.templates.default = APP_TEMPLATE


@contextmanager
def plotly_download(needed: bool = True) -> Iterator[None]:
    """On a cold server's first run of a session, show a blank figure while the block runs.

    needed: whether the page about to run draws with plotly. The Overview does not (its head is
    HTML), and plotly's ~0.8 s of browser work would be spent there for nothing.

    Every run creates the same placeholder first, filled or not: Streamlit identifies elements
    by their position, and a placeholder present on the first run but missing on the next would
    shift every later element by one. The frontend then rebuilt every widget on the page, and a
    slider moved with the keyboard lost its focus after the first key.
    Once the slow imports are done in this process, the block takes microseconds: no blank
    figure then, which spares the browser a plotly draw on every new visit.
    """
    global _slow_imports_done
    if needed:
        figures_ready()
    st.html(_TOUCH_TOOLBAR_CSS)
    st.html(_HTML_FIGURE_CSS)
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
