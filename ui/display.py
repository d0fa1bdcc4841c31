"""Showing figures: plotly charts with their export button, HTML figures, and show_matrix /
show_bars, which draw a matrix or bars as HTML or plotly as ui/display_policy.py decides (a few
cells or bars as HTML, so a page may never load plotly.js). A shared module: it imports no
page's module; a view hands it the builders of both forms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from ui import charts, display_policy, html_heatmap, matrix_charts, scripts

# The app's plotly template is set by ui/preload.py's figures_ready, before a page's first figure.


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
    charts.clear_of_toolbar(fig)  # every figure shown: its title below plotly's toolbar
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


# What a view hands show_matrix and show_bars: a builder of each form, called only for the form
# drawn. An HTML builder returns html_heatmap's figure, or a few drawn side by side in columns;
# a plotly builder a figure, or a few side by side (one key each).
HtmlForm = Callable[
    [],
    html_heatmap.HtmlFigure
    | html_heatmap.HeadGrid
    | tuple[html_heatmap.HtmlFigure | html_heatmap.HeadGrid, ...],
]
PlotlyForm = Callable[[], go.Figure | tuple[go.Figure, ...]]


def _show_html_form(html: HtmlForm) -> None:
    """html()'s figure, or its figures in as many columns (stacked on a phone)."""
    drawn = html()
    if not isinstance(drawn, tuple):
        show_html_figure(drawn)
        return
    for column, figure in zip(st.columns(len(drawn)), drawn, strict=True):
        with column:
            show_html_figure(figure)


def _show_plotly_form(plotly: PlotlyForm, key: str | tuple[str, ...], filename: str) -> None:
    """plotly()'s figure, or its figures side by side, each with its key."""
    drawn = plotly()
    if not isinstance(drawn, tuple):
        show_figure(drawn, key if isinstance(key, str) else key[0], filename)
        return
    keys = (key,) if isinstance(key, str) else key
    for column, figure, figure_key in zip(st.columns(len(drawn)), drawn, keys, strict=True):
        with column:
            show_figure(figure, figure_key, filename)


def show_matrix(
    shape: tuple[int, ...],
    html: HtmlForm | None,
    plotly: PlotlyForm,
    key: str | tuple[str, ...],
    filename: str = "attention-explorer",
    rows_up_to: int = display_policy.IMAGE_UP_TO,
    strip: HtmlForm | None = None,
) -> None:
    """A matrix of this shape (rows, columns) drawn as display_policy.matrix_form decides: html()
    (its cells with numbers written in, or one image), strip() for a few rows of any width where
    the view has one, else plotly(). rows_up_to: as matrix_form takes it (DRAW_LIMIT where the
    plotly form draws the first DRAW_LIMIT tokens). html None: a matrix with no HTML form yet
    (several in subplots, frames to play, overlays), drawn by plotly at every size."""
    n_rows, n_columns = shape[-2:]
    form = display_policy.matrix_form(n_rows, n_columns, rows_up_to, strip=strip is not None)
    if html is None or form == "plotly":
        _show_plotly_form(plotly, key, filename)
    elif form == "strip" and strip is not None:
        _show_html_form(strip)
    else:
        _show_html_form(html)


def show_bars(
    n_labels: int,
    html: HtmlForm | None,
    plotly: PlotlyForm | None,
    key: str | tuple[str, ...],
    filename: str = "attention-explorer",
    values: Sequence[np.ndarray] = (),
) -> None:
    """Bars over n_labels labels drawn as display_policy.bars_as_html decides: html() (HTML rows)
    or plotly() (grouped bars; None: nothing past the HTML sizes). values: the numbers of bars
    whose HTML form has no zero line to draw a negative one from (bars from a zero line: none).
    html None: bars with no HTML form yet (histograms, bars beside curves), drawn by plotly."""
    if html is not None and display_policy.bars_as_html(n_labels, values):
        _show_html_form(html)
    elif plotly is not None:
        _show_plotly_form(plotly, key, filename)


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
    """Each label's weights or shares, one bar per series, through show_bars: HTML rows
    (html_heatmap.bar_rows) or plotly's grouped bars, plotly_figure() or charts.weight_bars. The
    same colours (in series order), numbers and title either way. decimals: of the HTML bars."""
    colours = [
        charts.QUALITATIVE_COLOURS[k % len(charts.QUALITATIVE_COLOURS)] for k in range(len(series))
    ]
    show_bars(
        len(labels),
        html=lambda: html_heatmap.bar_rows(
            labels, series, title, y_title, colours, name=key, decimals=decimals
        ),
        plotly=plotly_figure or (lambda: charts.weight_bars(labels, series, title, y_title)),
        key=key,
        filename=filename,
        values=[np.asarray(v, dtype=np.float64) for v in series.values()],
    )


