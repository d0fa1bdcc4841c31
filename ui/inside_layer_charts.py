"""Figures for page 5, inside a layer (core/inside_layer.py): the block diagram and the sublayers' sizes.

Pure functions: arrays in, plotly figures out, no streamlit. Labels that may hold visitor text
(tokens, model names) go through ui.escape.literal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.inside_layer import Stage
from ui import charts
from ui.escape import literal

ATTENTION, FEED_FORWARD = "#636EFA", "#00CC96"  # plotly's blue and green


def block_diagram(stages: Sequence[Stage], title: str) -> go.Figure:
    """The layer as a column of boxes, input at the top, with widths and parameter counts.

    The residual stream is drawn as a line on the left that each sublayer's result is added to.
    """
    n = len(stages)
    figure = go.Figure()
    # the sublayers' rows, and the residual additions, as the model's arrangement orders them
    attention_rows = {row for row, stage in enumerate(stages) if stage.part == "attention"}
    ffn_rows = {row for row, stage in enumerate(stages) if stage.part == "ffn"}
    add_rows = [row for row, stage in enumerate(stages) if stage.part == "add"]
    for row, stage in enumerate(stages):
        y = n - 1 - row
        colour = (
            ATTENTION if row in attention_rows else FEED_FORWARD if row in ffn_rows else "#7F7F7F"
        )
        figure.add_shape(
            type="rect",
            x0=0.15,
            x1=0.95,
            y0=y - 0.38,
            y1=y + 0.38,
            line={"color": colour, "width": 2},
            fillcolor=colour,
            opacity=0.25,
        )
        params = f"{stage.parameters:,} parameters" if stage.parameters else "no parameters"
        figure.add_annotation(
            x=0.55,
            y=y,
            text=f"<b>{literal(stage.name)}</b><br>width {literal(stage.width)} · {params}",
            showarrow=False,
            font={"size": 12},
        )
    # the residual stream: x skips the attention sublayer, h skips the feed-forward one
    for top, bottom in zip([0, *add_rows[:-1]], add_rows, strict=True):
        top, bottom = n - 1 - top, n - 1 - bottom  # rows count down from the top
        figure.add_annotation(
            x=0.1,
            y=bottom,
            ax=0.1,
            ay=top,
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=2,
            arrowwidth=2,
            arrowcolor="#7F7F7F",
        )
    figure.add_annotation(
        x=0.04, y=n - 3, text="residual", textangle=-90, showarrow=False, font={"size": 11}
    )
    # name the two sublayers beside their boxes
    for rows, label, colour in (
        (attention_rows, "attention", ATTENTION),
        (ffn_rows, "feed-forward", FEED_FORWARD),
    ):
        middle = n - 1 - sum(rows) / len(rows)
        figure.add_annotation(
            x=0.985,
            y=middle,
            text=label,
            textangle=-90,
            showarrow=False,
            font={"size": 12, "color": colour},
        )
    return charts.lesson_layout(
        figure,
        title,
        height=60 * n + 60,
        xaxis={"visible": False, "range": [0, 1]},
        yaxis={"visible": False, "range": [-0.6, n - 0.4]},
        showlegend=False,
    )


def sublayer_figure(
    attention_update: np.ndarray, ffn_update: np.ndarray, share: np.ndarray, title: str
) -> go.Figure:
    """Per layer: mean ‖a‖ and ‖f‖ over tokens as bars, attention's share as a line (right axis)."""
    layers = list(range(len(share)))
    figure = go.Figure()
    figure.add_bar(
        x=layers, y=np.round(attention_update, 3), name="‖a‖ attention", marker_color=ATTENTION
    )
    figure.add_bar(
        x=layers, y=np.round(ffn_update, 3), name="‖f‖ feed-forward", marker_color=FEED_FORWARD
    )
    figure.add_scatter(
        x=layers,
        y=np.round(share, 3),
        name="attention share ‖a‖ / (‖a‖ + ‖f‖)",
        mode="lines+markers",
        yaxis="y2",
        line={"color": charts.HARD},
    )
    return charts.lesson_layout(
        figure,
        title,
        height=380,
        barmode="group",
        xaxis={"title": {"text": "layer"}, "dtick": 1},
        yaxis={"title": {"text": "mean length of the update"}, "rangemode": "tozero"},
        yaxis2={
            "title": {"text": "share"},
            "overlaying": "y",
            "side": "right",
            "range": [0, 1],
            "dtick": 0.2,
            "showgrid": False,
        },
        legend={"orientation": "h", "y": -0.2},
    ).update_layout(
        margin={**charts.LESSON_MARGIN, "r": 60}
    )  # room for the right axis' numbers and title
