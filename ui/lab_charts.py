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
from ui import display_policy
from ui.charts import QUALITATIVE_COLOURS, attention_heatmap, label_margin, token_ticks
from ui.escape import literal
from ui.numbers import percent

LOSS_COLOUR = "#636EFA"  # plotly's blue, readable on light and dark
MASS_COLOUR = "#00CC96"  # green: the weight on the right key
STEP_COLOUR = "#EF553B"  # the chosen step


def numbered(tokens: Sequence[str]) -> list[str]:
    """'3 a' style labels: a word that appears twice still gets two distinct, findable rows."""
    return [f"{i} {token}" for i, token in enumerate(tokens)]


# The training steps play in the browser: each figure below carries one frame per chosen
# snapshot, and plotly's own slider and Play button step through them without a rerun.
# Of the frames' spacing, this share follows the steps and the rest the map's moves: a still
# stretch at the end of a run still gets a few frames, so the curves' line walks through it.
PLAY_CLOCK_SHARE = 0.1
FRAME_MS = 300  # time per frame while playing: a default run's ~20–40 frames take 6–12 s
NO_LABELS = "rgba(0, 0, 0, 0)"  # the slider's tick labels: ~50 numbers would pile up on a phone
RAIL_GREY = "rgba(150, 150, 150, 0.6)"  # the slider's rail and ticks, seen on light and on dark
# Over a stepped figure's plot, three lines: the title (the modebar shows on its right when the
# pointer is over the figure), Play and Pause, and the slider with the step over it.
TOP_PX = 160
HEATMAP_PX = 300  # the learned map's plot, in the stepped figure
TARGET_TOP_PX = 50  # over the target's map: its title only
CURVES_PX = 150  # the loss and weight curves under it
CURVES_BOTTOM_PX = 120  # their axis title and a legend of two lines on a phone


def frame_name(step: int) -> str:
    """A frame's name: the number of updates done when its snapshot was taken."""
    return str(int(step))


def play_indices(
    run: TrainingRun,
    n_frames: int = display_policy.PLAY_FRAMES_UP_TO,
    clock_share: float = PLAY_CLOCK_SHARE,
) -> np.ndarray:
    """(f,) indices of the snapshots Play shows, first and last included, spaced so that each
    frame moves the probe's map by about the same amount (core.lab.map_moves).

    A run's map moves most in its first steps and then sits still (its held-out weight still
    creeps up): frames at even steps spend most of Play on a finished picture. Here a frame
    falls where the run's progress, (1 − clock_share) × the share of the map's total movement
    done + clock_share × the share of the steps done, crosses each of n_frames even marks; a
    step that moves the map by several marks is one frame (a step cannot be split).
    """
    steps = run.snapshot_steps
    moved = np.concatenate([[0.0], np.cumsum(lab.map_moves(run.probe_attention))])  # (k,)
    clock = (steps - steps[0]) / max(1, int(steps[-1] - steps[0]))  # (k,) 0 … 1
    map_share = moved / moved[-1] if moved[-1] > 0 else clock
    progress = clock_share * clock + (1 - clock_share) * map_share  # (k,) rising, 0 … 1
    marks = np.searchsorted(progress, np.linspace(0, 1, n_frames), side="left")
    last = len(steps) - 1
    return np.unique(np.concatenate([[0], np.minimum(marks, last), [last]]))


def frame_label(run: TrainingRun, step: int) -> str:
    """What the slider writes over a frame: its step and the loss the curve shows there."""
    total = run.settings.steps
    if step == 0:
        return f"step 0 of {total}: the random start · press ▶ Play"
    # loss[s − 1] is the loss of the batch update s learned from (taken before that update),
    # drawn at step s on the curve; three significant digits, as the log axis reads it
    return f"after step {step} of {total} · step {step}'s loss {run.loss[step - 1]:.3g}"


