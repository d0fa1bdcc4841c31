"""Figures of induction heads: every head's two scores as a layer × head grid, the training run's
loss on both halves with the steps where induction heads appear, and each head's score over the
run.

Pure functions of core.induction's results: no streamlit, no model runs, no training.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.induction import SCORE_NAMES, HeadScores, InductionRun
from ui import charts
from ui.display_policy import COMPACT_FROM_HEADS, FEWEST_TICKS

FIRST_HALF_COLOUR = "#AB63FA"  # purple: the random first copy
REPEATED_COLOUR = "#636EFA"  # blue: the repeat, where the phase change shows
CROSSING_COLOUR = "#EF553B"  # red: a head's induction score reaches the bar
STEP_COLOUR = "#00CC96"  # green: the step a slider chose
CHANCE_COLOUR = "#7F7F7F"  # grey: a uniform guess
CROSSING_BAR = 0.5  # an induction score this high: the head attends mostly to the answer
MARGIN = {"l": 60, "r": 20, "t": 70, "b": 50}


def head_name(layer: int, head: int) -> str:
    """'L1 H2': short enough for a marker's label."""
    return f"L{layer} H{head}"


GRID_TITLES = {"previous_token": "previous token", "induction": "induction"}


def score_grid(scores: HeadScores, title: str = "Every head's two scores") -> go.Figure:
    """Two layer × head heatmaps, previous-token above induction, both on 0 … 1, with every
    cell's score written on it and each grid's best head framed. One above the other: side by
    side on a 390 px phone, each grid had ~80 px for 12 heads and its numbers ran together."""
    n_layers, n_heads = scores.induction.shape
    kinds = ("previous_token", "induction")
    figure = make_subplots(
        rows=2,
        cols=1,
        subplot_titles=[GRID_TITLES[kind] for kind in kinds],
        vertical_spacing=0.16,
    )
    compact = n_heads >= COMPACT_FROM_HEADS
    for row, kind in enumerate(kinds, start=1):
        grid = np.round(scores.grid(kind).astype(np.float64), 3)
        figure.add_trace(
            go.Heatmap(
                z=grid,
                x=np.arange(n_heads),
                y=np.arange(n_layers),
                coloraxis="coloraxis",  # one colour bar: both scores are shares of one weight
                hovertemplate=f"layer %{{y}}, head %{{x}}<br>{SCORE_NAMES[kind]} %{{z:.3f}}"
                "<extra></extra>",
            ),
            row=row,
            col=1,
        )
        # numeric axes: the cell (layer, head) sits at x = head, y = layer
        figure.add_trace(
            charts.cell_numbers(grid, charts.COLORSCALE, 0.0, 1.0, compact=compact), row=row, col=1
        )
        layer, head, _ = scores.best(kind)
        charts.frame_cell(figure, layer, head, CROSSING_COLOUR, row=row, col=1)
    figure.update_annotations(font_size=12)  # the subplot titles
    figure.update_xaxes(dtick=1, range=[-0.5, n_heads - 0.5])
    figure.update_xaxes(title_text="head", row=2, col=1)  # once: above, it met the next title
    figure.update_yaxes(dtick=1, autorange="reversed")  # layer 0 on top, as data flows down
    figure.update_yaxes(title_text="layer")
    figure.update_layout(
        title={"text": title},
        height=max(380, 170 + 2 * 26 * n_layers),  # two grids of n_layers rows
        margin=MARGIN,
        coloraxis={
            "colorscale": charts.COLORSCALE,
            "cmin": 0.0,
            "cmax": 1.0,
            "colorbar": {"title": {"text": "score"}, "tickvals": [0, 0.25, 0.5, 0.75, 1]},
        },
    )
    return figure


def loss_ticks(low: float, high: float) -> tuple[list[float], list[str]]:
    """Tick values 1, 2, 5 × 10ᵏ covering [low, high] on a log axis (every 1 … 9 × 10ᵏ where
    that leaves fewer than four), written as plain decimals ("0.05", "2", "10"): plotly's own
    labels would read "50m" or "100µ"."""

    def covering(mantissas: tuple[int, ...]) -> list[float]:
        values = []
        for power in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
            for mantissa in mantissas:
                value = float(f"{mantissa * 10.0**power:.12g}")  # 0.1, not 0.1000000000001
                if low <= value <= high:
                    values.append(value)
        return values

    values = covering((1, 2, 5))
    if len(values) < FEWEST_TICKS:
        values = covering(tuple(range(1, 10)))
    return values, [f"{value:g}" for value in values]


def crossings_by_step(run: InductionRun, bar: float = CROSSING_BAR) -> dict[int, list[str]]:
    """Step -> the heads whose induction score first reaches the bar at that snapshot."""
    found: dict[int, list[str]] = defaultdict(list)
    for (layer, head), step in sorted(run.crossings(bar).items(), key=lambda item: item[1]):
        found[step].append(head_name(layer, head))
    return dict(found)


