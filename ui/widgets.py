"""Widgets every page shares: layer/head pickers, figure display with export, CSV downloads."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

import core
from ui import (
    by_hand_charts,
    charts,
    explanations_charts,
    html_heatmap,
    information_flow_charts,
    matrix_charts,
    scripts,
)
from ui.escape import literal

# Plotly's default for numeric axes, "hide past div", hides a tick label that would stick out of
# the figure. To know, it measures every label's box on every draw: half of what a 32-piece
# heatmap costs to redraw (40 -> 20 ms). The app fits its margins to its labels
# (charts.label_margin, automargin on), so no label sticks out and none was ever hidden; the
# phone check in tests/test_browser_devices.py (assert_phone_dark) looks on every page.
# Set here, where figures meet Streamlit: the chart modules import no streamlit, and Streamlit's
# template ("streamlit", registered when streamlit is imported) must be merged in for its light
# and dark theme to apply. Merged once: a default written "streamlit+x" is merged anew for every
# figure built, ~5 ms each.
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


def layer_head_picker(
    model: core.BertEncoder,
    key_prefix: str = "",
    columns: bool = True,
    in_browser: bool = False,
) -> tuple[int, int]:
    """Two sliders (bound to the URL) choosing a layer and a head, both counted from 0.

    in_browser: moving them reruns nothing. The page shows a figure that carries every head
    (head_view_charts.every_head_view_figure, or
    html_heatmap.attention_grid with every_head) and calls
    head_switch() (and shows nothing else that depends on the head); Streamlit still writes
    the new values to the URL and hands them to the next run.
    """
    left, right = st.columns(2) if columns else (st.container(), st.container())
    on_change = "ignore" if in_browser else "rerun"
    with left:
        layer = layer_slider(model, key_prefix, on_change)
    with right:
        head = head_slider(model, key_prefix, on_change)
    return layer, head


def layer_slider(model: core.BertEncoder, key_prefix: str = "", on_change: str = "rerun") -> int:
    """The Layer slider alone (bound to the URL, counted from 0), for a section that shows every
    head of one layer; the same key as layer_head_picker's, so the two share the layer."""
    layer = st.slider(
        "Layer",
        0,
        model.n_layers - 1,
        0,
        key=f"{key_prefix}layer",
        bind="query-params",
        on_change=on_change,
    )
    return min(int(layer), model.n_layers - 1)  # a larger model's number in the URL: clamped


def head_slider(model: core.BertEncoder, key_prefix: str = "", on_change: str = "rerun") -> int:
    """The Head slider alone (bound to the URL, counted from 0), layer_head_picker's."""
    head = st.slider(
        "Head",
        0,
        model.n_heads - 1,
        0,
        key=f"{key_prefix}head",
        bind="query-params",
        on_change=on_change,
    )
    return min(int(head), model.n_heads - 1)  # a larger model's number in the URL: clamped


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
# ~12 ms of CPU instead of ~33 (profiles); the update as a whole moved within the noise.
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
# grouped bars: a page whose first figure is a few bars then loads no plotly.js (~0.6 s of a
# browser's main thread), and a long sentence keeps a chart that fits its hundreds of keys.
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


