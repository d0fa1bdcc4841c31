"""Figures of the BERT explorer: model-view grid, head view, statistics grid, attention rows.

Pure functions from arrays to plotly figures (no streamlit). Token text is user text: it only
ever reaches plotly as escaped plain text (plotly reads a few HTML-like tags in labels, so "<b>"
typed by a user must stay the three characters "<b>").
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.head_stats import HeadViewLines
from ui.charts import (
    COLORSCALE,
    QUALITATIVE_COLOURS,
    WEIGHT_STEPS,
    annotate_heatmap,
    packed_weights,
    token_ticks,
)
from ui.escape import literal

HEAD_COLOURS = QUALITATIVE_COLOURS
SENTENCE_COLOURS = ("#4C78A8", "#F58518")  # sentence A, sentence B
OPACITY_STEP = 0.05  # head-view lines are batched into shapes of equal opacity, 20 levels
MIN_LINE_WEIGHT = 0.025  # lighter head-view lines are left out as clutter (the page says so)
HEAD_VIEW_ROW_PX = 22
HEAD_VIEW_LEVELS = round(1 / OPACITY_STEP)  # opacity levels, one path shape each per head
NO_LINES = "M0,0"  # the path of a level with no lines: a move, nothing drawn (an empty path
# would make plotly draw a rectangle instead)


def head_colour(head: int) -> str:
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


# ---- model view ------------------------------------------------------------------------------
# ---- statistics ------------------------------------------------------------------------------
def head_stat_grid(
    stat: np.ndarray, sink: np.ndarray, title: str, colorbar_title: str, zmax: float | None = None
) -> go.Figure:
    """(L, H) heatmap of one per-head statistic with its value in each cell; sink heads ringed."""
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
    fig.add_trace(
        go.Scatter(
            x=sink_head + 0.36,  # the top right corner of the cell, clear of its number
            y=sink_layer - 0.3,
            mode="markers",
            marker={"symbol": "circle", "size": 7, "color": "#FF4B4B"},
            # a dot on the last head reaches past the plot's right edge on a phone (~19 px a
            # cell): drawn whole over the margin instead of cut there
            cliponaxis=False,
            name="sink head: ≥ half its weight on [CLS] and [SEP]",
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
    one row per sentence); widgets.HEAD_SWITCH_JS swaps them in when a slider moves.
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


# ---- head view -------------------------------------------------------------------------------
def drawn_opacity(weight: np.ndarray) -> np.ndarray:
    """Opacity of a head-view line: √w, so w = 0.25 is half opaque and w = 0.04 still 0.2.

    Drawing w itself left a token's lines (w ~ 0.05-0.2 each) nearly invisible once a token
    was clicked or the A→B filter was on; the square root keeps the order of the weights and
    lifts the faint ones. A line of weight 0.0025 (opacity 0.05) is the faintest drawn.
    """
    return np.sqrt(np.clip(weight, 0.0, 1.0))


def opacity_buckets(opacity: np.ndarray, step: float = OPACITY_STEP) -> np.ndarray:
    """Each opacity rounded to the nearest multiple of step in [0, 1] (0: not drawn)."""
    return np.clip(np.round(opacity / step) * step, 0.0, 1.0)


def line_path(query: np.ndarray, key: np.ndarray) -> str:
    """One SVG path of k lines (0, query) → (1, key) in the figure's data coordinates.

    A head's lines of one opacity level are one path shape: plotly draws it as one SVG element
    however many lines it holds. As a scatter trace, every line between two gaps was an element
    of its own, styled one by one, and that made a head switch in the browser slow.
    """
    if len(query) == 0:
        return NO_LINES
    return "".join(f"M0,{q}L1,{k}" for q, k in zip(query.tolist(), key.tolist(), strict=True))


def opacity_levels(lines: HeadViewLines) -> np.ndarray:
    """(k,) int: each line's drawn opacity in steps of OPACITY_STEP, 0 (not drawn) to 20."""
    return np.rint(opacity_buckets(drawn_opacity(lines.opacity)) / OPACITY_STEP).astype(int)


