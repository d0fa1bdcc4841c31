"""Figures for page 2, queries, keys and values (core/qkv.py).

Pure functions: arrays in, plotly figures out, no streamlit. Tokens reach plotly escaped through
ui.escape.literal. Long inputs are cut to the first DRAW_LIMIT tokens (ui/display_policy.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui import charts, display_policy
from ui.escape import literal
from ui.matrix_charts import (
    annotate_small,
    drawn_title,
    highlight_bars,
)


def query_steps(
    dots: np.ndarray,
    scores: np.ndarray,
    weights: np.ndarray,
    tokens: Sequence[str],
    query_index: int,
    scaled: bool,
    limit: int = display_policy.DRAW_LIMIT,
) -> go.Figure:
    """Three stacked bar charts over the keys j: q·k_j, the score fed to softmax, and α_ij."""
    shown = min(len(tokens), limit)
    score_name = "q·k_j / √d_k" if scaled else "q·k_j (not scaled)"
    figure = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("dot product q·k_j", f"score {score_name}", "softmax weight α_ij"),
    )
    for row, (values, name) in enumerate(
        [(dots, "q·k_j"), (scores, "score"), (weights, "α_ij")], start=1
    ):
        highlight_bars(figure, values[:shown], tokens[:shown], query_index, row, 1, name)
    figure.update_yaxes(rangemode="tozero", row=3, col=1)  # small weights stay visible
    figure.update_xaxes(title_text="key token j", tickangle=-45, row=3, col=1)
    figure.update_layout(
        title={"text": f"Query {query_index} “{literal(tokens[query_index])}” against every key"},
        height=620,
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
    )
    return figure


def weighted_values(
    weighted: np.ndarray,
    output: np.ndarray,
    tokens: Sequence[str],
    query_index: int,
    limit: int = display_policy.DRAW_LIMIT,
) -> go.Figure:
    """Heatmap: rows α_ij v_j for the keys j (first `limit`), last row their sum = output row i."""
    shown = min(len(tokens), limit)
    # Stack the output under the contributions so one colour scale compares them directly.
    stacked = np.vstack([weighted[:shown], output[None, :]])  # (shown + 1, d_v)
    labels = [*tokens[:shown], "= output"]
    figure = charts.matrix_heatmap(
        stacked,
        labels,
        title=drawn_title(f"α_ij · v_j for query {query_index}, and their sum", weighted, shown),
        x_title="value dimension",
    )
    return annotate_small(figure, shown + 1, weighted.shape[1])


def asymmetry_heatmap(
    difference: np.ndarray,
    tokens: Sequence[str],
    title: str,
    limit: int = display_policy.DRAW_LIMIT,
) -> go.Figure:
    """Diverging heatmap of α - αᵀ: blue where i attends to j more than j to i, red the reverse."""
    shown = min(len(tokens), limit)
    values = np.round(difference[:shown, :shown].astype(np.float64), 4)
    bound = float(np.max(np.abs(values))) if values.size else 1.0
    figure = go.Figure(
        go.Heatmap(
            z=values,
            x=np.arange(shown),
            y=np.arange(shown),
            colorscale="RdBu",  # app-wide: blue = positive, red = negative
            zmid=0.0,
            zmin=-(bound or 1.0),
            zmax=bound or 1.0,
            colorbar={"title": {"text": charts.subscripts("α_ij − α_ji")}},
            hovertemplate="i %{y} → j %{x}<br>α_ij − α_ji %{z:.3f}<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": drawn_title(title, difference, shown, unit="tokens")},
        height=int(min(640, max(360, 18 * shown + 160))),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={
            **charts.token_ticks(list(tokens[:shown])),
            "title": {"text": "j (attended to)"},
            "tickangle": -60,
        },
        yaxis={
            **charts.token_ticks(list(tokens[:shown])),
            "title": {"text": "i (attending)"},
            "autorange": "reversed",
        },
    )
    if shown <= display_policy.NUMBERS_UP_TO:
        # Eight columns on a phone are ~29 px a cell: "-7.2" at 10 px fits, "-7.17" at 11 px
        # ran into its neighbours.
        charts.annotate_heatmap(figure, decimals=2, size=10, compact=True)
    return figure


def head_cosines(
    cosines: np.ndarray, reference: float, reference_name: str, title: str
) -> go.Figure:
    """Bars: one cosine per head; a dashed line at the parameter-free reference."""
    figure = go.Figure(
        go.Bar(
            x=[f"head {h}" for h in range(len(cosines))],
            y=np.round(np.asarray(cosines, dtype=np.float64), 3),
            marker_color=charts.SOFT,
            texttemplate="%{y:.2f}",
            textposition="outside",
            name="one trained head",
        )
    )
    figure.add_hline(
        y=reference,
        line={"dash": "dash", "color": charts.HARD},
        annotation_text=literal(reference_name),
        annotation_position="bottom right",
    )
    return charts.lesson_layout(
        figure, title, yaxis={"title": {"text": "cosine"}, "range": [0, 1.1]}
    )


def score_asymmetry_heatmap(difference: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    """S − Sᵀ drawn like α − αᵀ (qkv_charts.asymmetry_heatmap), labelled for scores."""

    figure = asymmetry_heatmap(difference, tokens, title)
    figure.update_traces(
        colorbar={"title": {"text": "S_ij − S_ji"}},
        hovertemplate="i %{y} → j %{x}<br>S_ij − S_ji %{z:.3f}<extra></extra>",
        selector={"type": "heatmap"},
    )
    return figure
