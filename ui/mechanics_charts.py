"""Figures for the "Scaling and masking" and "Multi-head attention" pages.

Pure functions: arrays in, plotly figures out, no streamlit and no model. Token axes are numeric
with token tick labels (see ui.charts); long inputs are reduced before drawing (block averages)
so a 512-token input never ships hundreds of thousands of cells to the browser.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.head_stats import block_size
from core.scaling import DotProducts
from ui.charts import COLORSCALE, attention_heatmap, matrix_heatmap, token_ticks
from ui.escape import literal

# Two series colours that read on both the light and the dark theme.
DEFAULT_COLOUR = "#4C78A8"  # blue: BERT as trained
VARIANT_COLOUR = "#F58518"  # orange: the switched run
MAX_DRAWN = 128  # a full-size heatmap shows at most this many rows/columns
GRID_MAX = 48  # each small heatmap of the all-heads grid shows at most this many
MINUS_INF_TEXT_UP_TO = 12  # write "−∞" into masked cells only while they stay legible


# ---------------------------------------------------------------------------------------------
# Reducing long inputs
# ---------------------------------------------------------------------------------------------


def lean(values: np.ndarray | Sequence[float]) -> np.ndarray:
    """float32 copy of the values: plotly ships arrays as binary, so 4 bytes per number, not 8."""
    return np.asarray(values, dtype=np.float32)


def block_average(matrix: np.ndarray, max_size: int) -> tuple[np.ndarray, int, int]:
    """(n_q, n_k) -> (⌈n_q/r⌉, ⌈n_k/c⌉) means of r×c blocks, each axis cut to ≤ max_size.

    Returns (reduced, r, c); r = c = 1 leaves the matrix as it is. The axes are reduced
    separately, so a long sentence against a short one keeps every token of the short one.
    """
    n_q, n_k = matrix.shape
    row_step, col_step = block_size(n_q, max_size), block_size(n_k, max_size)
    if row_step == col_step == 1:
        return np.asarray(matrix, dtype=np.float64), 1, 1
    rows, cols = -(-n_q // row_step), -(-n_k // col_step)
    padded = np.full((rows * row_step, cols * col_step), np.nan)  # nanmean skips the padding
    padded[:n_q, :n_k] = matrix
    blocks = padded.reshape(rows, row_step, cols, col_step)  # (rows, r, cols, c)
    return np.nanmean(blocks, axis=(1, 3)), row_step, col_step


def block_labels(tokens: Sequence[str], step: int) -> list[str]:
    """Tick labels for block-averaged axes: the first token of each block, or every token."""
    if step == 1:
        return list(tokens)
    return [f"{i}:{tokens[i]}…" for i in range(0, len(tokens), step)]


def _token_axis(tokens: Sequence[str], title: str, **extra: object) -> dict:
    return {**token_ticks(tokens), "title": {"text": title}, **extra}


def reduced_heatmap(
    attn_weights: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    title: str,
    max_size: int = MAX_DRAWN,
    zmax: float | None = 1.0,
    colorbar_title: str = "weight",
) -> go.Figure:
    """ui.charts.attention_heatmap after block-averaging inputs longer than max_size tokens."""
    reduced, row_step, col_step = block_average(attn_weights, max_size)
    reduced_any = row_step > 1 or col_step > 1
    if reduced_any:
        # Block means of long rows are small: a fixed 0..1 scale would paint them all dark.
        title += f" ({row_step}×{col_step} block means, fitted scale)"
        zmax = None
    query_labels = block_labels(query_tokens, row_step)
    key_labels = block_labels(key_tokens, col_step)
    fig = attention_heatmap(
        reduced,
        query_labels,
        key_labels,
        title=title,
        zmax=zmax,
        colorbar_title=colorbar_title,
    )
    fig.update_traces(z=lean(reduced))  # attention_heatmap sends float64; half is plenty
    if reduced_any:
        # Per-cell token hover text would double the figure's size; blocks hover by position.
        fig.update_traces(
            customdata=None,
            hovertemplate=f"block (%{{y}}, %{{x}}) of {row_step}×{col_step} token pairs<br>"
            f"mean {colorbar_title} %{{z:.4f}}<extra></extra>",
        )
        fig.update_xaxes(**token_ticks(key_labels, max_labels=12))
        fig.update_yaxes(**token_ticks(query_labels, max_labels=32))
    return fig


# ---------------------------------------------------------------------------------------------
# Page 3 · softmax saturation and √d_k
# ---------------------------------------------------------------------------------------------


def saturation_figure(
    scores: np.ndarray,
    base_weights: np.ndarray,
    sharp_weights: np.ndarray,
    multiplier: float,
    labels: Sequence[str],
) -> go.Figure:
    """Left: the score vector s (n,); right: softmax(s) and softmax(c·s) as grouped bars."""
    positions = np.arange(len(scores))
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("scores s", "weights softmax(c · s)"),
        horizontal_spacing=0.1,
    )
    fig.add_trace(go.Bar(x=positions, y=lean(scores), name="score s", marker_color="#888888"), 1, 1)
    fig.add_trace(
        go.Bar(x=positions, y=lean(base_weights), name="×1", marker_color=DEFAULT_COLOUR),
        1,
        2,
    )
    fig.add_trace(
        go.Bar(
            x=positions,
            y=lean(sharp_weights),
            name=f"×{multiplier:g}",
            marker_color=VARIANT_COLOUR,
        ),
        1,
        2,
    )
    ticks = token_ticks(labels)
    fig.update_xaxes(**ticks, tickangle=-45, title_text="key")
    fig.update_yaxes(title_text="score", row=1, col=1)
    # No axis title on the right: its subplot title names it, and on a phone the title would sit
    # on the left subplot's bars.
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_layout(
        title={"text": "Multiplying the scores sharpens the weights"},
        barmode="group",
        height=380,
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        legend={"orientation": "h", "y": -0.35},
    )
    return fig


def saturation_curve_figure(
    multipliers: np.ndarray, weights: np.ndarray, entropy_bits: np.ndarray, chosen: float
) -> go.Figure:
    """(m,) multipliers, (m, n) weights, (m,) entropy: largest weight and entropy against c."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(
            x=multipliers,
            y=lean(weights.max(axis=1)),
            name="largest weight",
            line={"color": VARIANT_COLOUR},
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=multipliers,
            y=lean(entropy_bits),
            name="entropy (bits)",
            line={"color": DEFAULT_COLOUR, "dash": "dash"},
        ),
        secondary_y=True,
    )
    fig.add_vline(x=chosen, line={"color": "#888888", "dash": "dot"})
    fig.update_xaxes(type="log", title_text="multiplier c (log scale)")
    fig.update_yaxes(title_text="largest weight", range=[0, 1.05], secondary_y=False)
    fig.update_yaxes(title_text="entropy (bits)", rangemode="tozero", secondary_y=True)
    fig.update_layout(
        title={"text": "As c grows: largest weight → 1, entropy → 0"},
        height=340,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.3},
    )
    return fig


