"""Arrays -> plotly figures. Pure functions: no streamlit, no model, testable on their data.

Token axes are numeric (0..n-1) with the tokens as tick labels: a categorical axis would merge
the two "the" of a sentence into one row.
"""

from __future__ import annotations

import html
import math
import unicodedata
from collections.abc import Sequence

import numpy as np
import pandas  # noqa: F401  imported up front, see below
import plotly.graph_objects as go

# plotly checks sys.modules for pandas while building a figure. On a cold server two sessions may
# render at once, and plotly then finds a half-imported pandas ("partially initialized module");
# importing it here, before any figure is built, closes that race.

MAX_TICK_LABELS = 64  # beyond this, every k-th token is labelled so labels stay legible
HOVER_TOKENS_UP_TO = 160  # per-cell hover text costs n² strings; long inputs hover by index
COLORSCALE = "Viridis"  # perceptually even and readable on light and dark backgrounds
# Mid-tone categorical colours (heads, sentences) that stay readable on white and on dark.
QUALITATIVE_COLOURS = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880",
    "#FF97FF", "#FECB52", "#2CA02C", "#8C564B", "#BCBD22", "#7F7F7F", "#D62728", "#1F77B4",
)  # fmt: skip


def token_ticks(tokens: Sequence[str], max_labels: int = MAX_TICK_LABELS) -> dict:
    """Axis settings that label positions 0..n-1 with their tokens (thinned for long inputs)."""
    n = len(tokens)
    step = max(1, int(np.ceil(n / max_labels)))
    positions = list(range(0, n, step))
    return {
        "tickmode": "array",
        "tickvals": positions,
        # plotly reads labels as a small HTML dialect: escape so a token is always shown as text
        "ticktext": [html.escape(tokens[i]) for i in positions],
    }


# Widths in px of one character in a 12 px tick label (Streamlit's Source Sans), rounded up so
# the estimate below errs on the wide side. Measured in chromium: "i" 3, "e" 5.5, "[" 4.5,
# "#" 7, "m" 10; a CJK character needs a full em.
_NARROW_CHARS = frozenset("ijlrtfI.,:;'|!()[]{} ")
_WIDE_CHARS = frozenset("mwMW@%")


def _char_px(char: str) -> float:
    if unicodedata.east_asian_width(char) in "WF":
        return 12.5
    if char in _NARROW_CHARS:
        return 4.5
    if char in _WIDE_CHARS:
        return 10.5
    return 7.5 if char.isupper() or char.isdigit() or char == "#" else 6.5


def label_margin(labels: Sequence[str], angle: float = 0.0, title: bool = True) -> int:
    """Margin in px that fits an axis's tick labels (rotated by `angle` degrees) and its title.

    Plotly's automargin draws a figure once, measures every tick label, and when the labels do
    not fit the margin it widens the margin and draws the whole figure a second time. Starting
    with margins that already fit skips that second draw: a new 32-token heatmap appears in
    ~60 ms less browser time (bench/bench_speed.py). automargin stays on, so a label wider than
    this estimate still shows in full, at the old cost.
    """
    widest = max((sum(_char_px(c) for c in label) for label in labels), default=0.0)
    slope = math.radians(abs(angle))
    # Upright labels need their width; rotated ones their width and 12 px height, projected.
    extent = widest * math.sin(slope) + 12 * math.cos(slope) if angle else widest
    # Measured in chromium: ticks and gap take ~12 px; a 14 px axis title with its standoff ~50.
    return math.ceil(extent + 14 + (50 if title else 0))


def _hover_text(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    """(n_rows, n_cols, 2) customdata: the query token and the key token of every cell."""
    grid = np.empty((len(rows), len(cols), 2), dtype=object)
    grid[:, :, 0] = np.asarray([html.escape(t) for t in rows], dtype=object)[:, None]
    grid[:, :, 1] = np.asarray([html.escape(t) for t in cols], dtype=object)[None, :]
    return grid


def attention_heatmap(
    attn_weights: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    title: str,
    zmax: float | None = 1.0,
    colorbar_title: str = "weight",
    height: int | None = None,
) -> go.Figure:
    """Heatmap of an (n_q, n_k) matrix; rows are queries (top to bottom), columns are keys."""
    n_q, n_k = attn_weights.shape
    values = np.round(attn_weights.astype(np.float64), 4)  # 4 decimals: same picture, lighter JSON
    hover_ok = max(n_q, n_k) <= HOVER_TOKENS_UP_TO
    heatmap = go.Heatmap(
        z=values,
        x=np.arange(n_k),
        y=np.arange(n_q),
        zmin=0.0 if zmax is not None else None,
        zmax=zmax,
        colorscale=COLORSCALE,
        colorbar={"title": {"text": colorbar_title}},
        customdata=_hover_text(query_tokens, key_tokens) if hover_ok else None,
        hovertemplate=(
            "query %{y}: <b>%{customdata[0]}</b><br>key %{x}: <b>%{customdata[1]}</b>"
            "<br>" + colorbar_title + " %{z:.3f}<extra></extra>"
            if hover_ok
            else "query %{y} → key %{x}<br>" + colorbar_title + " %{z:.3f}<extra></extra>"
        ),
    )
    side = height or int(min(760, max(360, 18 * max(n_q, n_k) + 160)))
    x_ticks, y_ticks = token_ticks(key_tokens), token_ticks(query_tokens)
    # The layout goes in as one dict: plotly validates it in one pass (update_layout() after
    # the fact parses every key path again and took 3x longer).
    layout = {
        "title": {"text": title},
        "height": side,
        "margin": {
            "l": label_margin([query_tokens[i] for i in y_ticks["tickvals"]]),
            "r": 10,
            "t": 50,
            "b": label_margin([key_tokens[i] for i in x_ticks["tickvals"]], angle=-60),
        },
        "xaxis": {
            **x_ticks,
            "title": {"text": "key (attended to)"},
            "side": "bottom",
            "tickangle": -60,
        },
        "yaxis": {**y_ticks, "title": {"text": "query (attending)"}, "autorange": "reversed"},
    }
    return go.Figure(data=[heatmap], layout=layout)


def matrix_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    title: str,
    x_title: str,
    colorscale: str = "RdBu",
    symmetric: bool = True,
    height: int | None = None,
) -> go.Figure:
    """Heatmap of any (n, m) matrix whose rows are tokens and columns are dimensions or values."""
    n, m = matrix.shape
    limit = float(np.nanmax(np.abs(matrix))) if symmetric and matrix.size else None
    heatmap = go.Heatmap(
        z=np.round(matrix.astype(np.float64), 4),
        x=np.arange(m),
        y=np.arange(n),
        colorscale=colorscale,
        zmid=0.0 if symmetric else None,
        zmin=-limit if limit else None,
        zmax=limit if limit else None,
        hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>",
    )
    y_ticks = token_ticks(row_labels)
    layout = {
        "title": {"text": title},
        "height": height or int(min(600, max(260, 22 * n + 120))),
        "margin": {
            "l": label_margin([row_labels[i] for i in y_ticks["tickvals"]], title=False),
            "r": 10,
            "t": 50,
            "b": 50,  # the numbers 0..m-1 and the axis title
        },
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {**y_ticks, "autorange": "reversed"},
    }
    return go.Figure(data=[heatmap], layout=layout)
