"""Figures for page 10, explanations side by side: every method's scores, their agreement and
the deletion test (core/explanations.py).

Pure functions from arrays to plotly figures (no streamlit). Tokens are visitor text: they reach
plotly only through ui.escape.literal. Token axes are numeric with the tokens as tick labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from ui import html_heatmap
from ui.charts import (
    label_margin,
)
from ui.information_flow_charts import (
    RANDOM_COLOUR,
    hover_tokens,
    method_colour,
    token_axis,
)
from ui.matrix_charts import RDBU_SCALE


def scaled_by_method(matrix: np.ndarray) -> np.ndarray:
    """(M, n) -> each row divided by its largest |score|, so methods share one colour scale."""
    peaks = np.abs(matrix).max(axis=1, keepdims=True)
    return np.divide(matrix, peaks, out=np.zeros_like(matrix, dtype=np.float64), where=peaks > 0)


def stacked_scores(scores: Mapping[str, np.ndarray]) -> np.ndarray:
    """Method label -> (n,) scores  ->  (methods, n), a row per method in the mapping's order."""
    return np.array([scores[label] for label in scores])


def methods_heatmap(
    matrix: np.ndarray, method_labels: Sequence[str], tokens: Sequence[str], title: str
) -> go.Figure:
    """(M, n) per-method scores, each row scaled to its largest |score| (blue +, red −, as everywhere in the app)."""
    scaled = scaled_by_method(np.asarray(matrix, dtype=np.float64))
    hover = hover_tokens(tokens)
    custom = None
    if hover:
        custom = np.empty(scaled.shape + (2,), dtype=object)  # (M, n, 2): token, raw score
        custom[:, :, 0] = np.asarray(hover, dtype=object)[None, :]
        custom[:, :, 1] = np.round(np.asarray(matrix, dtype=np.float64), 5)
    heatmap = go.Heatmap(
        z=np.round(scaled, 4),
        x=np.arange(len(tokens)),
        y=np.arange(len(method_labels)),
        zmin=-1.0,
        zmax=1.0,
        zmid=0.0,
        colorscale="RdBu",  # app-wide: blue = positive, red = negative
        colorbar={"title": {"text": "÷ row max"}},
        customdata=custom,
        hovertemplate=(
            "%{x}: <b>%{customdata[0]}</b><br>score %{customdata[1]}<extra></extra>"
            if hover
            else "piece %{x}: %{z:.3f} of the row's largest<extra></extra>"
        ),
    )
    ticks = token_axis(tokens)
    layout = {
        "title": {"text": title},
        "height": 120 + 34 * len(method_labels) + 60,
        "margin": {
            "l": label_margin(method_labels, title=False),
            "r": 10,
            "t": 50,
            "b": label_margin([tokens[i] for i in ticks["tickvals"]], angle=-60, title=False),
        },
        "xaxis": ticks,
        "yaxis": {
            "tickmode": "array",
            "tickvals": list(range(len(method_labels))),
            "ticktext": list(method_labels),
            "autorange": "reversed",
        },
    }
    return go.Figure(data=[heatmap], layout=layout)


def methods_grid(
    matrix: np.ndarray,
    method_labels: Sequence[str],
    tokens: Sequence[str],
    title: str,
    unit: str,
    name: str,
) -> html_heatmap.HtmlFigure:
    """methods_heatmap's picture as HTML, with no plotly.js to load: each method's row scaled
    to its largest |score|, every number written in up to 12 pieces, one image of the cells
    past that (html_heatmap.value_grid). The scores themselves are in the page's table."""
    return html_heatmap.value_grid(
        scaled_by_method(np.asarray(matrix, dtype=np.float64)),
        method_labels,
        tokens,
        title,
        scale=RDBU_SCALE,  # app-wide: blue = positive, red = negative
        value_range=(-1.0, 1.0),
        decimals=2,
        bar_title="÷ row max",
        axis_titles=("method", unit),
        name=name,
    )


def agreement_grid(
    rho: np.ndarray, method_labels: Sequence[str], title: str, name: str
) -> html_heatmap.HtmlFigure:
    """(M, M) Spearman's ρ between methods as HTML, written in every cell, on RdBu from −1 to 1.
    A ρ that is undefined (a method that scored every piece alike has no ranking) is an empty
    cell whose tooltip says so."""
    return html_heatmap.value_grid(
        np.asarray(rho, dtype=np.float64),
        method_labels,
        method_labels,
        title,
        scale=RDBU_SCALE,
        value_range=(-1.0, 1.0),
        decimals=2,
        bar_title="ρ",
        axis_titles=("method", "method"),
        name=name,
        blank="no ranking: every score alike",
    )


def deletion_figure(
    curves: Mapping[str, np.ndarray],
    chance: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_orders: int,
    title: str,
    y_title: str,
) -> go.Figure:
    """Lines: the target left after removing each method's top-k pieces, k = 0, 1, …; behind
    them a grey band from the lowest to the highest of n_orders random orders, and their mean
    dotted. chance = (low, mean, high), each (k_max + 1,)."""
    low, mean, high = (np.round(np.asarray(v, dtype=np.float64), 5) for v in chance)
    k = np.arange(len(mean))
    band_name = f"{n_orders} random orders: lowest to highest"
    lines = [
        go.Scatter(  # the band's upper edge, then the lower one filled up to it
            x=k, y=high, mode="lines", line={"width": 0, "color": RANDOM_COLOUR},
            legendgroup="chance", showlegend=False, hoverinfo="skip", name="random highest",
        ),
        go.Scatter(
            x=k, y=low, mode="lines", line={"width": 0, "color": RANDOM_COLOUR},
            fill="tonexty", fillcolor="rgba(127,127,127,0.25)", legendgroup="chance",
            name=band_name, hoverinfo="skip",
        ),
        go.Scatter(
            x=k, y=mean, mode="lines", line={"color": RANDOM_COLOUR, "dash": "dot"},
            legendgroup="chance", name=f"mean of the {n_orders} random orders",
            hovertemplate="random orders' mean<br>k = %{x}: %{y:.4f}<extra></extra>",
        ),
    ]  # fmt: skip
    for index, (label, values) in enumerate(curves.items()):
        lines.append(
            go.Scatter(
                x=np.arange(len(values)),
                y=np.round(np.asarray(values, dtype=np.float64), 5),
                name=label,
                mode="lines+markers",
                line={"color": method_colour(index)},
                hovertemplate=f"{label}<br>k = %{{x}}: %{{y:.4f}}<extra></extra>",
            )
        )
    layout = {
        "title": {"text": title},
        "height": 480,
        "margin": {"l": 70, "r": 10, "t": 50, "b": 140},
        "xaxis": {"title": {"text": "word pieces removed (k)"}, "dtick": 1},
        "yaxis": {"title": {"text": y_title}},
        # below the plot: eight entries do not fit beside the title on a phone
        "legend": {"orientation": "h", "y": -0.22, "yanchor": "top", "x": 0},
    }
    return go.Figure(data=lines, layout=layout)
