"""Figures for page 9, where the meaning comes from: rollout and flow matrices, per-token scores
and the encoder and logit lenses.

Pure functions from arrays to plotly figures (no streamlit). Tokens are visitor text: they reach
plotly only through ui.escape.literal. Token axes are numeric with the tokens as tick labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from ui import html_heatmap
from ui.charts import (
    COLORSCALE,
    QUALITATIVE_COLOURS,
    attention_heatmap,
    label_margin,
    state_axis,
    state_name,
    token_ticks,
)
from ui.display_policy import HOVER_TOKENS_UP_TO
from ui.escape import literal
from ui.numbers import signed

RANDOM_COLOUR = "#7F7F7F"


def method_colour(index: int) -> str:
    return QUALITATIVE_COLOURS[index % len(QUALITATIVE_COLOURS)]


def mixing_heatmap(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    zmax: float | None = None,
    unit: str = "word piece",
) -> go.Figure:
    """An (n, n) rollout/flow matrix: row i = position at the top, column j = input piece."""
    fig = attention_heatmap(matrix, tokens, tokens, title, zmax=zmax, colorbar_title="share")
    fig.layout.xaxis.title.text = f"input {unit} (layer 0)"
    fig.layout.yaxis.title.text = "position after the layer"
    return fig


def token_axis(tokens: Sequence[str]) -> dict:
    ticks = token_ticks(tokens)
    return {**ticks, "tickangle": -60}


def hover_tokens(tokens: Sequence[str]) -> list[str] | None:
    return [literal(t) for t in tokens] if len(tokens) <= HOVER_TOKENS_UP_TO else None


def token_bars(
    scores: Mapping[str, np.ndarray], tokens: Sequence[str], title: str, y_title: str
) -> go.Figure:
    """Grouped bars: one bar per word piece and method (label -> (n,) scores)."""
    hover = hover_tokens(tokens)
    bars = [
        go.Bar(
            x=np.arange(len(tokens)),
            y=np.round(np.asarray(values, dtype=np.float64), 5),
            name=label,
            marker_color=method_colour(index),
            customdata=hover,
            hovertemplate=(
                "%{x}: <b>%{customdata}</b><br>%{y:.4f}" if hover else "piece %{x}: %{y:.4f}"
            )
            + f"<extra>{label}</extra>",
        )
        for index, (label, values) in enumerate(scores.items())
    ]
    ticks = token_axis(tokens)
    layout = {
        "title": {"text": title},
        "barmode": "group",
        "height": 400,
        "margin": {
            "l": 60,
            "r": 10,
            "t": 100,  # the title, and the legend (two rows on a phone) under it
            "b": label_margin([tokens[i] for i in ticks["tickvals"]], angle=-60, title=False),
        },
        "xaxis": ticks,
        "yaxis": {"title": {"text": y_title}},
        # above the plot, under the title; the top margin leaves room for two rows on a phone
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
    }
    return go.Figure(data=bars, layout=layout)


def lens_heatmap(settling: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    """(L + 1, n) each token's cosine to its own final vector, one row per state."""
    n_states, n = settling.shape
    hover = hover_tokens(tokens)
    custom = None
    if hover:
        custom = np.broadcast_to(np.asarray(hover, dtype=object)[None, :], (n_states, n))
    states = [state_name(state) for state in range(n_states)]  # "after layer 2", as every page
    heatmap = go.Heatmap(
        z=np.round(np.asarray(settling, dtype=np.float64), 4),
        x=np.arange(n),
        y=states,
        zmin=-1.0 if settling.min() < 0 else 0.0,
        zmax=1.0,
        colorscale=COLORSCALE,
        colorbar={"title": {"text": "cos"}},
        customdata=custom,
        hovertemplate=(
            "%{y}, %{x}: <b>%{customdata}</b><br>cos %{z:.3f}<extra></extra>"
            if hover
            else "%{y}, piece %{x}: cos %{z:.3f}<extra></extra>"
        ),
    )
    ticks = token_axis(tokens)
    layout = {
        "title": {"text": title},
        "height": 340,
        "margin": {
            "l": label_margin(states, title=False),
            "r": 10,
            "t": 50,
            "b": label_margin([tokens[i] for i in ticks["tickvals"]], angle=-60, title=False),
        },
        "xaxis": ticks,
        "yaxis": {"autorange": "reversed"},  # the embedding output on top
    }
    return go.Figure(data=[heatmap], layout=layout)


def settling_figure(sentence: np.ndarray, title: str, y_title: str = "cos to final") -> go.Figure:
    """(L + 1,) one cosine per state: to the final embedding, or between two sentences."""
    values = np.round(np.asarray(sentence, dtype=np.float64), 5)
    line = go.Scatter(
        x=np.arange(len(values)),
        y=values,
        mode="lines+markers+text",
        text=[signed(v, 2, plus="") for v in values],
        textposition="top center",
        cliponaxis=False,  # a label over a cosine of 1 was cut in half at the plot's top
        hovertemplate="after layer %{x}: cos %{y:.4f}<extra></extra>",
        line={"color": QUALITATIVE_COLOURS[0]},
    )
    layout = {
        "title": {"text": title},
        "height": 300,
        "margin": {"l": 70, "r": 10, "t": 50, "b": 50},
        "xaxis": state_axis(len(values)),
        "yaxis": {
            "title": {"text": y_title},
            # from 0, or a little below a negative cosine: its marker sat on the axis, cut in half
            "range": [min(0.0, float(values.min()) - 0.06) if values.min() < 0 else 0.0, 1.08],
        },
    }
    return go.Figure(data=[line], layout=layout)


def logit_lens_grid(
    probabilities: np.ndarray, state_labels: Sequence[str], pieces: Sequence[str], name: str
) -> html_heatmap.HtmlFigure:
    """(L + 1, k) the probability each state's reading gives the model's final k likeliest next
    pieces, as HTML cells with every probability written (Viridis from 0 to the largest)."""
    values = np.asarray(probabilities, dtype=np.float64)
    top = float(values.max()) if values.size and values.max() > 0 else 1.0
    return html_heatmap.value_grid(
        values,
        list(state_labels),
        list(pieces),
        "Logit lens: the final prediction, read at every state",
        scale=html_heatmap.VIRIDIS_SCALE,
        value_range=(0.0, top),
        decimals=2,
        bar_title="p",
        axis_titles=("state read", "next piece (the model's final top 5)"),
        name=name,
        fractions=True,
    )