def _legend_entry(head: int, visible: bool = True) -> go.Scatter:
    """A head's legend entry, at full strength (its lines may all be faint). A click on it
    hides the head's line shapes too: they share its legendgroup."""
    group = f"head {head}"
    return go.Scatter(
        x=[None],
        y=[None],
        mode="lines",
        line={"color": head_colour(head), "width": 4},
        name=group,
        legendgroup=group,
        visible=visible,
    )


def _line_shapes(
    lines: HeadViewLines, head: int, levels: Sequence[int], visible: bool = True
) -> list[dict]:
    """One path shape per opacity level in `levels`, holding that head's lines of that level
    (an empty level draws nothing), below the token dots."""
    of_head = lines.head == head
    line_levels = opacity_levels(lines)
    shapes = []
    for level in levels:
        chosen = of_head & (line_levels == level)
        shapes.append(
            {
                "type": "path",
                "path": line_path(lines.query[chosen], lines.key[chosen]),
                "xref": "x",
                "yref": "y",
                "layer": "below",
                "opacity": round(level * OPACITY_STEP, 4),
                "line": {"color": head_colour(head), "width": 2.5},
                "legendgroup": f"head {head}",
                "visible": visible,
            }
        )
    return shapes


def _add_token_columns(
    fig: go.Figure,
    window: tuple[int, int],
    tokens: Sequence[str],
    segments: Sequence[int],
    n_heads_drawn: int,
    title: str,
    highlight: int | None,
) -> None:
    """The query and key columns of dots and labels, their headers, and the layout."""
    start, stop = window
    positions = np.arange(start, stop)
    labels = [literal(tokens[i]) for i in positions]
    if highlight is not None and start <= highlight < stop:
        labels[highlight - start] = f"<b>▶ {labels[highlight - start]}</b>"
    colours = [SENTENCE_COLOURS[int(segments[i] > 0)] for i in positions]
    for x, side, role in ((0.0, "middle left", "query"), (1.0, "middle right", "key")):
        fig.add_trace(
            go.Scatter(
                x=np.full(len(positions), x),
                y=positions,
                mode="markers+text",
                text=labels,
                textposition=side,
                marker={"color": colours, "size": 9},
                customdata=labels,
                hovertemplate=role + " %{y}: %{customdata}<extra></extra>",
                # A click selects a token (the page reads it); keep the others undimmed.
                unselected={"marker": {"opacity": 1.0}},
                showlegend=False,
            )
        )
    for x, text in ((0.0, "query (attending)"), (1.0, "key (attended to)")):
        fig.add_annotation(
            x=x, y=start - 0.5, text=text, showarrow=False, yanchor="bottom", font={"size": 13}
        )
    # The legend goes under the lines: at the top right it covered "key (attended to)" on phones.
    legend_rows = -(-n_heads_drawn // 4)
    fig.update_layout(
        title={"text": title},
        height=int(HEAD_VIEW_ROW_PX * (stop - start) + 160 + 22 * legend_rows),
        margin={"l": 10, "r": 10, "t": 50 + 20 * title.count("<br>"), "b": 10 + 22 * legend_rows},
        xaxis={"visible": False, "range": [-0.7, 1.7], "fixedrange": True},
        yaxis={"visible": False, "range": [stop - 0.5, start - 1.6]},  # room for the headers
        legend={"orientation": "h", "x": 0, "yref": "container", "y": 0, "yanchor": "bottom"},
        hovermode="closest",
    )


def head_view_figure(
    lines: HeadViewLines,
    tokens: Sequence[str],
    segments: Sequence[int],
    heads: Sequence[int],
    title: str,
    highlight: int | None = None,
) -> go.Figure:
    """bertviz-style head view: queries left, keys right, one line per (head, query, key).

    Lines of a head share its colour; a line's opacity is drawn_opacity() of its weight; lines
    of equal (rounded) opacity share one path shape, so a figure has at most heads × 20 shapes
    however many lines it draws. Lines whose opacity rounds to 0 are not drawn.
    """
    line_levels = opacity_levels(lines)
    fig = go.Figure([_legend_entry(head) for head in sorted(set(heads))])
    shapes = []
    for head in sorted(set(heads)):
        used = np.unique(line_levels[(lines.head == head) & (line_levels > 0)])
        shapes += _line_shapes(lines, head, used.tolist())
    fig.layout.shapes = shapes  # at once: add_shape validates the whole list on every call
    _add_token_columns(fig, lines.window, tokens, segments, len(set(heads)), title, highlight)
    fig.layout.meta = {"hover_lines": True}  # ui/head_view_hover.js keeps a token's lines
    return fig


def packed_lines(lines: HeadViewLines, head: int) -> str:
    """One head's drawn lines for a figure's store: base64 of bytes (query − start,
    key − start, opacity level 1..20) per line; widgets.HEAD_SWITCH_JS rebuilds the paths.
    A window holds at most 256 tokens, so each number is one byte."""
    start, stop = lines.window
    assert stop - start <= 256, "a window of at most 256 tokens fits one byte per position"
    line_levels = opacity_levels(lines)
    drawn = (lines.head == head) & (line_levels > 0)
    rows = np.column_stack(
        [lines.query[drawn] - start, lines.key[drawn] - start, line_levels[drawn]]
    )
    return base64.b64encode(rows.astype(np.uint8).tobytes()).decode("ascii")


def every_head_view_figure(
    lines_by_layer: Sequence[HeadViewLines],
    n_heads: int,
    tokens: Sequence[str],
    segments: Sequence[int],
    layer: int,
    head: int,
    more: Sequence[int],
    title_of_head: Callable[[int, int], str],
    highlight: int | None = None,
) -> go.Figure:
    """head_view_figure for the sliders' (layer, head) and the heads in `more`, carrying every
    head's lines so widgets.HEAD_SWITCH_JS redraws another layer or head in the browser.

    lines_by_layer[l]: head_view_lines of layer l for all n_heads heads (the page's filters
    applied).
    Each drawn head is a group: a legend entry (a trace) and 20 path shapes, one per opacity
    level, in fixed places: first the Head slider's head, then each head of `more`. When the
    slider's head is also in `more`, its group is hidden and the other draws it. layout.meta
    holds, for head h of layer l at index l·H + h, its lines (packed_lines) and the figure's
    title with that head on the slider (title_of_head(l, h): the code's own markup, no visitor
    text).
    """
    n_layers = len(lines_by_layer)
    levels = list(range(1, HEAD_VIEW_LEVELS + 1))
    lines = lines_by_layer[layer]
    groups = [(head, head not in more), *((extra, True) for extra in more)]
    fig = go.Figure([_legend_entry(drawn, visible) for drawn, visible in groups])
    # shapes[g · 20 + level - 1]: group g's lines of that level
    fig.layout.shapes = [
        shape for drawn, visible in groups for shape in _line_shapes(lines, drawn, levels, visible)
    ]
    _add_token_columns(
        fig,
        lines.window,
        tokens,
        segments,
        len({head, *more}),
        title_of_head(layer, head),
        highlight,
    )
    start, _ = lines.window
    fig.layout.meta = {
        "hover_lines": True,  # ui/head_view_hover.js keeps a pointed token's lines
        "every_head_of": n_heads,
        "shown": layer * n_heads + head,  # the head drawn; HEAD_SWITCH_JS updates it
        "head_view": {
            "more": list(more),
            "levels": HEAD_VIEW_LEVELS,
            "no_lines": NO_LINES,
            "start": start,
            "colours": [head_colour(h) for h in range(n_heads)],
        },
        "heads": [
            {
                "title": title_of_head(store_layer, store_head),
                "lines": packed_lines(lines_by_layer[store_layer], store_head),
            }
            for store_layer in range(n_layers)
            for store_head in range(n_heads)
        ],
    }
    return fig