def show_shared_word(
    word: str,
    rows: Mapping[str, tuple[np.ndarray, Sequence[str], int]],
    key: str,
    filename: str,
) -> None:
    """Where a word shared by two sentences looks in each (sentence -> (its softmax row, its
    tokens, the word's position)), through show_bars: two HTML bar charts side by side (keys
    key_A and key_B) on one scale, else matrix_charts' shared_word_weights in plotly (key)."""
    (weights_a, tokens_a, index_a), (weights_b, tokens_b, index_b) = rows.values()
    largest = float(max(np.max(weights_a), np.max(weights_b)))  # one scale for both
    show_bars(
        max(len(tokens_a), len(tokens_b)),
        html=lambda: tuple(
            matrix_charts.shared_word_bars(
                word, weights, tokens, index, sentence_name, largest, name=f"{key}_{sentence_name}"
            )
            for sentence_name, (weights, tokens, index) in rows.items()
        ),
        plotly=lambda: matrix_charts.shared_word_weights(
            word, weights_a, tokens_a, index_a, weights_b, tokens_b, index_b
        ),
        key=key,
        filename=filename,
    )


def show_token_matrix(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    key: str,
    filename: str,
    square: bool,
    x_title: str = "dimension",
    zmax: float | None = 1.0,
    colorbar_title: str = "weight",
    decimals: int | None = None,
) -> None:
    """A token-by-token (square) or token-by-dimension matrix through show_matrix, with
    matrix_charts' builders: HTML cells or one image up to DRAW_LIMIT tokens and 128 columns, a
    few tokens' wide vectors as one strip, else plotly's heatmap, which zooms and draws the
    first DRAW_LIMIT tokens, as the page's limit_note says. zmax, colorbar_title: a square
    matrix's colour scale, as pair_matrix takes them; decimals: its printed cells' (0 for marks
    of 1 and 0, which two decimals would dress up as weights)."""
    pair_scale = {"zmax": zmax, "colorbar_title": colorbar_title}
    if square:
        show_matrix(
            matrix.shape,
            html=lambda: matrix_charts.pair_grid(
                matrix, tokens, title, name=key, decimals=decimals, **pair_scale
            ),
            plotly=lambda: matrix_charts.pair_matrix(matrix, tokens, title, **pair_scale),
            key=key,
            filename=filename,
            rows_up_to=display_policy.DRAW_LIMIT,
        )
        return
    columns = [str(k) for k in range(matrix.shape[1])]
    show_matrix(
        matrix.shape,
        html=lambda: matrix_charts.token_grid(
            matrix, tokens, columns, title, name=key, x_title=x_title
        ),
        plotly=lambda: matrix_charts.token_matrix(matrix, tokens, title, x_title),
        key=key,
        filename=filename,
        rows_up_to=display_policy.DRAW_LIMIT,
        strip=lambda: matrix_charts.token_strip(matrix, tokens, title, key, x_title),
    )
    if display_policy.matrix_form(*matrix.shape, display_policy.DRAW_LIMIT, True) == "plotly":
        st.caption("Blue above zero, red below, scaled to the largest |value| drawn.")


def show_html_figure(figure: html_heatmap.HtmlFigure | html_heatmap.HeadGrid) -> None:
    """A figure drawn as HTML by ui/html_heatmap.py (visitor text escaped there): its markup
    holds data, and no script. A HeadGrid's every-head stores follow it as their own element,
    built once the figure is on its way (HEAD_SWITCH_JS finds them by its data-store)."""
    if isinstance(figure, html_heatmap.HeadGrid):
        _show_markup(figure.figure)
        _show_markup(figure.stores())
        return
    _show_markup(figure)


def _show_markup(markup: html_heatmap.HtmlFigure) -> None:
    """Markup an html_heatmap builder made, shown as it is (called by show_html_figure only)."""
    st.html(markup)