def loss_curves(run: InductionRun, step: int | None = None) -> go.Figure:
    """Next-token loss per training step on the first copy and on the repeat (log axis), the
    loss of a uniform guess, and a dotted line where each head's induction score reaches 0.5."""
    updates = np.arange(run.steps)  # the batch of update k + 1 is scored after k updates
    first, repeated = run.first_half_loss, run.repeated_loss
    chance = run.settings.chance_loss
    shown = np.concatenate([first, repeated, [chance]])
    shown = shown[shown > 0]  # a log axis cannot place 0
    low, high = float(shown.min()) * 0.8, float(shown.max()) * 1.25
    ticks, labels = loss_ticks(low, high)
    figure = go.Figure(
        data=[
            go.Scatter(
                x=updates,
                y=np.round(np.where(first > 0, first, np.nan), 4),
                name="first copy (random, left out of training)",
                line={"color": FIRST_HALF_COLOUR, "width": 1.5},
                hovertemplate="step %{x}<br>first copy: loss %{y:.3f}<extra></extra>",
            ),
            go.Scatter(
                x=updates,
                y=np.round(np.where(repeated > 0, repeated, np.nan), 4),
                name="repeat (predictable)",
                line={"color": REPEATED_COLOUR, "width": 2},
                hovertemplate="step %{x}<br>repeat: loss %{y:.3f}<extra></extra>",
            ),
        ]
    )
    figure.add_hline(y=chance, line={"color": CHANCE_COLOUR, "dash": "dash", "width": 1})
    figure.add_annotation(
        x=1,  # the right end: by then the two curves have left the guess behind
        xref="paper",
        y=math.log10(chance),  # plotly places annotations on a log axis by their log10
        yref="y",
        text=f"uniform guess: ln {run.settings.vocab_size} = {chance:.2f}",
        showarrow=False,
        xanchor="right",
        yanchor="bottom",
        font={"color": CHANCE_COLOUR, "size": 11},
    )
    for k, (at, heads) in enumerate(crossings_by_step(run).items()):
        figure.add_vline(x=at, line={"color": CROSSING_COLOUR, "dash": "dot", "width": 1.5})
        figure.add_annotation(
            x=at,
            y=1.0 - 0.09 * (k % 4),  # markers a few steps apart get their own row
            xref="x",
            yref="paper",
            text=f"{', '.join(heads)} ≥ {CROSSING_BAR:g}",
            showarrow=False,
            xanchor="left",
            font={"color": CROSSING_COLOUR, "size": 11},
        )
    if step is not None:
        figure.add_vline(x=step, line={"color": STEP_COLOUR, "width": 2})
    figure.update_layout(
        title={"text": "Next-token loss on the two copies, per training step"},
        height=380,
        margin={**MARGIN, "b": 90},
        xaxis={"title": {"text": "training step"}, "range": [0, max(1, run.steps)]},
        yaxis={
            "title": {"text": "loss, nats (log axis)"},
            "type": "log",
            "range": [math.log10(low), math.log10(high)],  # a log axis's range is in log10
            "tickmode": "array",
            "tickvals": ticks,
            "ticktext": labels,
        },
        legend={"orientation": "h", "y": -0.25, "x": 0},
    )
    return figure


def score_curves(run: InductionRun, kind: str, step: int | None = None) -> go.Figure:
    """One line per head: its score of one kind on the held-out probe batch along the run."""
    over_run = run.induction if kind == "induction" else run.previous_token  # (k, L, H)
    n_layers, n_heads = over_run.shape[1:]
    colours = charts.QUALITATIVE_COLOURS
    figure = go.Figure()
    for layer, head in np.ndindex(n_layers, n_heads):
        figure.add_scatter(
            x=run.snapshot_steps,
            y=np.round(over_run[:, layer, head].astype(np.float64), 4),
            name=head_name(layer, head),
            mode="lines",
            # a layer's heads share a dash, so layer 0 and layer 1 read apart at a glance
            line={
                "color": colours[(layer * n_heads + head) % len(colours)],
                "dash": "solid" if layer == n_layers - 1 else "dot",
            },
            hovertemplate=f"{head_name(layer, head)}<br>step %{{x}}<br>score %{{y:.3f}}"
            "<extra></extra>",
        )
    if kind == "induction":
        figure.add_hline(y=CROSSING_BAR, line={"color": CROSSING_COLOUR, "dash": "dot", "width": 1})
    if step is not None:
        figure.add_vline(x=step, line={"color": STEP_COLOUR, "width": 2})
    figure.update_layout(
        title={"text": f"Every head's {SCORE_NAMES[kind]} during training (held-out sequences)"},
        height=340,
        margin={**MARGIN, "b": 90},
        xaxis={"title": {"text": "training step"}, "range": [0, max(1, run.steps)]},
        yaxis={"title": {"text": SCORE_NAMES[kind]}, "range": [0, 1.02], "dtick": 0.25},
        legend={"orientation": "h", "y": -0.3, "x": 0},
    )
    return figure
