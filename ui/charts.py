"""Arrays -> plotly figures. Pure functions: no streamlit, no model, testable on their data.

Token axes are numeric (0..n-1) with the tokens as tick labels: a categorical axis would merge
the two "the" of a sentence into one row.
"""

from __future__ import annotations

import html
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
    fig = go.Figure(heatmap)
    side = height or int(min(760, max(360, 18 * max(n_q, n_k) + 160)))
    fig.update_layout(
        title={"text": title},
        height=side,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={
            **token_ticks(key_tokens),
            "title": {"text": "key (attended to)"},
            "side": "bottom",
            "tickangle": -60,
        },
        yaxis={
            **token_ticks(query_tokens),
            "title": {"text": "query (attending)"},
            "autorange": "reversed",
        },
    )
    return fig


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
    fig = go.Figure(
        go.Heatmap(
            z=np.round(matrix.astype(np.float64), 4),
            x=np.arange(m),
            y=np.arange(n),
            colorscale=colorscale,
            zmid=0.0 if symmetric else None,
            zmin=-limit if limit else None,
            zmax=limit if limit else None,
            hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": title},
        height=height or int(min(600, max(260, 22 * n + 120))),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={"title": {"text": x_title}},
        yaxis={**token_ticks(row_labels), "autorange": "reversed"},
    )
    return fig
