"""Figures for page 3, scaling and masking, and the reduced heatmaps page 4 also draws.

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
from core.scaling_masking import DotProducts
from ui import html_heatmap
from ui.charts import attention_heatmap, token_ticks
from ui.display_policy import HEATMAP_AXIS_UP_TO, NUMBERS_UP_TO
from ui.escape import literal

# Two series colours that read on both the light and the dark theme.
DEFAULT_COLOUR = "#4C78A8"  # blue: BERT as trained
VARIANT_COLOUR = "#F58518"  # orange: the switched run
SCORE_COLOUR = "#888888"  # grey: scores, before any softmax
SERIES_COLOURS = (DEFAULT_COLOUR, VARIANT_COLOUR, "#54A24B")  # per_token_bars', in order


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


def token_axis(tokens: Sequence[str], title: str, **extra: object) -> dict:
    return {**token_ticks(tokens), "title": {"text": title}, **extra}


def reduced_heatmap(
    attn_weights: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    title: str,
    max_size: int = HEATMAP_AXIS_UP_TO,
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
    """Left: the score vector s (n,); right: softmax(s) and softmax(c·s) as grouped bars, the
    keys largest score first, as the HTML form. Plotly, for more keys than saturation_bars draws
    as HTML."""
    order = largest_first(scores)
    scores, base_weights, sharp_weights = (
        np.asarray(values)[order] for values in (scores, base_weights, sharp_weights)
    )
    labels = [labels[k] for k in order]
    positions = np.arange(len(scores))
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("scores s, largest first", "weights softmax(c · s)"),
        horizontal_spacing=0.1,
    )
    fig.add_trace(
        go.Bar(x=positions, y=lean(scores), name="score s", marker_color=SCORE_COLOUR), 1, 1
    )
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


def largest_first(values: np.ndarray) -> np.ndarray:
    """(n,) -> (n,) the keys' indices, the largest value first (ties keep their order): the bars
    open on the key the page's takeaway is about, on the first screen."""
    return np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")


def saturation_score_bars(scores: np.ndarray, labels: Sequence[str]) -> html_heatmap.HtmlFigure:
    """saturation_figure's left panel as HTML, for a few keys: the (n,) scores s as bars from a
    zero line (scores may be negative). labels: visitor text (word pieces), escaped by bar_rows."""
    order = largest_first(scores)
    return html_heatmap.bar_rows(
        [labels[k] for k in order],
        {"score s": np.asarray(scores)[order]},
        "scores s, largest first",
        "score",
        [SCORE_COLOUR],
        name="sm_saturation_scores",
        signed=True,
    )


def saturation_weight_bars(
    base_weights: np.ndarray, sharp_weights: np.ndarray, multiplier: float, labels: Sequence[str]
) -> html_heatmap.HtmlFigure:
    """saturation_figure's right panel as HTML: softmax(s) and softmax(c·s), (n,) each, per key,
    in saturation_score_bars' order (softmax keeps the scores' order, so it is the weights')."""
    order = largest_first(base_weights)
    return html_heatmap.bar_rows(
        [labels[k] for k in order],
        {
            "×1": np.asarray(base_weights)[order],
            f"×{multiplier:g}": np.asarray(sharp_weights)[order],
        },
        "Multiplying the scores sharpens the weights: softmax(c · s)",
        "weight",
        [DEFAULT_COLOUR, VARIANT_COLOUR],
        name="sm_saturation",
    )


def _multiplier_rows(multipliers: Sequence[float], chosen: float) -> tuple[list[str], int | None]:
    """A row label per multiplier c, the chosen one pointed at, and the chosen row's index."""
    labels = [f"c = {c:g} ◀" if c == chosen else f"c = {c:g}" for c in multipliers]
    return labels, next((k for k, c in enumerate(multipliers) if c == chosen), None)


# The curve over c as two tables of bars, a row per c the slider offers (8, about evenly spaced
# on a log scale): the numbers the plotly curve only showed on hover, and no plotly.js.


