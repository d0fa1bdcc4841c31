"""Figures for page 0, attention by hand (core/by_hand.py), and the grouped bars other pages reuse.

Pure functions: arrays in, plotly figures out, no streamlit. Labels that may hold visitor text
(tokens, model names) go through ui.escape.literal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from ui import charts
from ui.escape import literal


def weight_bars(
    labels: Sequence[str], series: Mapping[str, np.ndarray], title: str, y_title: str = "weight"
) -> go.Figure:
    """Grouped bars, one group per label (key, token), one bar per series (soft/hard, …)."""
    colours = charts.QUALITATIVE_COLOURS
    figure = go.Figure()
    x = [literal(label) for label in labels]
    for k, (name, values) in enumerate(series.items()):
        figure.add_bar(
            x=x,
            y=np.round(np.asarray(values, dtype=np.float64), 4),
            name=literal(name),
            marker_color=colours[k % len(colours)],
            # numbers on the bars only while they have room to be read
            texttemplate="%{y:.2f}" if len(labels) * len(series) <= charts.LABELLED_BARS else None,
            textposition="outside",
        )
    figure = charts.lesson_layout(
        figure,
        title,
        barmode="group",
        yaxis={"title": {"text": y_title}, "rangemode": "tozero"},
        # above the bars: below them, at a fixed height, it covered the longer rotated labels
        # of a long sentence ("4:was" showed as "4:wa")
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return figure.update_layout(
        margin={**charts.LESSON_MARGIN, "t": 100}
    )  # title, and a legend of 2 rows


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