def _density(values: np.ndarray, bins: int = 50) -> tuple[np.ndarray, np.ndarray, float]:
    """Histogram as (bin centres, densities, bin width): 50 bars instead of thousands of samples."""
    density, edges = np.histogram(values.ravel(), bins=bins, density=True)
    return (edges[:-1] + edges[1:]) / 2, density, float(edges[1] - edges[0])


def dot_product_histograms(experiments: Sequence[DotProducts]) -> go.Figure:
    """Histograms of q·k (left) and q·k/√d_k (right) for random vectors, one colour per d_k."""
    raw = {e.d_k: e.raw for e in experiments}
    scaled = {e.d_k: e.scaled for e in experiments}
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("raw q·k", "scaled q·k / √d_k"),
        horizontal_spacing=0.08,
    )
    palette = ["#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756"]
    for index, d_k in enumerate(sorted(raw)):
        colour = palette[index % len(palette)]
        for col, values in ((1, raw[d_k]), (2, scaled[d_k])):
            centres, density, width = _density(values)
            fig.add_trace(
                go.Bar(
                    x=lean(centres),
                    y=lean(density),
                    width=width,
                    name=f"d_k = {d_k}",
                    legendgroup=str(d_k),
                    showlegend=col == 1,
                    marker_color=colour,
                    opacity=0.55,
                    hovertemplate=f"d_k = {d_k}<br>"
                    + "value %{x:.2f}<br>density %{y:.3f}<extra></extra>",
                ),
                1,
                col,
            )
    fig.update_xaxes(title_text="dot product")
    fig.update_yaxes(title_text="density", row=1, col=1)
    fig.update_layout(
        title={"text": "q·k spreads with d_k; q·k / √d_k does not"},
        barmode="overlay",
        height=380,
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def entropy_by_width_figure(experiments: Sequence[DotProducts]) -> go.Figure:
    """Mean softmax-row entropy per d_k, unscaled vs scaled, against the uniform maximum."""
    labels = [f"d_k = {e.d_k}" for e in experiments]
    raw_entropy = [e.raw_entropy for e in experiments]
    scaled_entropy = [e.scaled_entropy for e in experiments]
    n_keys = experiments[0].raw.shape[1]
    fig = go.Figure(
        [
            go.Bar(
                x=labels,
                y=lean(raw_entropy),
                name="softmax(q·k)",
                marker_color=VARIANT_COLOUR,
            ),
            go.Bar(
                x=labels,
                y=lean(scaled_entropy),
                name="softmax(q·k / √d_k)",
                marker_color=DEFAULT_COLOUR,
            ),
        ]
    )
    fig.add_hline(
        y=float(np.log2(n_keys)),
        line={"color": "#888888", "dash": "dot"},
        annotation_text=f"uniform over {n_keys} keys = {np.log2(n_keys):.0f} bits",
    )
    fig.update_layout(
        title={"text": "Softmax row entropy, mean over queries"},
        barmode="group",
        height=340,
        yaxis={"title": {"text": "entropy (bits)"}, "rangemode": "tozero"},
        xaxis={"title": {"text": "width of query and key vectors"}},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.3},
    )
    return fig


