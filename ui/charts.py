"""Arrays -> plotly figures. Pure functions: no streamlit, no model, testable on their data.

Token axes are numeric (0..n-1) with the tokens as tick labels: a categorical axis would merge
the two "the" of a sentence into one row.
"""

from __future__ import annotations

import base64
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from ui.display_policy import (
    CELL_CHARS,
    HOVER_TOKENS_UP_TO,
    LABELLED_BARS,
    MAX_TICK_LABELS,
    WEIGHT_STEPS,
    scale_fitted,
)
from ui.escape import literal

COLORSCALE = "Viridis"  # perceptually even and readable on light and dark backgrounds
# Mid-tone categorical colours (heads, sentences) that stay readable on white and on dark.
QUALITATIVE_COLOURS = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880",
    "#FF97FF", "#FECB52", "#2CA02C", "#8C564B", "#BCBD22", "#7F7F7F", "#D62728", "#1F77B4",
)  # fmt: skip


# The lessons' small figures (bars, lines, grids on the learning path) share one frame.
SOFT, HARD = "#636EFA", "#EF553B"  # plotly's blue and red: readable on light and dark
LESSON_MARGIN = {"l": 10, "r": 10, "t": 50, "b": 10}


def lesson_layout(figure: go.Figure, title: str, height: int = 340, **axes: object) -> go.Figure:
    """A lesson figure's title, height and margins; axes: more layout (xaxis=…, barmode=…)."""
    figure.update_layout(title={"text": title}, height=height, margin=LESSON_MARGIN, **axes)
    return figure


