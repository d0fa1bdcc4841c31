"""Showing figures: plotly charts with their export button, HTML figures, and the choice between
them by size (a few cells or bars as HTML, so a page may never load plotly.js).

Also the app's plotly template, set on import: figures are built after this module is imported
(app.py imports it before any page runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from ui import (
    by_hand_charts,
    charts,
    explanations_charts,
    html_heatmap,
    information_flow_charts,
    matrix_charts,
    scripts,
)

# Plotly's default for numeric axes, "hide past div", hides a tick label that would stick out of
# the figure. To know, it measures every label's box on every draw: half of what a 32-piece
# heatmap costs to redraw (bench/RESULTS.md, Cited in code). The app fits its margins to labels
# (charts.label_margin, automargin on), so no label sticks out and none was ever hidden; the
# phone check in tests/test_browser_devices.py (assert_phone_dark) looks on every page.
# Set here, where figures meet Streamlit: the chart modules import no streamlit, and Streamlit's
# template ("streamlit", registered when streamlit is imported) must be merged in for its light
# and dark theme to apply. Merged once: a default written "streamlit+x" is merged anew for every
# figure built (bench/RESULTS.md, Cited in code).
pio.templates["attention_explorer"] = pio.templates.merge_templates(
    pio.templates["streamlit"],
    go.layout.Template(
        layout={
            "xaxis": {"ticklabeloverflow": "allow"},
            "yaxis": {"ticklabeloverflow": "allow"},
        }
    ),
)
pio.templates.default = "attention_explorer"


# When a Layer or Head slider on the page changes value, show the matching head in every figure
# that carries all heads: a query's rows in
# two sentences (heatmaps_charts.every_head_compare_rows), the model view's frame
# (html_heatmap.model_view), the Head view's lines (head_view_charts.every_head_view_figure)
# and the Overview's HTML heatmap (html_heatmap.attention_grid, which the script also gives a
# hover and a click readout, as it does html_heatmap.value_grid's image of a larger matrix).
# The script is ui/js/head_switch.js, a fixed file (ui/scripts.py): it reads numbers (the
# sliders' values, the figures' own layout.meta, the data-heads of their stores (stores_aside)
# and of the Overview's heatmap) and writes text only through textContent and title, so a label
# read from the page stays text; no visitor text is ever part of the script itself (a stored
# title is the escaped one the server would draw). Installed once per browser tab.
HEAD_SWITCH_JS = scripts.script_element("head_switch.js")


def head_switch() -> None:
    """The script that switches every-head figures in the browser, and gives the HTML heatmaps
    and value grids drawn as one image their hover and click readout (see HEAD_SWITCH_JS).
    Called unconditionally by a page that may draw one: it is an element of the page, and one
    present on some runs only would shift the widgets after it (they lose keyboard focus)."""
    st.html(HEAD_SWITCH_JS, unsafe_allow_javascript=True)


def image_format() -> str:
    """The format of the plotly camera button (PNG or SVG), chosen once in the sidebar."""
    return st.session_state.get("image_format", "png")


def image_format_picker() -> None:
    with st.sidebar:
        st.radio(
            "Camera button saves figures as",
            ["png", "svg"],
            horizontal=True,
            key="image_format",
            bind="query-params",  # the URL holds the label: PNG or SVG
            format_func=str.upper,
        )


def show_figure(
    fig: go.Figure,
    key: str | None = None,
    filename: str = "attention-explorer",
    on_select: Callable[[], None] | None = None,
) -> None:
    """st.plotly_chart with the export button set up (PNG/SVG at 2x, no plotly logo).

    on_select: a callback run when the user clicks a scatter point (read the points from
    st.session_state[key].selection); heatmap cells cannot be selected (streamlit#8760).
    A figure that carries every head's stores (layout.meta["heads"]) is shown without them,
    after an element of their own (stores_aside says why): the figure given is changed to name
    them instead, so show it once.
    """
    config = {
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": image_format(),
            "filename": filename,
            "scale": 2,
        },
    }
    aside = stores_aside(fig)
    if aside is not None:  # first, so the script finds the stores once the figure is drawn
        _show_stores(aside)
    if on_select is None:
        st.plotly_chart(fig, key=key, config=config, width="stretch")
    else:
        st.plotly_chart(
            fig,
            key=key,
            config=config,
            width="stretch",
            on_select=on_select,
            selection_mode="points",
        )


# Streamlit draws a figure through its theme: it turns the figure's whole spec into a string,
# rewrites the colours in it and parses it again, on every draw (twice when a figure mounts).
# An every-head figure's stores (72 heads of packed weights for MiniLM) are most of its spec and
# hold no colour, so they travel beside it, as the Overview's HTML heatmap keeps its own in
# data-heads: text in an attribute, parsed by HEAD_SWITCH_JS with JSON.parse, never markup.
# With the model view grid in float32, the colour rewrites of an Attention heatmaps update took
# a third of the CPU in profiles; the update as a whole moved within the noise (bench/RESULTS.md).
def stores_aside(fig: go.Figure) -> html_heatmap.HtmlFigure | None:
    """Take every head's stores out of fig's layout.meta into the element that carries them.

    None for a figure without them. The figure keeps the rest of its meta and, in
    meta["store"], the id that HEAD_SWITCH_JS finds its stores by.
    """
    meta = fig.layout.meta
    if not isinstance(meta, dict) or "heads" not in meta:
        return None
    store_id, aside = html_heatmap.stores_element(meta["heads"])
    fig.layout.meta = {**{k: v for k, v in meta.items() if k != "heads"}, "store": store_id}
    return aside


def _show_stores(aside: html_heatmap.HtmlFigure) -> None:
    """The stores' element, made by html_heatmap.stores_element (which escapes it)."""
    st.html(aside)


# Labels up to which grouped weights are HTML rows (html_heatmap.bar_rows), past which plotly's
# grouped bars: a page whose first figure is a few bars then loads no plotly.js (most of a
# plain app's page load), and a long sentence keeps a chart that fits its hundreds of keys.
HTML_BARS_UP_TO = 24


def show_weight_bars(
    labels: Sequence[str],
    series: Mapping[str, np.ndarray],
    title: str,
    key: str,
    y_title: str = "weight",
    filename: str = "attention-explorer",
    plotly_figure: Callable[[], go.Figure] | None = None,
    decimals: int = 2,
) -> None:
    """Each label's weights or shares, one bar per series: HTML rows for a few labels, else
    plotly's grouped bars, plotly_figure() or by_hand_charts.weight_bars. The same colours (in
    series order), numbers and title either way. A negative value goes to plotly too: its bars
    grow down from zero. decimals: of the HTML bars' numbers."""
    values = [np.asarray(v, dtype=np.float64) for v in series.values()]
    if len(labels) <= HTML_BARS_UP_TO and all((v >= 0).all() for v in values):
        colours = [
            charts.QUALITATIVE_COLOURS[k % len(charts.QUALITATIVE_COLOURS)]
            for k in range(len(series))
        ]
        show_html_figure(
            html_heatmap.bar_rows(
                labels, series, title, y_title, colours, name=key, decimals=decimals
            )
        )
    elif plotly_figure is not None:
        show_figure(plotly_figure(), key, filename)
    else:
        show_figure(by_hand_charts.weight_bars(labels, series, title, y_title), key, filename)


def show_shared_word(
    word: str,
    rows: Mapping[str, tuple[np.ndarray, Sequence[str], int]],
    key: str,
    filename: str,
) -> None:
    """Where a word shared by two sentences looks in each (sentence -> (its softmax row, its
    tokens, the word's position)): two HTML bar charts side by side while both sentences have
    at most HTML_BARS_UP_TO tokens (keys key_A and key_B), else matrix_charts'
    shared_word_weights in plotly (key)."""
    (weights_a, tokens_a, index_a), (weights_b, tokens_b, index_b) = rows.values()
    if max(len(tokens_a), len(tokens_b)) <= HTML_BARS_UP_TO:
        largest = float(max(np.max(weights_a), np.max(weights_b)))  # one scale for both
        for column, (sentence_name, (weights, tokens, index)) in zip(
            st.columns(2), rows.items(), strict=True
        ):
            with column:
                show_html_figure(
                    matrix_charts.shared_word_bars(
                        word,
                        weights,
                        tokens,
                        index,
                        sentence_name,
                        largest,
                        name=f"{key}_{sentence_name}",
                    )
                )
    else:
        figure = matrix_charts.shared_word_weights(
            word, weights_a, tokens_a, index_a, weights_b, tokens_b, index_b
        )
        show_figure(figure, key, filename)


def show_mixing(
    matrix: np.ndarray, labels: Sequence[str], title: str, unit: str, key: str, filename: str
) -> None:
    """An (n, n) rollout, flow or norm mixing matrix (row i: a position after the layer, column
    j: an input piece): HTML cells with their shares written in while small
    (matrix_charts.fits_a_grid), one image of them up to fits_an_image, else
    information_flow_charts.mixing_heatmap. Viridis over the shares' own range either way."""
    if matrix_charts.fits_an_image(matrix):
        show_html_figure(
            matrix_charts.pair_grid(
                matrix,
                labels,
                title,
                name=key,
                colorbar_title="share",
                zmax=None,
                axis_titles=("position after the layer", f"input {unit} (layer 0)"),
                shape_in_title=False,
            )
        )
    else:
        show_figure(
            information_flow_charts.mixing_heatmap(matrix, labels, title, unit=unit), key, filename
        )


def show_scores_by_method(
    scores: Mapping[str, np.ndarray],
    tokens: Sequence[str],
    title: str,
    unit: str,
    key: str,
    filename: str,
) -> None:
    """Explanation scores (method label -> (n,) scores), a row per method scaled to its largest
    |score|: HTML up to matrix_charts.fits_an_image (numbers written in, then one image),
    else explanations_charts.methods_heatmap in plotly."""
    method_labels = list(scores)
    matrix = np.array([scores[label] for label in method_labels])  # (methods, n)
    if matrix_charts.fits_an_image(matrix):
        show_html_figure(
            explanations_charts.methods_grid(matrix, method_labels, tokens, title, unit, key)
        )
    else:
        figure = explanations_charts.methods_heatmap(matrix, method_labels, tokens, title)
        show_figure(figure, key, filename)


def show_matrix(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    key: str,
    filename: str,
    square: bool,
    x_title: str = "dimension",
    zmax: float | None = 1.0,
    colorbar_title: str = "weight",
) -> None:
    """A token-by-token (square) or token-by-dimension matrix, as HTML where it fits, so that
    a page of such matrices loads no plotly.js: cells with every number in them while it is
    small (matrix_charts.fits_a_grid); a few tokens' wide vectors (up to 12 rows of 384) as
    one image (fits_a_strip); else, up to DRAW_LIMIT tokens and 128 columns, one image of the
    cells with a readout (fits_an_image). Past those, matrix_charts' plotly heatmap, which
    zooms and draws the first DRAW_LIMIT tokens, as the page's limit_note says. zmax,
    colorbar_title: a square matrix's colour scale, as pair_matrix takes them."""
    pair_scale = {"zmax": zmax, "colorbar_title": colorbar_title}
    written = matrix_charts.fits_a_grid(matrix)
    whole = matrix_charts.fits_an_image(matrix, max_rows=matrix_charts.DRAW_LIMIT)
    if square and whole:
        show_html_figure(matrix_charts.pair_grid(matrix, tokens, title, name=key, **pair_scale))
    elif square:
        show_figure(matrix_charts.pair_matrix(matrix, tokens, title, **pair_scale), key, filename)
    elif not written and matrix_charts.fits_a_strip(matrix):  # a few tokens' wide vectors
        show_html_figure(matrix_charts.token_strip(matrix, tokens, title, key, x_title))
    elif whole:
        columns = [str(k) for k in range(matrix.shape[1])]
        show_html_figure(
            matrix_charts.token_grid(matrix, tokens, columns, title, name=key, x_title=x_title)
        )
    else:
        show_figure(matrix_charts.token_matrix(matrix, tokens, title, x_title), key, filename)
        st.caption("Blue above zero, red below, scaled to the largest |value| drawn.")


def show_html_figure(figure: html_heatmap.HtmlFigure) -> None:
    """A figure drawn as HTML by ui/html_heatmap.py (visitor text escaped there): its markup
    holds data, and no script."""
    st.html(figure)
