"""Figures of the training lab: the loss curve, learned against target attention, W_qᵀW_k.

Pure functions of a core.lab.TrainingRun and a snapshot index: no streamlit, no training.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core import lab
from core.lab import TrainingRun
from ui.charts import QUALITATIVE_COLOURS, attention_heatmap, label_margin, token_ticks
from ui.escape import literal

LOSS_COLOUR = "#636EFA"  # plotly's blue, readable on light and dark
MASS_COLOUR = "#00CC96"  # green: the weight on the right key
STEP_COLOUR = "#EF553B"  # the chosen step


def numbered(tokens: Sequence[str]) -> list[str]:
    """'3 a' style labels: a word that appears twice still gets two distinct, findable rows."""
    return [f"{i} {token}" for i, token in enumerate(tokens)]


def loss_curve(run: TrainingRun, index: int) -> go.Figure:
    """Training loss per step (log axis) and the held-out weight on the target, step marked."""
    step = int(run.snapshot_steps[index])
    steps = np.arange(1, len(run.loss) + 1)  # loss[k] was measured before update k + 1
    figure = go.Figure(
        data=[
            go.Scatter(
                x=steps,
                y=np.where(run.loss > 0, run.loss, np.nan),  # a log axis cannot show 0: a gap
                name="training loss",
                line={"color": LOSS_COLOUR},
                hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>",
            ),
            go.Scatter(
                x=run.snapshot_steps,
                y=np.round(run.eval_mass, 4),
                name="weight on the right key (held out)",
                yaxis="y2",
                line={"color": MASS_COLOUR, "dash": "dot"},
                hovertemplate="step %{x}<br>weight on target %{y:.3f}<extra></extra>",
            ),
        ],
        layout={
            "title": {"text": f"Loss and weight on the right key, step {step} marked"},
            "height": 340,
            "margin": {"l": 60, "r": 60, "t": 50, "b": 90},
            "xaxis": {"title": {"text": "training step"}, "range": [0, max(1, len(run.loss))]},
            # Powers of ten (10⁻⁴), not SI prefixes: plotly's default wrote 0.0001 as "100µ".
            "yaxis": {"title": {"text": "loss (log)"}, "type": "log", "exponentformat": "power"},
            "yaxis2": {
                "title": {"text": "weight on target"},
                "overlaying": "y",
                "side": "right",
                "range": [0, 1.02],
                "tickvals": [
                    0,
                    0.25,
                    0.5,
                    0.75,
                    1,
                ],  # its own round ticks, not the loss axis's grid
                "showgrid": False,
            },
            "legend": {"orientation": "h", "y": -0.3, "x": 0},
            "shapes": [
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": step,
                    "x1": step,
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": STEP_COLOUR, "width": 2},
                }
            ],
        },
    )
    return figure


def probe_attention(run: TrainingRun, index: int) -> go.Figure:
    """The probe sequence's (n, n) attention map at one snapshot."""
    labels = numbered(run.probe_tokens)
    step = int(run.snapshot_steps[index])
    return attention_heatmap(
        run.probe_attention[index], labels, labels, f"Learned attention, step {step}", height=420
    )


def hidden_keys_path(n: int) -> str:
    """SVG path of the staircase over the cells j > i (row i, key j) of an n × n heatmap."""
    corners = [(0.5, -0.5)]  # cell centres sit on whole numbers: edges are at ± 0.5
    for i in range(n - 1):
        corners += [(i + 0.5, i + 0.5), (i + 1.5, i + 0.5)]
    corners += [(n - 0.5, n - 1.5), (n - 0.5, -0.5)]
    return "M " + " L ".join(f"{x} {y}" for x, y in corners) + " Z"


def target_attention(run: TrainingRun) -> go.Figure:
    """The (n, n) pattern that solves the probe: one 1 per row, on the target key.

    With the causal mask on, the keys a row may not see are greyed out: a target under the grey
    cannot be reached at all.
    """
    labels = numbered(run.probe_tokens)
    if not run.settings.causal:
        return attention_heatmap(run.target_pattern, labels, labels, "Target pattern", height=420)
    figure = attention_heatmap(
        run.target_pattern, labels, labels, "Target pattern (grey: hidden by the mask)", height=420
    )
    grey = {"color": "rgba(128, 128, 128, 0.6)", "width": 0}
    shape = {"type": "path", "path": hidden_keys_path(len(labels)), "line": grey}
    figure.layout.shapes = [{**shape, "fillcolor": "rgba(128, 128, 128, 0.6)"}]
    return figure


def bilinear_heatmap(run: TrainingRun, index: int) -> go.Figure:
    """E W_qᵀ W_k Eᵀ over token rows (and position rows) at one snapshot, one colour range per run.

    The colour range is the largest |entry| over every snapshot, so growth along the slider shows.
    """
    form = run.bilinear[index]
    labels = run.bilinear_labels
    limit = float(np.abs(run.bilinear).max()) or 1.0
    ticks = token_ticks(labels)
    step = int(run.snapshot_steps[index])
    heatmap = go.Heatmap(
        z=np.round(form.astype(np.float64), 3),
        x=np.arange(len(labels)),
        y=np.arange(len(labels)),
        colorscale="RdBu",  # app-wide: blue = positive (the query likes this key), red = negative
        zmid=0.0,
        zmin=-limit,
        zmax=limit,
        colorbar={"title": {"text": "score part"}},
        # "<" and ">" are tokens of the bracket task: plotly would read them as markup.
        customdata=np.array(
            [[(literal(row), literal(col)) for col in labels] for row in labels], dtype=object
        ),
        hovertemplate="query row %{customdata[0]}<br>key row %{customdata[1]}"
        "<br>%{z:.2f}<extra></extra>",
    )
    side = label_margin(labels)
    return go.Figure(
        data=[heatmap],
        layout={
            "title": {"text": f"W_qᵀW_k on the embedding rows, step {step}"},
            "height": 460,
            "margin": {"l": side, "r": 10, "t": 50, "b": side},
            "xaxis": {**ticks, "title": {"text": "as a key"}, "tickangle": -60},
            "yaxis": {**ticks, "title": {"text": "as a query"}, "autorange": "reversed"},
        },
    )


