"""Figures for page 4, multi-head attention (core/multi_head.py, core/head_roles.py).

Pure functions: arrays in, plotly figures out, no streamlit and no model. Token axes are numeric
with token tick labels (see ui.charts); long inputs are reduced before drawing (block averages,
ui/scaling_masking_charts.py) so a 512-token input never ships hundreds of thousands of cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui import charts, display_policy
from ui.charts import COLORSCALE, matrix_heatmap, token_ticks
from ui.scaling_masking_charts import (
    DEFAULT_COLOUR,
    VARIANT_COLOUR,
    block_average,
    block_labels,
    lean,
    token_axis,
)


def heads_grid(
    attn_weights: np.ndarray, tokens: Sequence[str], layer: int, columns: int = 4
) -> go.Figure:
    """(H, n, n) -> small heatmaps of every head on one colour scale (block-averaged if long)."""
    n_heads = attn_weights.shape[0]
    rows = -(-n_heads // columns)
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[f"H{h}" for h in range(n_heads)],  # "head 10head 11" ran together
        horizontal_spacing=0.03,
        vertical_spacing=0.07,
    )
    step = 1
    for head in range(n_heads):
        reduced, step, _ = block_average(
            attn_weights[head], display_policy.HEADS_GRID_TOKENS
        )  # square: one step
        size = reduced.shape[0]
        fig.add_trace(
            go.Heatmap(
                z=lean(reduced),
                x=np.arange(size),
                y=np.arange(size),
                coloraxis="coloraxis",
                hovertemplate=f"head {head}<br>"
                + "query %{y} → key %{x}<br>weight %{z:.3f}<extra></extra>",
            ),
            row=head // columns + 1,
            col=head % columns + 1,
        )
    labels = block_labels(tokens, step)
    small_ticks = token_ticks(labels, max_labels=12)
    # Keys are in the rows' order, so only the outer left edge is labelled: inside the grid, and
    # under maps a phone draws 60 px wide, labels and tick marks ran into the neighbours.
    fig.update_xaxes(showticklabels=False, ticks="")
    fig.update_yaxes(**small_ticks, autorange="reversed", tickfont={"size": 9})
    for index in range(n_heads):
        if index % columns:
            fig.update_yaxes(
                showticklabels=False, ticks="", row=index // columns + 1, col=index % columns + 1
            )
    # Block means of long rows are small: fit the colour scale instead of a fixed 0..1.
    note = "rows: queries · columns: keys, in the same order"
    if step > 1:
        note += f" · {step}×{step} block means, fitted scale"
    fig.update_layout(
        title={
            "text": f"Layer {layer}: attention weights of all {n_heads} heads<br><sup>{note}</sup>"
        },
        coloraxis={
            "colorscale": COLORSCALE,
            "cmin": 0.0,
            "cmax": 1.0 if step == 1 else None,
            "colorbar": {"title": "α"},
        },
        height=250 * rows + 120,
        margin={"l": 10, "r": 10, "t": 90, "b": 10},
    )
    return fig


def head_block_heatmap(
    matrix: np.ndarray,
    n_heads: int,
    d_head: int,
    title: str,
    row_labels: Sequence[str] | None,
    y_title: str,
    highlight: int | None = None,
    heads_on_rows: bool = False,
    max_rows: int | None = None,
) -> go.Figure:
    """A matrix whose columns (or rows) are H blocks of d_head dims, with the blocks outlined.

    Used for the concatenation (n, H·d_head) and for W_Oᵀ (H·d_head, d_model). With max_rows,
    only the first max_rows token rows are drawn (the title says so).
    """
    if max_rows is not None and matrix.shape[0] > max_rows:
        title += f" (first {max_rows} of {matrix.shape[0]} tokens)"
        matrix = matrix[:max_rows]
        row_labels = list(row_labels or [])[:max_rows]
    n_rows, n_cols = matrix.shape
    limit = float(np.abs(matrix).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=lean(matrix),
            x=np.arange(n_cols),
            y=np.arange(n_rows),
            colorscale="RdBu",
            zmin=-limit,
            zmax=limit,
            zmid=0.0,
            colorbar={"title": {"text": "value"}},
            hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>",
        )
    )
    centres = [h * d_head + (d_head - 1) / 2 for h in range(n_heads)]
    head_ticks = {
        "tickmode": "array",
        "tickvals": centres,
        "ticktext": [f"h{h}" for h in range(n_heads)],
    }
    for h in range(1, n_heads):
        edge = h * d_head - 0.5
        if heads_on_rows:
            fig.add_hline(y=edge, line={"color": "#888888", "width": 1})
        else:
            fig.add_vline(x=edge, line={"color": "#888888", "width": 1})
    if highlight is not None:
        low, high = highlight * d_head - 0.5, (highlight + 1) * d_head - 0.5
        box = {"type": "rect", "line": {"color": "#E45756", "width": 3}}
        if heads_on_rows:
            fig.add_shape(**box, x0=-0.5, x1=n_cols - 0.5, y0=low, y1=high)
        else:
            fig.add_shape(**box, x0=low, x1=high, y0=-0.5, y1=n_rows - 0.5)
    x_axis = (
        {"title": {"text": "model dimension"}}
        if heads_on_rows
        else {**head_ticks, "title": {"text": "dimension, grouped by head (d_head each)"}}
    )
    y_axis = (
        {**head_ticks, "title": {"text": y_title}}
        if heads_on_rows
        else {**token_ticks(row_labels or [], max_labels=32), "title": {"text": y_title}}
    )
    fig.update_layout(
        title={"text": title},
        height=int(min(560, max(300, 14 * n_rows + 140))) if not heads_on_rows else 520,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis=x_axis,
        yaxis={**y_axis, "autorange": "reversed"},
    )
    return fig


def token_matrix_heatmap(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    x_title: str,
    max_rows: int = display_policy.TOKEN_ROWS_UP_TO,
) -> go.Figure:
    """ui.charts.matrix_heatmap of an (n, m) per-token matrix, showing at most max_rows tokens."""
    if matrix.shape[0] > max_rows:
        title += f" (first {max_rows} of {matrix.shape[0]} tokens)"
    return weights_heatmap(matrix[:max_rows], list(tokens)[:max_rows], title, x_title)


def weights_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    title: str,
    x_title: str,
    height: int | None = None,
    y_title: str | None = None,
    max_labels: int = display_policy.WEIGHT_LABELS_UP_TO,
) -> go.Figure:
    """ui.charts.matrix_heatmap (diverging, centred on 0) sent as float32."""
    fig = matrix_heatmap(matrix, row_labels, title, x_title, height=height)
    fig.update_yaxes(**token_ticks(row_labels, max_labels=max_labels))  # dense labels overlap
    if y_title:
        fig.update_yaxes(title_text=y_title)
    return fig.update_traces(z=lean(matrix))


def disagreement_heatmap(
    attn_weights: np.ndarray, share: np.ndarray, tokens: Sequence[str], title: str
) -> go.Figure:
    """(n, n) share − α on a diverging scale: blue where the value-weighted view gives more."""
    difference, step, _ = block_average(
        share - attn_weights, display_policy.HEATMAP_AXIS_UP_TO
    )  # square
    labels = block_labels(tokens, step)
    size = difference.shape[0]
    limit = float(np.abs(difference).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=lean(difference),
            x=np.arange(size),
            y=np.arange(size),
            colorscale="RdBu",  # app-wide: blue = positive, red = negative
            zmin=-limit,
            zmax=limit,
            zmid=0.0,
            colorbar={"title": {"text": "share − α"}},
            hovertemplate="query %{y} → key %{x}<br>share − α %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": title},
        height=int(min(620, max(340, 18 * size + 160))),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis=token_axis(labels, "key (attended to)", tickangle=-60),
        yaxis=token_axis(labels, "query (attending)", autorange="reversed"),
    )
    if step > 1:
        fig.update_xaxes(**token_ticks(labels, max_labels=16))
        fig.update_yaxes(**token_ticks(labels, max_labels=32))
    return fig


def gap_by_head_figure(gap: np.ndarray, chosen: int, layer: int) -> go.Figure:
    """(H,) mean total-variation distance between α and the value-weighted share, per head."""
    colours = [VARIANT_COLOUR if h == chosen else DEFAULT_COLOUR for h in range(len(gap))]
    fig = go.Figure(
        go.Bar(
            x=np.arange(len(gap)),
            y=lean(gap),
            marker_color=colours,
            hovertemplate="head %{x}: %{y:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": f"Layer {layer}: raw α vs value-weighted share, per head"},
        height=300,
        xaxis={"title": {"text": "head"}, "dtick": 1},
        yaxis={"title": {"text": "mean ½Σ|α − share| per query"}, "range": [0, 1]},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


def layer_cosine_heatmap(cosines: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    """(L + 1, n) cosine to the default run of every token after every layer (1 = unchanged)."""
    n_states, n = cosines.shape
    fig = go.Figure(
        go.Heatmap(
            z=lean(cosines),
            x=np.arange(n),
            y=np.arange(n_states),
            colorscale=COLORSCALE,
            zmax=1.0,
            colorbar={"title": {"text": "cosine"}},
            hovertemplate="row %{y}, token %{x}<br>cosine %{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": title},
        height=320,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis=token_axis(tokens, "token", tickangle=-60),
        yaxis={
            "tickmode": "array",
            "tickvals": list(range(n_states)),
            "ticktext": ["embeddings"] + [f"layer {i}" for i in range(n_states - 1)],
            "autorange": "reversed",
            "title": {"text": "vector after"},
        },
    )
    return fig


def role_grid(grid: np.ndarray, best: tuple[int, int], title: str) -> go.Figure:
    """(L, H) mean weight of one role per head, the strongest head framed."""
    n_layers, n_heads = grid.shape
    figure = go.Figure(
        go.Heatmap(
            z=np.round(grid.astype(np.float64), 3),
            x=np.arange(n_heads),
            y=np.arange(n_layers),
            zmin=0.0,
            zmax=1.0,
            colorscale=charts.COLORSCALE,
            colorbar={"title": {"text": "mean α"}},
            hovertemplate="layer %{y}, head %{x}<br>mean weight %{z:.3f}<extra></extra>",
        )
    )
    layer, head = best
    charts.frame_cell(figure, layer, head, charts.HARD)
    return charts.lesson_layout(
        figure,
        title,
        height=300,
        xaxis={"title": {"text": "head"}, "dtick": 1},
        yaxis={"title": {"text": "layer"}, "dtick": 1, "autorange": "reversed"},
    )
