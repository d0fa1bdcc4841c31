"""Figures for page 6, attention heatmaps: the per-head statistics grid and two sentences' rows.

Pure functions from arrays to plotly figures (no streamlit). Token text is user text: it only
ever reaches plotly as escaped plain text (plotly reads a few HTML-like tags in labels, so <b>
typed by a user must stay the three characters <b>). The heatmaps themselves are HTML
(ui/html_heatmap.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.charts import (
    COLORSCALE,
    QUALITATIVE_COLOURS,
    annotate_heatmap,
    lesson_layout,
    packed_weights,
    token_ticks,
)
from ui.display_policy import LAYER_TICKS_UP_TO, WEIGHT_STEPS
from ui.escape import literal

SENTENCE_COLOURS = ("#4C78A8", "#F58518")  # sentence A, sentence B


# ---- model view ------------------------------------------------------------------------------
# ---- statistics ------------------------------------------------------------------------------
def head_stat_grid(
    stat: np.ndarray,
    sink: np.ndarray,
    title: str,
    colorbar_title: str,
    zmax: float | None = None,
    sink_on: str | None = "[CLS] and [SEP]",
) -> go.Figure:
    """(L, H) heatmap of one per-head statistic with its value in each cell; sink heads ringed
    (sink_on: the special pieces they park on, escaped; None for a tokenizer that adds none,
    so no ring and no legend about special pieces)."""
    n_layers, n_heads = stat.shape
    values = np.round(stat.astype(np.float64), 3)
    heatmap = go.Heatmap(
        z=values,
        x=np.arange(n_heads),
        y=np.arange(n_layers),
        zmin=0.0,
        zmax=zmax,
        colorscale=COLORSCALE,
        colorbar={"title": {"text": colorbar_title}, "thickness": 14},
        hovertemplate="layer %{y}, head %{x}<br>" + colorbar_title + " %{z:.3f}<extra></extra>",
    )
    fig = go.Figure(heatmap)
    # 12 numbers share a phone's width (~19 px a cell): ".62" or "2.4" at 10 px fit where "0.62"
    # at 11 px, or an entropy's "2.37", ran into their neighbours.
    annotate_heatmap(fig, decimals=2, size=10, compact=True, max_chars=3)
    sink_layer, sink_head = np.nonzero(sink)
    if sink_on is not None:
        fig.add_trace(
            go.Scatter(
                x=sink_head + 0.36,  # the top right corner of the cell, clear of its number
                y=sink_layer - 0.3,
                mode="markers",
                marker={"symbol": "circle", "size": 7, "color": "#FF4B4B"},
                # a dot on the last head reaches past the plot's right edge on a phone (~19 px a
                # cell): drawn whole over the margin instead of cut there
                cliponaxis=False,
                name=f"sink head: ≥ half its weight on {sink_on}",
                showlegend=True,  # plotly hides a lone legend entry; this one explains the dots
                hoverinfo="skip",
            )
        )
    fig.update_layout(
        title={"text": title},
        height=int(min(900, 48 * n_layers + 170)),
        margin={"l": 10, "r": 10, "t": 50, "b": 75},  # ticks, axis title, then the legend
        xaxis={
            "title": {"text": "head"},
            "dtick": 1,
            "range": [-0.5, n_heads - 0.5],
            "showgrid": False,
        },
        yaxis={
            "title": {"text": "layer"},
            "dtick": 1,
            "range": [n_layers - 0.5, -0.5],
            "showgrid": False,
        },
        showlegend=True,
        legend={"orientation": "h", "x": 0, "yref": "container", "y": 0, "yanchor": "bottom"},
    )
    return fig


# ---- one word in two sentences ---------------------------------------------------------------
def compare_rows_figure(
    rows: Sequence[np.ndarray],
    tokens: Sequence[Sequence[str]],
    focus: Sequence[int],
    titles: Sequence[str],
    title: str,
) -> go.Figure:
    """Side by side, one query's weights (n_s,) in each sentence s; a shared weight axis.

    The bar of the query itself is drawn in the second colour so the word is easy to find.
    Titles are plain text (escaped here): they may quote the user's words.
    """
    fig = make_subplots(
        rows=1, cols=len(rows), shared_yaxes=True, subplot_titles=[literal(t) for t in titles]
    )
    for col, (row, toks, own) in enumerate(zip(rows, tokens, focus, strict=True), start=1):
        labels = [literal(t) for t in toks]
        colours = [SENTENCE_COLOURS[int(i == own)] for i in range(len(toks))]
        fig.add_trace(
            go.Bar(
                x=np.arange(len(toks)),
                y=np.round(np.asarray(row, dtype=np.float64), 4),
                marker={"color": colours},
                customdata=labels,
                hovertemplate="key %{x}: <b>%{customdata}</b><br>weight %{y:.3f}<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(
            **token_ticks(toks),  # escapes the tokens itself
            tickangle=-90,  # at −60 long pieces ran into their neighbours on a phone
            title={"text": "key (attended to)"},
            col=col,
        )
    fig.update_yaxes(title={"text": "weight"}, col=1)
    fig.update_layout(
        title={"text": literal(title)},
        height=380,
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
        bargap=0.15,
    )
    return fig


def every_head_compare_rows(
    rows: Sequence[np.ndarray],
    tokens: Sequence[Sequence[str]],
    focus: Sequence[int],
    titles: Sequence[str],
    title_of_head: Callable[[int, int], str],
    layer: int,
    head: int,
) -> go.Figure:
    """compare_rows_figure for (layer, head), carrying every head's rows to switch in the browser.

    rows: one (L, H, n_s) array per sentence s, the query's weights in every head. layout.meta
    holds, for head h of layer l at index l·H + h, its title and its bars (charts.packed_weights,
    one row per sentence); display.HEAD_SWITCH_JS swaps them in when a slider moves.
    title_of_head(l, h): the figure's title for that head (escaped here, like every title).
    """
    n_layers, n_heads = rows[0].shape[:2]
    fig = compare_rows_figure(
        [r[layer, head] for r in rows], tokens, focus, titles, title_of_head(layer, head)
    )
    for bars in fig.data:
        bars.meta = layer * n_heads + head
    fig.layout.meta = {
        "hover_lines": True,  # ui/head_view_hover.js keeps a pointed token's lines
        "every_head_of": n_heads,
        "steps": WEIGHT_STEPS,
        "bar_lengths": [r.shape[-1] for r in rows],
        "heads": [
            {
                "title": literal(title_of_head(store_layer, store_head)),
                "bars": [packed_weights(r[store_layer, store_head]) for r in rows],
            }
            for store_layer in range(n_layers)
            for store_head in range(n_heads)
        ],
    }
    return fig


def per_layer_lines(series: Mapping[str, np.ndarray], title: str, y_title: str) -> go.Figure:
    """One line per series over the layers 0 … L-1: a deep model's share on each sink, where
    HTML bars (two a layer) would stretch past the screen."""
    figure = go.Figure()
    colours = QUALITATIVE_COLOURS
    for k, (name, values) in enumerate(series.items()):
        values = np.asarray(values, dtype=np.float64)  # (L,)
        figure.add_scatter(
            x=np.arange(len(values)),
            y=np.round(values, 3),
            name=literal(name),
            mode="lines+markers",
            line={"color": colours[k % len(colours)]},
        )
    return lesson_layout(
        figure,
        title,
        # every layer numbered while the numbers fit a phone's axis; plotly picks them past that
        xaxis={
            "title": {"text": "layer"},
            "dtick": 1 if len(values) <= LAYER_TICKS_UP_TO else None,
        },
        yaxis={"title": {"text": y_title}, "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
    )