RUN_COLOURS = QUALITATIVE_COLOURS[2:]


# ---- runs side by side ---------------------------------------------------------------------------
def run_label(settings: lab.Settings) -> str:
    """A short name of a run's settings, e.g. "first, d_head 128, unscaled, seed 0"."""
    parts = [settings.task, f"d_head {settings.d_head}", "scaled" if settings.scale else "unscaled"]
    if settings.start_at_other_spread:
        parts.append(f"started at the {'unscaled' if settings.scale else 'scaled'} spread")
    if settings.loss != lab.Settings.loss:
        parts.append("cross-entropy")
    if settings.causal:
        parts.append("causal")
    if not settings.positions:
        parts.append("no positions")
    parts += [f"{settings.steps} steps", f"seed {settings.seed}"]
    return ", ".join(parts)


def wrapped(text: str, width: int = 34) -> str:
    """A ", "-separated label as escaped lines of at most ~width characters (joined by plotly's
    <br>): plotly never wraps a title, and a phone's figure is ~330 px wide."""
    lines: list[str] = []
    for part in text.split(", "):
        if lines and len(lines[-1]) + len(part) + 2 <= width:
            lines[-1] += ", " + part
        else:
            lines.append(part)
    return ",<br>".join(literal(line) for line in lines)


def runs_side_by_side(runs: Sequence[TrainingRun], names: Sequence[str]) -> go.Figure:
    """Two panels over the training steps, one line per run: the held-out weight on the right
    key, and the spread of the held-out scores (log axis). The legend names each run by its
    number ("#1 …" in names); the hover gives its whole name."""
    figure = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("weight on the right key (held out)", "score spread (log)"),
    )
    for number, (run, name) in enumerate(zip(runs, names, strict=True)):
        # Not blue and red, which the comparison below gives to scaled and unscaled heads.
        colour = RUN_COLOURS[number % len(RUN_COLOURS)]
        shown = literal(name)
        number_only = literal(name.split(" ", 1)[0])  # "#1": the table beside says the rest
        for row, values, hover in (
            (1, np.round(run.eval_mass, 4), "weight on target %{y:.3f}"),
            (2, np.round(run.score_spread, 3), "score spread %{y:.2f}"),
        ):
            figure.add_trace(
                go.Scatter(
                    x=run.snapshot_steps,
                    y=values,
                    name=f"run {number_only}",
                    legendgroup=str(number),
                    showlegend=row == 1,
                    line={"color": colour},
                    hovertemplate=f"{shown}<br>step %{{x}}<br>{hover}<extra></extra>",
                ),
                row=row,
                col=1,
            )
    figure.update_yaxes(range=[0, 1.02], row=1, col=1)
    figure.update_yaxes(type="log", exponentformat="power", row=2, col=1)
    figure.update_xaxes(title_text="training step", row=2, col=1)
    figure.update_layout(
        height=520,
        margin={"l": 60, "r": 10, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.15, "x": 0},
    )
    return figure


def final_attention(run: TrainingRun, name: str) -> go.Figure:
    """The probe's attention after a run's last step, titled by the run, small."""
    labels = numbered(run.probe_tokens)
    return attention_heatmap(run.probe_attention[-1], labels, labels, wrapped(name), height=400)


# ---- the comparison of many seeds -------------------------------------------------------------
START_STYLE = {  # colour by scale, dashes for a start at the other head's spread
    lab.SCALED: ("#636EFA", "solid"),
    lab.SCALED_WIDE: ("#636EFA", "dash"),
    lab.UNSCALED: ("#EF553B", "solid"),
    lab.UNSCALED_NARROW: ("#EF553B", "dash"),
}


def comparison_curves(comparison: lab.Comparison, task: str) -> go.Figure:
    """One task's runs, per start: the median score spread over the seeds (log axis) and the
    mean share of rows locked on a wrong key, at every snapshot."""
    steps = comparison.snapshot_steps(task)
    figure = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(
            "score spread, median over the seeds (log)",
            "rows locked on a wrong key",
        ),
    )
    for start in lab.STARTS:
        colour, dash = START_STYLE[start]
        for row, values, hover in (
            (1, np.round(comparison.median_spread(task, start), 3), "spread %{y:.2f}"),
            (2, np.round(comparison.mean_locked(task, start), 4), "rows locked %{y:.1%}"),
        ):
            figure.add_trace(
                go.Scatter(
                    x=steps,
                    y=values,
                    name=start.label,
                    legendgroup=start.label,
                    showlegend=row == 1,
                    line={"color": colour, "dash": dash},
                    hovertemplate=f"{start.label}<br>step %{{x}}<br>{hover}<extra></extra>",
                ),
                row=row,
                col=1,
            )
    figure.update_yaxes(type="log", exponentformat="power", row=1, col=1)
    figure.update_yaxes(range=[0, 1], tickformat=".0%", row=2, col=1)
    figure.update_xaxes(title_text="training step", row=2, col=1)
    figure.update_layout(
        title={"text": f"{lab.TASKS[task].title}: d_head {comparison.d_head}"},
        height=560,
        margin={"l": 60, "r": 10, "t": 80, "b": 40},
        legend={"orientation": "h", "y": -0.15, "x": 0},
    )
    return figure
