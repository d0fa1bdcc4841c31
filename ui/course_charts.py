"""Figures for the course's added lessons: attention by hand, inside a layer, heads with a job.

Pure functions: arrays in, plotly figures out, no streamlit. Labels that may hold visitor text
(tokens, model names) go through ui.escape.literal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from core.block import Stage
from ui import charts
from ui.escape import literal

SOFT, HARD = "#636EFA", "#EF553B"  # plotly's blue and red: readable on light and dark
ATTENTION, FEED_FORWARD = "#636EFA", "#00CC96"
MARGIN = {"l": 10, "r": 10, "t": 50, "b": 10}
LABELLED_BARS = 12  # bars that still get their value printed on them


def _layout(figure: go.Figure, title: str, height: int = 340, **axes: object) -> go.Figure:
    figure.update_layout(title={"text": title}, height=height, margin=MARGIN, **axes)
    return figure


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
            texttemplate="%{y:.2f}" if len(labels) * len(series) <= LABELLED_BARS else None,
            textposition="outside",
        )
    figure = _layout(
        figure,
        title,
        barmode="group",
        yaxis={"title": {"text": y_title}, "rangemode": "tozero"},
        # above the bars: below them, at a fixed height, it covered the longer rotated labels
        # of a long sentence ("4:was" showed as "4:wa")
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return figure.update_layout(margin={**MARGIN, "t": 100})  # title, and a legend of 2 rows


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
    return _layout(
        figure,
        title,
        height=380,
        xaxis={"title": {"text": "tokens n"}, "type": "log"},
        yaxis={"title": {"text": "multiply-adds per layer"}, "type": "log"},
        legend={"orientation": "h", "y": -0.25},
    )


def block_diagram(stages: Sequence[Stage], title: str) -> go.Figure:
    """The layer as a column of boxes, input at the top, with widths and parameter counts.

    The residual stream is drawn as a line on the left that each sublayer's result is added to.
    """
    n = len(stages)
    figure = go.Figure()
    attention_rows = {1, 2, 3}  # Q/K/V, the per-head mixing, W_O: the attention sublayer
    ffn_rows = {5, 6}
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
    for top, bottom in ((n - 1, n - 5), (n - 5, n - 8)):
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
    return _layout(
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
        line={"color": HARD},
    )
    return _layout(
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
    ).update_layout(margin={**MARGIN, "r": 60})  # room for the right axis' numbers and title


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
    charts.frame_cell(figure, layer, head, HARD)
    return _layout(
        figure,
        title,
        height=300,
        xaxis={"title": {"text": "head"}, "dtick": 1},
        yaxis={"title": {"text": "layer"}, "dtick": 1, "autorange": "reversed"},
    )


def head_cosines(
    cosines: np.ndarray, reference: float, reference_name: str, title: str
) -> go.Figure:
    """Bars: one cosine per head; a dashed line at the parameter-free reference."""
    figure = go.Figure(
        go.Bar(
            x=[f"head {h}" for h in range(len(cosines))],
            y=np.round(np.asarray(cosines, dtype=np.float64), 3),
            marker_color=SOFT,
            texttemplate="%{y:.2f}",
            textposition="outside",
            name="one trained head",
        )
    )
    figure.add_hline(
        y=reference,
        line={"dash": "dash", "color": HARD},
        annotation_text=literal(reference_name),
        annotation_position="bottom right",
    )
    return _layout(figure, title, yaxis={"title": {"text": "cosine"}, "range": [0, 1.1]})


def score_asymmetry_heatmap(difference: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    """S − Sᵀ drawn like α − αᵀ (learning_charts.asymmetry_heatmap), labelled for scores."""
    from ui import learning_charts

    figure = learning_charts.asymmetry_heatmap(difference, tokens, title)
    figure.update_traces(
        colorbar={"title": {"text": "S_ij − S_ji"}},
        hovertemplate="i %{y} → j %{x}<br>S_ij − S_ji %{z:.3f}<extra></extra>",
        selector={"type": "heatmap"},
    )
    return figure