def largest_weight_bars(
    multipliers: Sequence[float], weights: np.ndarray, chosen: float
) -> html_heatmap.HtmlFigure:
    """(m,) multipliers, (m, n) weights softmax(c·s) -> the largest weight per c (a full bar
    is 1), the chosen c's row in bold."""
    labels, marked = _multiplier_rows(multipliers, chosen)
    return html_heatmap.bar_rows(
        labels,
        {"largest weight": weights.max(axis=1)},
        "As c grows, the largest weight → 1",
        "largest weight",
        [VARIANT_COLOUR],
        name="sm_saturation_curve",
        highlight=marked,
        highlight_colour=VARIANT_COLOUR,
        largest=1.0,
    )


def entropy_bars(
    multipliers: Sequence[float], entropy_bits: np.ndarray, n_keys: int, chosen: float
) -> html_heatmap.HtmlFigure:
    """(m,) multipliers, (m,) entropy of softmax(c·s) over n_keys keys -> a bar per c (a full
    bar is log2 n_keys bits, a uniform row's), the chosen c's row in bold."""
    labels, marked = _multiplier_rows(multipliers, chosen)
    uniform_bits = float(np.log2(n_keys))
    return html_heatmap.bar_rows(
        labels,
        {"entropy (bits)": entropy_bits},
        "… and the entropy → 0",
        f"entropy in bits, {uniform_bits:.2f} for a uniform row over {n_keys} keys",
        [DEFAULT_COLOUR],
        name="sm_saturation_entropy",
        highlight=marked,
        highlight_colour=DEFAULT_COLOUR,
        largest=uniform_bits if n_keys > 1 else 1.0,
    )


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
    colours = SERIES_COLOURS
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
        xaxis=token_axis(tokens, "token", tickangle=-60),
        yaxis={"title": {"text": y_title}, **({"range": list(y_range)} if y_range else {})},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": 1.12, "x": 1, "xanchor": "right"},
        showlegend=len(series) > 1,
    )
    return fig


def per_token_html_bars(
    labels: Sequence[str],
    series: dict[str, np.ndarray],
    title: str,
    value_title: str,
    name: str,
    decimals: int = 2,
    signed: bool = False,
) -> html_heatmap.HtmlFigure:
    """per_token_bars as HTML rows, for a few tokens: a row per token (labels: visitor text,
    escaped by bar_rows), a bar per series, in per_token_bars' colours. signed: values that may
    be negative (cosines) grow from a zero line."""
    return html_heatmap.bar_rows(
        labels,
        series,
        title,
        value_title,
        [SERIES_COLOURS[k % len(SERIES_COLOURS)] for k in range(len(series))],
        name=name,
        decimals=decimals,
        signed=signed,
    )


def compared_grid(
    attn_weights: np.ndarray,
    tokens: Sequence[str],
    layer: int,
    head: int,
    model_shape: tuple[int, int],
    title: str,
    name: str,
    masked: bool,
) -> html_heatmap.HtmlFigure:
    """One run's (n, n) weights of head (layer, head) as an HTML attention grid titled `title`
    (the code's words), for n ≤ display_policy.DRAW_LIMIT. model_shape: (layers, heads), so the grid names the
    head the page's sliders point at. masked: the run had a causal mask (hatched cells)."""
    n_layers, n_heads = model_shape
    return html_heatmap.one_head_grid(
        attn_weights,
        tokens,
        layer,
        head,
        n_layers,
        n_heads,
        name=name,
        masked=masked,
        title_of=lambda _layer, _head: title,
    )


def masked_scores_heatmap(
    masked_scores: np.ndarray, tokens: Sequence[str], title: str
) -> go.Figure:
    """(n, n) scores with −inf where masked: masked cells are left blank (and written "−∞").

    JSON has no −∞, so masked cells are sent as NaN (null), which plotly leaves empty.
    """
    n = masked_scores.shape[0]
    is_masked = np.isneginf(masked_scores)
    values = lean(np.where(is_masked, np.nan, masked_scores))
    show_text = n <= NUMBERS_UP_TO  # "−∞" written in while the cells hold numbers
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
        xaxis=token_axis(tokens, "key (attended to)", tickangle=-60),
        yaxis=token_axis(tokens, "query (attending)", autorange="reversed"),
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
