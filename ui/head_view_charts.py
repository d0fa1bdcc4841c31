"""Figures for page 7, the head view: bertviz-style lines from every query to every key.

Pure functions from arrays to plotly figures (no streamlit). Token text is user text: it only
ever reaches plotly as escaped plain text (plotly reads a few HTML-like tags in labels, so "<b>"
typed by a user must stay the three characters "<b>").
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

from core.head_stats import HeadViewLines
from ui.charts import (
    QUALITATIVE_COLOURS,
)
from ui.embeddings_charts import SENTENCE_COLOURS
from ui.escape import literal

HEAD_COLOURS = QUALITATIVE_COLOURS
OPACITY_STEP = 0.05  # head-view lines are batched into shapes of equal opacity, 20 levels
MIN_LINE_WEIGHT = 0.025  # lighter head-view lines are left out as clutter (the page says so)
HEAD_VIEW_ROW_PX = 22
HEAD_VIEW_LEVELS = round(1 / OPACITY_STEP)  # opacity levels, one path shape each per head
NO_LINES = "M0,0"  # the path of a level with no lines: a move, nothing drawn (an empty path
# would make plotly draw a rectangle instead)


def head_colour(head: int) -> str:
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


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
    key − start, opacity level 1..20) per line; display.HEAD_SWITCH_JS rebuilds the paths.
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
    head's lines so display.HEAD_SWITCH_JS redraws another layer or head in the browser.

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