def title_on_top(text: str) -> dict:
    """A title on the figure's first line, above the Play/Pause buttons' line (plotly would centre
    it in the tall top margin)."""
    return {"text": text, "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 12}}


def step_controls(run: TrainingRun, indices: np.ndarray) -> dict:
    """Layout entries over a figure's plot: Play and Pause buttons, and a slider over the
    snapshots at `indices` that shows frame frame_name(step) at each, the first active. All in
    the browser: neither starts a rerun (st.plotly_chart asks for no events)."""
    no_tween = {"duration": 0}  # a heatmap cannot tween: each frame is drawn whole
    jump = {"mode": "immediate", "frame": {"duration": 0, "redraw": True}, "transition": no_tween}
    play = {"fromcurrent": True, "frame": {"duration": FRAME_MS, "redraw": True}}
    play["transition"] = no_tween
    # From the first snapshot (where a figure opens) or the last, "fromcurrent" plays the run
    # from step 0; from a paused step in between, it goes on from there.
    pause = {"mode": "immediate", "frame": {"duration": 0, "redraw": False}}
    return {
        "updatemenus": [
            {
                "type": "buttons",
                "direction": "left",
                "showactive": False,
                "x": 0,
                "xanchor": "left",
                "y": 1,
                "yanchor": "bottom",
                "pad": {"b": TOP_PX - 75},  # on the line under the title
                "buttons": [
                    {"label": "▶ Play", "method": "animate", "args": [None, play]},
                    {"label": "❚❚ Pause", "method": "animate", "args": [[None], pause]},
                ],
            }
        ],
        "sliders": [
            {
                "active": 0,
                "x": 0,
                "len": 1,
                "y": 1,
                "yanchor": "bottom",
                "pad": {"t": 0, "b": 10},
                "font": {"color": NO_LABELS},  # the step is written over the slider instead
                "bgcolor": RAIL_GREY,
                "bordercolor": RAIL_GREY,
                "tickcolor": RAIL_GREY,
                "ticklen": 3,
                "minorticklen": 0,
                "currentvalue": {  # in the colour of the step's line on the curves
                    "font": {"color": STEP_COLOUR, "size": 14},
                    "xanchor": "left",
                },
                "steps": [
                    {
                        "label": frame_label(run, step),
                        "method": "animate",
                        "args": [[frame_name(step)], jump],
                    }
                    for step in run.snapshot_steps[indices].tolist()
                ],
            }
        ],
    }


def loss_traces(run: TrainingRun) -> list[go.Scatter]:
    """The training loss at every step, on axes x2 and y2 (log), and the held-out weight on the
    target at every snapshot, on x2 and y3."""
    steps = np.arange(1, len(run.loss) + 1)  # loss[k] was measured before update k + 1
    return [
        go.Scatter(
            x=steps,
            y=np.where(run.loss > 0, run.loss, np.nan),  # a log axis cannot show 0: a gap
            name="training loss",
            xaxis="x2",
            yaxis="y2",
            line={"color": LOSS_COLOUR},
            hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>",
        ),
        go.Scatter(
            x=run.snapshot_steps,
            y=np.round(run.eval_mass, 4),
            name="weight on the right key (held out)",
            xaxis="x2",
            yaxis="y3",
            line={"color": MASS_COLOUR, "dash": "dot"},
            hovertemplate="step %{x}<br>weight on target %{y:.3f}<extra></extra>",
        ),
    ]


STEP_DOT_PX = 9  # the dot on the weight curve at the step shown


def step_marks(run: TrainingRun, index: int) -> list[dict]:
    """What moves on the curves at snapshot `index`, as layout shapes on axes x2 and y3: a
    vertical line at its step and a dot on the weight curve.

    Shapes, not scatter traces: plotly.js animates a frame's scatter traces by replotting only
    them, which left the heatmap and the loss curve undrawn at every frame of Play but the last
    (a heatmap cannot be animated, so its redraw waits for the end); a frame whose one trace is
    the heatmap is redrawn whole, shapes and all. tests/test_lab.py plays it in chromium.
    """
    step = int(run.snapshot_steps[index])
    mass = round(float(run.eval_mass[index]), 4)
    radius = STEP_DOT_PX / 2
    on_curves = {"xref": "x2", "yref": "y3"}
    line = {
        "type": "line",
        **on_curves,
        "x0": step,
        "x1": step,
        "y0": 0,
        "y1": 1.02,
        "line": {"color": STEP_COLOUR, "width": 2},
    }
    dot = {  # a circle of STEP_DOT_PX pixels centred on (step, mass), whatever the axes' scales
        "type": "circle",
        **on_curves,
        "xsizemode": "pixel",
        "ysizemode": "pixel",
        "xanchor": step,
        "yanchor": mass,
        "x0": -radius,
        "x1": radius,
        "y0": -radius,
        "y1": radius,
        "fillcolor": STEP_COLOUR,
        "line": {"width": 0},
    }
    return [line, dot]


def probe_attention(run: TrainingRun, index: int) -> go.Figure:
    """The probe sequence's (n, n) attention map at one snapshot."""
    labels = numbered(run.probe_tokens)
    step = int(run.snapshot_steps[index])
    return attention_heatmap(
        run.probe_attention[index], labels, labels, f"Learned attention, step {step}", height=420
    )


def learned_title(run: TrainingRun, index: int) -> str:
    """The stepped figure's title at snapshot `index`: the share of held-out tokens (not the probe
    rows the map draws) whose largest weight is on their target, after that many steps. One line:
    a second moved the map off the target's beside it, and at most ~44 characters fit a phone
    ("Attention at step 500: 99.9% held-out right" is 43)."""
    steps = int(run.snapshot_steps[index])
    share = float(run.eval_accuracy[index])
    return f"Attention at step {steps}: {percent(share)} held-out right"


def learning_steps(run: TrainingRun) -> go.Figure:
    """The probe's learned attention over the loss and weight curves, at the snapshots Play
    shows (play_indices).

    Opens on step 0, before training, so Play shows the learning before the finished map;
    frame frame_name(step) holds the (n, n) weights after that step and moves the step's line
    and dot on the curves (step_marks: layout shapes). Traces: 0 the map, 1 loss, 2 weight on
    the target.
    """
    indices = play_indices(run)
    base = probe_attention(run, 0)  # its heatmap trace and token axes, already escaped
    heatmap = base.data[0]
    x_axis, y_axis = base.layout.xaxis.to_plotly_json(), base.layout.yaxis.to_plotly_json()
    under_map = base.layout.margin.b  # the key labels and the axis title
    plot_px = HEATMAP_PX + under_map + CURVES_PX
    map_bottom = 1 - HEATMAP_PX / plot_px
    heatmap.update(colorbar={"y": 1, "yanchor": "top", "len": HEATMAP_PX / plot_px})
    frames = []
    for index in indices.tolist():
        step = int(run.snapshot_steps[index])
        # 4 decimals, as the map's own weights; float32 halves the frames' bytes and keeps them
        weights = np.round(run.probe_attention[index].astype(np.float64), 4).astype(np.float32)
        frames.append(
            go.Frame(
                name=frame_name(step),
                data=[go.Heatmap(z=weights)],
                traces=[0],
                # the text alone, so the place set once on the figure (clear of the toolbar)
                # stays; bold by hand, as Streamlit's theme sets the figure's own title
                layout={
                    "shapes": step_marks(run, index),
                    "title": {"text": f"<b>{learned_title(run, index)}</b>"},
                },
            )
        )
    layout = {
        # true of the step drawn, as each frame's title is: the figure opens on step 0
        "title": title_on_top(learned_title(run, 0)),
        "height": TOP_PX + plot_px + CURVES_BOTTOM_PX,
        "margin": {"l": base.layout.margin.l, "r": 75, "t": TOP_PX, "b": CURVES_BOTTOM_PX},
        "xaxis": {**x_axis, "domain": [0, 1]},
        "yaxis": {**y_axis, "domain": [map_bottom, 1]},
        "xaxis2": {
            "title": {"text": "training step"},
            "range": [0, max(1, len(run.loss))],
            "anchor": "y2",
        },
        # Powers of ten (10⁻⁴), not SI prefixes: plotly's default wrote 0.0001 as "100µ".
        "yaxis2": {
            "title": {"text": "loss (log)"},
            "type": "log",
            "exponentformat": "power",
            "domain": [0, CURVES_PX / plot_px],
            "anchor": "x2",
        },
        "yaxis3": {
            "title": {"text": "weight on target"},
            "overlaying": "y2",
            "side": "right",
            "anchor": "x2",
            "range": [0, 1.02],
            "tickvals": [0, 0.5, 1],  # its own round ticks, not the loss axis's grid
            "showgrid": False,
        },
        # under the curves' axis title (~50 px), in the plot's fractions
        "legend": {"orientation": "h", "y": -55 / plot_px, "x": 0},
        "shapes": step_marks(run, 0),
        **step_controls(run, indices),
    }
    return go.Figure(
        data=[heatmap, *loss_traces(run)],
        layout=layout,
        frames=frames,
    )


def hidden_keys_path(n: int) -> str:
    """SVG path of the staircase over the cells j > i (row i, key j) of an n × n heatmap."""
    corners = [(0.5, -0.5)]  # cell centres sit on whole numbers: edges are at ± 0.5
    for i in range(n - 1):
        corners += [(i + 0.5, i + 0.5), (i + 1.5, i + 0.5)]
    corners += [(n - 0.5, n - 1.5), (n - 0.5, -0.5)]
    return "M " + " L ".join(f"{x} {y}" for x, y in corners) + " Z"


def target_attention(run: TrainingRun, beside_steps: bool = False) -> go.Figure:
    """The (n, n) pattern that solves the probe: one 1 per row, on the target key.

    With the causal mask on, the keys a row may not see are greyed out: a target under the grey
    cannot be reached at all. beside_steps: the map at the height and size of learning_steps'
    map, so that the two, side by side, line up cell for cell once the page moves it down by
    TOP_PX − TARGET_TOP_PX, the lines the stepped figure has over its map.
    """
    labels = numbered(run.probe_tokens)
    title = "Target pattern (grey: hidden by the mask)" if run.settings.causal else "Target pattern"
    figure = attention_heatmap(run.target_pattern, labels, labels, title, height=420)
    if run.settings.causal:
        grey = {"color": "rgba(128, 128, 128, 0.6)", "width": 0}
        shape = {"type": "path", "path": hidden_keys_path(len(labels)), "line": grey}
        figure.layout.shapes = [{**shape, "fillcolor": "rgba(128, 128, 128, 0.6)"}]
    if beside_steps:
        figure.update_layout(
            title=title_on_top(title),
            height=TARGET_TOP_PX + HEATMAP_PX + figure.layout.margin.b,
            margin={"t": TARGET_TOP_PX},
        )
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
            "title": {"text": f"{bilinear_name(run)} on the embedding rows, step {step}"},
            "height": 460,
            "margin": {"l": side, "r": 10, "t": 50, "b": side},
            "xaxis": {**ticks, "title": {"text": "as a key"}, "tickangle": -60},
            "yaxis": {**ticks, "title": {"text": "as a query"}, "autorange": "reversed"},
        },
    )


def bilinear_name(run: TrainingRun) -> str:
    """What the bilinear map holds: W_qᵀW_k, over √d_head in a scaled run (core.lab.query_key_map)."""
    return "W_qᵀW_k/√d_head" if run.settings.scale else "W_qᵀW_k"


def bilinear_steps(run: TrainingRun) -> go.Figure:
    """bilinear_heatmap at the snapshots Play shows in learning_steps: opens on step 0; frame
    frame_name(step) holds the (m, m) map after that step, on the colour range of the whole run."""
    indices = play_indices(run)
    figure = bilinear_heatmap(run, 0)
    figure.frames = [
        go.Frame(
            name=frame_name(run.snapshot_steps[index]),
            data=[go.Heatmap(z=np.round(run.bilinear[index], 3).astype(np.float32))],
            traces=[0],
        )
        for index in indices.tolist()
    ]
    figure.update_layout(
        title=title_on_top(f"{bilinear_name(run)} on the embedding rows"),
        height=figure.layout.height + TOP_PX - figure.layout.margin.t,
        margin={"t": TOP_PX},
        **step_controls(run, indices),
    )
    return figure


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