# ---------------------------------------------------------------------------------------------
# Page 3 · two runs side by side, the causal mask
# ---------------------------------------------------------------------------------------------


def per_token_bars(
    tokens: Sequence[str],
    series: dict[str, np.ndarray],
    title: str,
    y_title: str,
    y_range: Sequence[float] | None = None,
) -> go.Figure:
    """Grouped bars, one group per token (numeric x with token ticks), one bar per series."""
    positions = np.arange(len(tokens))
    colours = [DEFAULT_COLOUR, VARIANT_COLOUR, "#54A24B"]
    fig = go.Figure(
        [
            go.Bar(
                x=positions,
                y=lean(values),
                name=name,
                marker_color=colours[index % len(colours)],
                customdata=np.asarray(
                    [literal(t) for t in tokens], dtype=object
                ),  # hover: HTML-ish
                hovertemplate="%{x}: <b>%{customdata}</b><br>%{y:.3f}<extra>" + name + "</extra>",
            )
            for index, (name, values) in enumerate(series.items())
        ]
    )
    fig.update_layout(
        title={"text": title},
        barmode="group",
        height=340,
        xaxis=_token_axis(tokens, "token", tickangle=-60),
        yaxis={"title": {"text": y_title}, **({"range": list(y_range)} if y_range else {})},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": 1.12, "x": 1, "xanchor": "right"},
        showlegend=len(series) > 1,
    )
    return fig


def masked_scores_heatmap(
    masked_scores: np.ndarray, tokens: Sequence[str], title: str
) -> go.Figure:
    """(n, n) scores with −inf where masked: masked cells are left blank (and written "−∞").

    JSON has no −∞, so masked cells are sent as NaN (null), which plotly leaves empty.
    """
    n = masked_scores.shape[0]
    is_masked = np.isneginf(masked_scores)
    values = lean(np.where(is_masked, np.nan, masked_scores))
    show_text = n <= MINUS_INF_TEXT_UP_TO
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=np.arange(n),
            y=np.arange(n),
            colorscale="RdBu",
            zmid=0.0,
            colorbar={"title": {"text": "score"}},
            text=np.where(is_masked, "−∞", "") if show_text else None,
            texttemplate="%{text}" if show_text else None,
            textfont={"color": "#888888"},  # grey reads on the light and the dark background
            hovertemplate="query %{y} → key %{x}<br>score %{z:.3f}<extra></extra>",
            hoverongaps=False,
        )
    )
    fig.update_layout(
        title={"text": title},
        height=int(min(620, max(340, 20 * n + 160))),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis=_token_axis(tokens, "key (attended to)", tickangle=-60),
        yaxis=_token_axis(tokens, "query (attending)", autorange="reversed"),
    )
    return fig


def causal_mask_figures(
    masked_scores: np.ndarray, attn_weights: np.ndarray, tokens: Sequence[str]
) -> tuple[go.Figure, go.Figure]:
    """(k, k) masked scores and their softmax, for the first k tokens -> two heatmaps."""
    shown = list(tokens)[: masked_scores.shape[0]]
    return (
        masked_scores_heatmap(masked_scores, shown, "Masked scores"),
        attention_heatmap(attn_weights, shown, shown, "Weights after softmax"),
    )


# ---------------------------------------------------------------------------------------------
# Page 4 · all heads, concatenation, W_O, value-weighted view, ablation
# ---------------------------------------------------------------------------------------------


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
        reduced, step, _ = block_average(attn_weights[head], GRID_MAX)  # square: one step
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
    max_rows: int = 64,
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
    max_labels: int = 32,
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
    difference, step, _ = block_average(share - attn_weights, MAX_DRAWN)  # square
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
        xaxis=_token_axis(labels, "key (attended to)", tickangle=-60),
        yaxis=_token_axis(labels, "query (attending)", autorange="reversed"),
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
        xaxis=_token_axis(tokens, "token", tickangle=-60),
        yaxis={
            "tickmode": "array",
            "tickvals": list(range(n_states)),
            "ticktext": ["embeddings"] + [f"layer {i}" for i in range(n_states - 1)],
            "autorange": "reversed",
            "title": {"text": "vector after"},
        },
    )
    return fig