def matrix_csv(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> str:
    """A labelled CSV of a 2-D matrix; labels are quoted so commas in tokens stay inside cells."""
    buffer = io.StringIO()
    buffer.write(",".join([_csv_label("")] + [_csv_label(c) for c in col_labels]) + "\n")
    for label, row in zip(row_labels, np.asarray(matrix), strict=True):
        buffer.write(",".join([_csv_label(label)] + [f"{v:.6g}" for v in row]) + "\n")
    return buffer.getvalue()


def static_table(columns: Mapping[str, Sequence], decimals: Mapping[str, int]) -> None:
    """A few rows as a static table (st.table), numbers written to the decimals given per column.

    For tables of a handful of rows: st.dataframe's scrolling grid loads a script of its own
    (~0.13 s of a page load, side by side), which a table this small does not need. st.table
    reads its cells as Markdown, so text cells go through escape.literal(). The numbers are
    written here as text, not through pandas' Styler, which needs jinja2 for it; st.table
    aligns text cells left.
    """
    frame = pd.DataFrame(
        {
            name: [_table_cell(value, decimals.get(name)) for value in values]
            for name, values in columns.items()
        }
    )
    st.table(frame, hide_index=True)


def _table_cell(value: object, places: int | None) -> object:
    """A cell as static_table shows it: text escaped, a number to `places` decimals if given."""
    if isinstance(value, str):
        return literal(value)
    if places is None:
        return value
    return f"{value:.{places}f}"


def piece_scheme_note(trace: core.Trace) -> str:
    """Two sentences, read from the Trace, on how this model marks its pieces (WordPiece's ##,
    or a byte-level or SentencePiece space) and which special pieces its tokenizer adds."""
    if trace.piece_scheme == "wordpiece":
        marks = "Every piece after a word's first is marked `##`."
    else:
        marks = (
            "A piece that starts a new word carries the space before it, shown here as "
            f"{core.text.SPACE_MARK}."
        )
    first, last = (literal(trace.tokens[i]) for i in (0, -1))
    starts, ends = bool(trace.special[0]), bool(trace.special[-1]) and trace.n_tokens > 1
    if starts and ends:
        framing = f"The tokenizer wraps the pieces in {first} … {last}."
    elif starts:
        framing = f"The tokenizer puts {first} before the first piece."
    elif ends:
        framing = f"The tokenizer puts {last} after the last piece."
    else:
        framing = "The tokenizer adds no special piece."
    return f"{marks} {framing}"


def special_pieces_phrase(trace: core.Trace) -> str:
    """The special pieces this Trace holds, each once and escaped for Markdown: "[CLS] and
    [SEP]" for MiniLM, "<s>" for a Llama, "" for GPT-2, whose tokenizer adds none."""
    names = list(
        dict.fromkeys(
            t for t, is_special in zip(trace.tokens, trace.special, strict=True) if is_special
        )
    )
    shown = [literal(name, max_chars=40) for name in names]
    return " and ".join(shown) if len(shown) <= 2 else ", ".join(shown[:-1]) + " and " + shown[-1]


def numbered(tokens: Sequence[str]) -> list[str]:
    """'3:bank' style labels so repeated tokens stay distinct in CSV headers."""
    return [f"{i}:{t}" for i, t in enumerate(tokens)]


def _csv_label(label: str) -> str:
    """A label as one quoted CSV cell: commas and quotes in a token stay inside it."""
    return '"' + str(label).replace('"', '""') + '"'


def every_head_csv(attentions: np.ndarray, labels: Sequence[str]) -> str:
    """(L, H, n, n) -> CSV: one row per layer, head and query, one column per key."""
    buffer = io.StringIO()
    header = ["layer", "head", _csv_label("query")] + [_csv_label(k) for k in labels]
    buffer.write(",".join(header) + "\n")
    for layer, heads in enumerate(attentions):
        for head, attn_weights in enumerate(heads):
            for query, row in zip(labels, attn_weights, strict=True):
                values = ",".join(f"{v:.6g}" for v in row)
                buffer.write(f"{layer},{head},{_csv_label(query)},{values}\n")
    return buffer.getvalue()


def download_every_head(
    weights: Callable[[], np.ndarray],
    labels: Sequence[str],
    filename: str,
    key: str | None = None,
) -> None:
    """A download button for every head's weights as one CSV (built lazily, only when clicked).

    For a page whose sliders switch heads in the browser: the server does not know the head on
    screen until the next run, so a one-head CSV could be another head's.
    weights: returns the (L, H, n, n) weights as shown, from the page's Trace fetched again
    (ui.state.refetch); the button keeps the callable, not a copy, for as long as the visitor's
    page is open.
    """
    st.download_button(
        "Download every head as CSV",
        data=lambda: every_head_csv(weights(), labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",
    )


def download_matrix(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    filename: str,
    label: str = "Download as CSV",
    key: str | None = None,
) -> None:
    """A download button for a matrix as CSV (built lazily, only when clicked)."""
    # The button's callable lives as long as the visitor's page. A slice of a Trace array is a
    # view that keeps the whole (L, H, n, n) block alive (~75 MB at 512 tokens) after the Trace
    # cache has let it go; one copied (n, n) matrix is ~1 MB.
    own_copy = np.array(matrix, copy=True)
    st.download_button(
        label,
        data=lambda: matrix_csv(own_copy, row_labels, col_labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",  # downloading must not rerun the page
    )


def whole_number_input(
    label: str, min_value: int, max_value: int, value: int, key: str, **kwargs: object
) -> int:
    """A number input for a whole number, bound to the URL, safe against any URL value.

    Streamlit seeds a bound number input from the URL. For a whole-number input it calls int()
    on the parsed value, and a URL value such as 1e309 is infinity there: int() raises
    OverflowError inside Streamlit, which it does not catch, and the page shows an error box.
    A float input is checked for finiteness and range instead, and falls back to the default;
    format "%.0f" shows it as the whole number it is.
    """
    chosen = st.number_input(
        label,
        min_value=float(min_value),
        max_value=float(max_value),
        value=float(value),
        step=1.0,
        format="%.0f",
        key=key,
        bind="query-params",
        **kwargs,
    )
    return min(max(round(chosen), min_value), max_value)


def section_tabs(sections: Mapping[str, Callable[[], None]], key: str) -> None:
    """One tab per section of a long page, and only the open tab drawn.

    A closed tab sends nothing to the browser. Each plotly figure costs a browser ~50-110 ms of
    main-thread work when a page loads and again on every update (its layout and text
    measuring; bench/bench_browser.py), so a lesson of a dozen figures drawn at once was slow on
    a phone. The URL keeps the open tab (bound to `key`), so a link opens the section it was
    copied from; opening another tab reruns the page.
    """
    tabs = st.tabs(list(sections), key=key, on_change="rerun", bind="query-params")
    for tab, draw in zip(tabs, sections.values(), strict=True):
        if tab.open:
            with tab:
                draw()


def folded(label: str, key: str, draw: Callable[[], None]) -> None:
    """An expander whose content is drawn only while it is open.

    A table folded away in a plain expander is still sent and laid out: an st.dataframe costs
    a browser ~140 ms of main-thread work on every load and every update that changes it
    (bench/bench_browser.py), for a detail most visitors never open. Opening this one reruns
    the page (a cached rerun) and draws it.
    """
    box = st.expander(label, key=key, on_change="rerun")
    if box.open:
        with box:
            draw()


def token_picker(label: str, tokens: Sequence[str], default: int, key: str) -> int:
    """A slider over token positions 0 … n−1, bound to the URL, with the chosen token named.

    The URL holds the position, not the token: a select box would be bound by its label
    ("2: bank"), which goes stale as soon as the sentence changes, so a copied link would reopen
    on another token. A position stays meaningful; one past the end falls back to the default.
    """
    last = len(tokens) - 1
    default = min(max(default, 0), last)
    if last < 1:
        return 0
    position = st.slider(label, 0, last, default, key=key, bind="query-params")
    position = min(max(int(position), 0), last)
    st.caption(f"Position {position}: **{literal(tokens[position], max_chars=40)}**")
    return position
