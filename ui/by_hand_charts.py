"""Figures for page 0, attention by hand (core/by_hand.py).

Pure functions: arrays in, plotly figures out, no streamlit. Labels that may hold visitor text
(tokens, model names) go through ui.escape.literal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ui import charts
from ui.escape import literal


def cost_figure(
    lengths: Sequence[int], terms: Mapping[str, Sequence[int]], title: str
) -> go.Figure:
    """Multiply-adds per term against sentence length n, both axes logarithmic."""
    figure = go.Figure()
    colours = charts.QUALITATIVE_COLOURS
    for k, (name, values) in enumerate(terms.items()):
        figure.add_scatter(
            x=list(lengths),
            y=list(values),
            name=literal(name),
            mode="lines+markers",
            line={"color": colours[k % len(colours)]},
        )
    return charts.lesson_layout(
        figure,
        title,
        height=380,
        xaxis={"title": {"text": "tokens n"}, "type": "log"},
        yaxis={"title": {"text": "multiply-adds per layer"}, "type": "log"},
        legend={"orientation": "h", "y": -0.25},
    )