def weight_bars(
    labels: Sequence[str], series: Mapping[str, np.ndarray], title: str, y_title: str = "weight"
) -> go.Figure:
    """Grouped bars, one group per label (key, token), one bar per series (soft/hard, …)."""
    colours = QUALITATIVE_COLOURS
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
    figure = lesson_layout(
        figure,
        title,
        barmode="group",
        yaxis={"title": {"text": y_title}, "rangemode": "tozero"},
        # above the bars: below them, at a fixed height, it covered the longer rotated labels
        # of a long sentence ("4:was" showed as "4:wa")
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return figure.update_layout(margin={**LESSON_MARGIN, "t": 100})  # title, and a legend of 2 rows


def plain_layout(figure: go.Figure, title: str, height: int) -> go.Figure:
    """The title, height, margins and legend of the positional and embedding figures; each
    further line of the title (a <br>) gets its own room above the plot."""
    figure.update_layout(
        title={"text": title},
        height=height,
        margin={"l": 10, "r": 10, "t": 60 + 18 * title.count("<br>"), "b": 10},
        legend={"font": {"size": 11}},
    )
    return figure


def token_ticks(tokens: Sequence[str], max_labels: int = MAX_TICK_LABELS) -> dict:
    """Axis settings that label positions 0..n-1 with their tokens (thinned for long inputs)."""
    n = len(tokens)
    step = max(1, int(np.ceil(n / max_labels)))
    positions = list(range(0, n, step))
    return {
        "tickmode": "array",
        "tickvals": positions,
        # plotly reads labels as a small HTML dialect: escape so a token is always shown as text
        "ticktext": [literal(tokens[i]) for i in positions],
    }


# Widths in px of one character in a 12 px tick label (Streamlit's Source Sans), rounded up so
# the estimate below errs on the wide side. Measured in chromium: "i" 3, "e" 5.5, "[" 4.5,
# "#" 7, "m" 10; a CJK character needs a full em.
_NARROW_CHARS = frozenset("ijlrtfI.,:;'|!()[]{} ")
_WIDE_CHARS = frozenset("mwMW@%")


def _char_px(char: str) -> float:
    if unicodedata.east_asian_width(char) in "WF":
        return 12.5
    if char in _NARROW_CHARS:
        return 4.5
    if char in _WIDE_CHARS:
        return 10.5
    return 7.5 if char.isupper() or char.isdigit() or char == "#" else 6.5


# Plotly's toolbar (and Streamlit's full-screen button in it) covers the top 28 px of a figure,
# on hover or after a tap, across its width: a title that starts higher is partly hidden under
# it. Measured in chromium: plotly sets an "auto" title's first line 15 px above the middle of
# the top margin, and one anchored at the container's top with pad p starts 3 px above p (one
# line) or 15 px above it (several lines).
TOOLBAR_PX = 32  # the toolbar's band and 4 px of air: a title starts below it
PLOTLY_TOP_PX = 100  # plotly's own margin.t when a figure sets none


def clear_of_toolbar(figure: go.Figure) -> go.Figure:
    """Move a figure's title down to start TOOLBAR_PX below the top, the margin and the height
    growing by as much: the plot, its legend and its subplot titles keep their size and their
    place under the title. A title placed some other way (on the paper) is left as it is; run
    again, it changes nothing."""
    title = figure.layout.title
    if not title.text:
        return figure
    top = figure.layout.margin.t
    top = PLOTLY_TOP_PX if top is None else top
    lift = 3 if "<br>" not in title.text else 15  # where the title's box starts above its pad
    if title.y is None:  # "auto": the first line in the middle of the top margin
        title_top = top / 2 - 15
    elif (title.yref, title.y, title.yanchor) == ("container", 1, "top"):
        title_top = (title.pad.t or 0) - lift
    else:
        return figure
    shift = math.ceil(TOOLBAR_PX - title_top)
    if shift <= 0:
        return figure
    # a few property writes: update_layout() would validate its whole argument once more
    title.update(y=1, yref="container", yanchor="top", pad={"t": TOOLBAR_PX + lift})
    figure.layout.margin.t = top + shift
    if figure.layout.height is not None:
        figure.layout.height += shift
    return figure


def label_margin(labels: Sequence[str], angle: float = 0.0, title: bool = True) -> int:
    """Margin in px that fits an axis's tick labels (rotated by `angle` degrees) and its title.

    Plotly's automargin draws a figure once, measures every tick label, and when the labels do
    not fit the margin it widens the margin and draws the whole figure a second time. Starting
    with margins that already fit skips that second draw: a new 32-token heatmap appears in
    ~60 ms less browser time (bench/bench_speed.py). automargin stays on, so a label wider than
    this estimate still shows in full, at the old cost.
    """
    widest = max((sum(_char_px(c) for c in label) for label in labels), default=0.0)
    slope = math.radians(abs(angle))
    # Upright labels need their width; rotated ones their width and 12 px height, projected.
    extent = widest * math.sin(slope) + 12 * math.cos(slope) if angle else widest
    # Measured in chromium: ticks and gap take ~12 px; a 14 px axis title with its standoff ~50.
    return math.ceil(extent + 14 + (50 if title else 0))


LABEL_PX = 14  # one tick label needs this much room along its axis to stay legible
UPRIGHT_LABELS_UP_TO_PX = 150  # key labels stay upright while they fit a phone-width plot (~200 px)


def subscripts(text: str) -> str:
    """'x_i·x_j' -> 'x<sub>i</sub>·x<sub>j</sub>': plotly shows underscores literally otherwise.

    For the code's own axis and colour-bar titles only; visitor text goes through literal().
    """
    return re.sub(r"_([A-Za-z0-9]+)", r"<sub>\1</sub>", text)


def fitted_scale_note(largest: float) -> str:
    """The words a heatmap adds to its title when its colours run up to `largest`, not 1."""
    return f"colour scale fitted: 0 to {largest:.3g}, not 0 to 1"


def upright_fits(labels: Sequence[str]) -> bool:
    """Whether tick labels fit side by side, unrotated, in a phone-width plot."""
    width = sum(sum(_char_px(c) for c in label) + 8 for label in labels)
    return width <= UPRIGHT_LABELS_UP_TO_PX


def _hover_text(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    """(n_rows, n_cols, 2) customdata: the query token and the key token of every cell."""
    grid = np.empty((len(rows), len(cols), 2), dtype=object)
    grid[:, :, 0] = np.asarray([literal(t) for t in rows], dtype=object)[:, None]
    grid[:, :, 1] = np.asarray([literal(t) for t in cols], dtype=object)[None, :]
    return grid


def attention_heatmap(
    attn_weights: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    title: str,
    zmax: float | None = 1.0,
    colorbar_title: str = "weight",
    height: int | None = None,
    masked: bool = False,
) -> go.Figure:
    """Heatmap of an (n_q, n_k) matrix; rows are queries (top to bottom), columns are keys.

    Over more than FITTED_SCALE_FROM keys a weight of 1/n_k is nearly black on a 0-1 scale, so
    zmax=1.0 becomes the largest weight shown, and the title says so (as on every heatmap).
    masked: the run had a causal mask: the keys after each query are drawn as hatched grey
    cells that say "masked" (causal_overlay), not as weights of 0.
    """
    n_q, n_k = attn_weights.shape
    values = np.round(attn_weights.astype(np.float64), 4)  # 4 decimals: same picture, lighter JSON
    if zmax == 1.0:
        zmax, title = _fitted_scale(values, title)
    hover_ok = max(n_q, n_k) <= HOVER_TOKENS_UP_TO
    shown_title = subscripts(colorbar_title)
    heatmap = go.Heatmap(
        z=values,
        x=np.arange(n_k),
        y=np.arange(n_q),
        zmin=0.0 if zmax is not None else None,
        zmax=zmax,
        colorscale=COLORSCALE,
        colorbar={"title": {"text": shown_title}},
        customdata=_hover_text(query_tokens, key_tokens) if hover_ok else None,
        hovertemplate=(
            "query %{y}: <b>%{customdata[0]}</b><br>key %{x}: <b>%{customdata[1]}</b>"
            "<br>" + shown_title + " %{z:.3f}<extra></extra>"
            if hover_ok
            else "query %{y} → key %{x}<br>" + shown_title + " %{z:.3f}<extra></extra>"
        ),
    )
    side = height or int(min(760, max(360, 18 * max(n_q, n_k) + 160)))
    # As many labels as the plot has room for (~14 px each): 64 labels on 550 px piled up.
    room = max(8, (side - 200) // LABEL_PX)
    x_ticks = token_ticks(key_tokens, max_labels=room)
    y_ticks = token_ticks(query_tokens, max_labels=room)
    x_labels = [key_tokens[i] for i in x_ticks["tickvals"]]
    angle = 0 if upright_fits(x_labels) else -60  # three short words need no rotation
    # The layout goes in as one dict: plotly validates it in one pass (update_layout() after
    # the fact parses every key path again: bench/RESULTS.md, Cold start and keystroke latency).
    layout = {
        "title": {"text": title},
        "height": side,
        "margin": {
            "l": label_margin([query_tokens[i] for i in y_ticks["tickvals"]]),
            "r": 10,
            "t": 50 + 20 * title.count("<br>"),  # a line more for each note under the title
            "b": label_margin(x_labels, angle=angle),
        },
        "xaxis": {
            **x_ticks,
            "title": {"text": "key (attended to)"},
            "side": "bottom",
            "tickangle": angle,
        },
        "yaxis": {**y_ticks, "title": {"text": "query (attending)"}, "autorange": "reversed"},
    }
    traces = [heatmap, causal_overlay(n_q, n_k)] if masked else [heatmap]
    return go.Figure(data=traces, layout=layout)


MASKED_GREY = "rgba(150, 150, 150, 0.92)"
MASKED_NOTE = "grey: masked, later keys a query may not see"


def causal_overlay(n_q: int, n_k: int) -> go.Heatmap:
    """A grey layer over the cells a causal mask hides (key j after query i), hovering as
    "masked": a decoder's future is not a weight of 0 that it chose, it is never looked at.
    Drawn above the weights (a trace of its own), so a head switch in the browser, which
    swaps trace 0's weights, leaves it in place."""
    rows, columns = np.indices((n_q, n_k))
    hidden = np.where(columns > rows, 1.0, np.nan)  # (n_q, n_k): 1 where masked, else a gap
    return go.Heatmap(
        z=hidden,
        x=np.arange(n_k),
        y=np.arange(n_q),
        colorscale=[[0.0, MASKED_GREY], [1.0, MASKED_GREY]],
        showscale=False,
        hoverongaps=False,
        hovertemplate="query %{y} → key %{x}: masked (causal)<extra></extra>",
    )


def fitted_scale(values: np.ndarray) -> tuple[float, str]:
    """(top of the colour scale, note) for attention weights: 1 and no note, or the largest
    weight when there are more than FITTED_SCALE_FROM keys, with a note that says so.

    A largest weight that is written 1 leaves the scale at 0 to 1, with no note: under a causal
    mask the first row gives itself exactly 1 in every head, and "fitted: 0 to 1, not 0 to 1"
    would say nothing."""
    if not scale_fitted(values.shape[-1]) or not values.size:
        return 1.0, ""
    largest = float(np.nanmax(values)) or 1.0
    if f"{largest:.3g}" == "1":  # as fitted_scale_note would write it
        return 1.0, ""
    return largest, fitted_scale_note(largest)


def _fitted_scale(values: np.ndarray, title: str) -> tuple[float, str]:
    """(top of the colour scale, title) by fitted_scale(), the note on a line of its own under
    the title (phones)."""
    zmax, note = fitted_scale(values)
    return zmax, f"{title}<br><sup>{note}</sup>" if note else title


def state_name(state: int) -> str:
    """Hidden state s as every page names it: 0 is the embedding output, and s ≥ 1 is the
    output of layer s − 1 (layers are numbered from 0, as on the sliders). The app never shows
    the number s itself: a learner reads "after layer 5", the layer's own number."""
    return "embedding output" if state == 0 else f"after layer {state - 1}"


# An axis over hidden states, short enough for a phone: "emb", then each layer's own number.
STATE_AXIS_TITLE = "after layer (emb: the embedding output)"


def state_axis(n_states: int) -> dict[str, object]:
    """Tick values 0 … n_states − 1 labelled emb, 0, 1, …: state s is "after layer s − 1"."""
    return {
        "tickvals": list(range(n_states)),
        "ticktext": ["emb", *(str(layer) for layer in range(n_states - 1))],
        "title": {"text": STATE_AXIS_TITLE},
    }


def head_title(layer: int, head: int) -> str:
    return f"Layer {layer}, head {head}: attention weights"


def packed_weights(weights: np.ndarray) -> str:
    """Weights in [0, 1] as drawn (4 decimals), for a figure's store of every head: base64 of
    little-endian uint16 counts of 1/WEIGHT_STEPS, row after row. 2 bytes a weight, and decoded
    by display.HEAD_SWITCH_JS only for the head that is asked for."""
    return packed_weights_each(np.asarray(weights)[None])[0]


def packed_weights_each(weights: np.ndarray) -> list[str]:
    """(k, n, m) weights -> packed_weights() of each of the k matrices, rounded in one pass
    (a figure that carries every head packs them all on every new sentence)."""
    shown = np.round(np.asarray(weights, dtype=np.float64), 4)  # (k, n, m)
    steps = np.rint(shown * WEIGHT_STEPS).astype("<u2")  # (k, n, m), exact at 4 decimals
    return [base64.b64encode(matrix.tobytes()).decode("ascii") for matrix in steps]


def frame_cell(
    figure: go.Figure,
    layer: int,
    head: int,
    colour: str,
    row: int | None = None,
    col: int | None = None,
) -> None:
    """Outline the cell (layer, head) of a layer × head grid drawn on numeric axes (x = head,
    y = layer), in a subplot's own axes when row and col are given."""
    figure.add_shape(
        type="rect",
        x0=head - 0.5,
        x1=head + 0.5,
        y0=layer - 0.5,
        y1=layer + 0.5,
        line={"color": colour, "width": 3},
        row=row,
        col=col,
    )


def matrix_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    title: str,
    x_title: str,
    colorscale: str = "RdBu",
    symmetric: bool = True,
    height: int | None = None,
) -> go.Figure:
    """Heatmap of any (n, m) matrix whose rows are tokens and columns are dimensions or values."""
    n, m = matrix.shape
    limit = float(np.nanmax(np.abs(matrix))) if symmetric and matrix.size else None
    heatmap = go.Heatmap(
        z=np.round(matrix.astype(np.float64), 4),
        x=np.arange(m),
        y=np.arange(n),
        colorscale=colorscale,
        zmid=0.0 if symmetric else None,
        zmin=-limit if limit else None,
        zmax=limit if limit else None,
        colorbar={"title": {"text": "value"}},
        hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>",
    )
    y_ticks = token_ticks(row_labels)
    layout = {
        "title": {"text": title},
        "height": height or int(min(600, max(260, 22 * n + 120))),
        "margin": {
            "l": label_margin([row_labels[i] for i in y_ticks["tickvals"]], title=False),
            "r": 10,
            "t": 50,
            "b": 50,  # the numbers 0..m-1 and the axis title
        },
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {**y_ticks, "autorange": "reversed"},
    }
    return go.Figure(data=[heatmap], layout=layout)


def luminance(rgb: str) -> float:
    """Relative luminance (WCAG) of an 'rgb(r, g, b)' colour, 0 = black, 1 = white."""
    channels = [float(c) / 255 for c in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def cell_number(value: float, decimals: int, compact: bool, max_chars: int = CELL_CHARS) -> str:
    """A cell's number, never "-0.00" (the rounding took the sign away). compact fits it in
    max_chars characters where it can, for narrow cells (phones): no leading zero (-0.62 ->
    -.62), then fewer decimals (-7.17 -> -7.2 -> -7)."""

    def written(places: int) -> str:
        text = f"{value:.{places}f}"
        if float(text) == 0:
            text = f"{0.0:.{places}f}"
        return text.replace("0.", ".", 1) if compact and abs(float(text)) < 1 else text

    text = written(decimals)
    while compact and len(text) > max_chars and decimals > 0:
        decimals -= 1
        text = written(decimals)
    return text


def cell_numbers(
    values: np.ndarray,
    colorscale: str,
    zmin: float,
    zmax: float,
    decimals: int = 2,
    size: int = 11,
    compact: bool = False,
    max_chars: int = CELL_CHARS,
) -> go.Scatter:
    """A text layer writing each cell's value on an (n, m) heatmap drawn at x = 0..m-1, y = 0..n-1.

    Black on light cells and white on dark ones, from the colour each cell is painted: plotly's
    own choice left grey numbers on mid-green Viridis cells. A fixed size keeps numbers legible
    (plotly shrinks them to the cell, down to ~6 px on narrow maps); callers annotate only maps
    whose cells have room. compact keeps every number to max_chars characters where it can,
    for narrow cells (_number).
    """
    values = np.asarray(values, dtype=np.float64)
    rows, cols = np.nonzero(np.isfinite(values))
    shown = values[rows, cols]
    span = (zmax - zmin) or 1.0
    where = np.clip((shown - zmin) / span, 0.0, 1.0)
    painted = plotly.colors.sample_colorscale(colorscale, where.tolist()) if len(where) else []
    colours = ["#000000" if luminance(c) > 0.3 else "#FFFFFF" for c in painted]
    return go.Scatter(
        x=cols,
        y=rows,
        mode="text",
        text=[cell_number(v, decimals, compact, max_chars) for v in shown],
        textfont={"color": colours, "size": size},
        hoverinfo="skip",
        showlegend=False,
    )


def annotate_heatmap(
    figure: go.Figure,
    decimals: int = 2,
    size: int = 11,
    compact: bool = False,
    max_chars: int = CELL_CHARS,
) -> go.Figure:
    """Add cell_numbers() over the figure's first heatmap, on the colour range it is drawn with."""
    heatmap = next(trace for trace in figure.data if trace.type == "heatmap")
    values = np.asarray(heatmap.z, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if not finite.size:
        return figure
    zmin, zmax = heatmap.zmin, heatmap.zmax
    if zmin is None or zmax is None:
        if heatmap.zmid is not None:  # a diverging scale centred on zmid, as plotly draws it
            reach = float(np.max(np.abs(finite - heatmap.zmid)))
            zmin, zmax = heatmap.zmid - reach, heatmap.zmid + reach
        else:
            zmin = float(finite.min()) if zmin is None else zmin
            zmax = float(finite.max()) if zmax is None else zmax
    scale = [[float(stop), colour] for stop, colour in heatmap.colorscale]
    figure.add_trace(cell_numbers(values, scale, zmin, zmax, decimals, size, compact, max_chars))
    return figure
