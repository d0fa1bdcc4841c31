"""Figures for page 2b, positional encoding (core/positional.py). Pure functions.

Position axes are numeric. User text (tokens, sentences) reaches plotly only through
escape.literal. The word-order section's grid is HTML (ui/html_heatmap.py), which escapes the
tokens itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from core.positional import PermutationResult
from ui import html_heatmap
from ui.charts import (
    QUALITATIVE_COLOURS,
    plain_layout,
)
from ui.display_policy import HEATMAP_AXIS_UP_TO
from ui.escape import literal


def thin_rows(n_rows: int, max_rows: int = HEATMAP_AXIS_UP_TO) -> np.ndarray:
    """Row indices 0, k, 2k, … so that at most max_rows remain (all rows if already few)."""
    step = max(1, int(np.ceil(n_rows / max_rows)))
    return np.arange(0, n_rows, step)


def position_heatmap(
    matrix: np.ndarray,
    title: str,
    x_title: str = "dimension",
    colorbar_title: str = "value",
    symmetric: bool = True,
    colorscale: str = "RdBu",
    max_rows: int = HEATMAP_AXIS_UP_TO,
    height: int = 420,
) -> go.Figure:
    """Heatmap of an (n_positions, m) matrix: position down the y axis, m columns across."""
    rows = thin_rows(matrix.shape[0], max_rows)
    values = np.asarray(matrix, dtype=np.float64)[rows]
    # The 99th percentile, not the maximum: one outlier row (BERT's position 0) would otherwise
    # wash every other cell out to white. Cells beyond it show the end colour.
    limit = float(np.percentile(np.abs(values), 99)) if symmetric and values.size else None
    fig = go.Figure(
        go.Heatmap(
            z=np.round(values, 3),
            x=np.arange(matrix.shape[1]),
            y=rows,
            colorscale=colorscale,
            zmid=0.0 if symmetric else None,
            zmin=-limit if limit else None,
            zmax=limit if limit else None,
            colorbar={"title": {"text": colorbar_title}},
            hovertemplate=f"position %{{y}}, {x_title} %{{x}}: %{{z:.3f}}<extra></extra>",
        )
    )
    fig.update_yaxes(title_text="position", autorange="reversed")
    fig.update_xaxes(title_text=x_title)
    return plain_layout(fig, title, height)


def curves(
    x: np.ndarray,
    lines: Mapping[str, np.ndarray],
    title: str,
    x_title: str,
    y_title: str,
    steps: Sequence[str] = (),
    dashed: Sequence[str] = (),
    height: int = 340,
) -> go.Figure:
    """Several named curves over the same x; names in `steps` are drawn as steps (bits)."""
    fig = go.Figure()
    for name, values in lines.items():
        fig.add_trace(
            go.Scatter(
                x=x,
                y=np.round(np.asarray(values, dtype=np.float64), 4),
                name=literal(name),
                mode="lines",
                line={
                    "shape": "hv" if name in steps else "linear",
                    "dash": "dot" if name in dashed else "solid",
                },
            )
        )
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    return plain_layout(fig, title, height)


def dimension_curves(encoding: np.ndarray, dims: Sequence[int], title: str) -> go.Figure:
    """Chosen columns of an (n_positions, d_model) encoding as curves over position."""
    n, d_model = encoding.shape
    lines = {f"dim {d}": encoding[:, d] for d in dims if 0 <= d < d_model}
    # the legend in rows under the plot (two entries a row in a narrow column): beside the plot it
    # took a third of the column, and above it its second row climbed over the title
    legend_rows = -(-len(lines) // 2)
    figure = curves(
        np.arange(n), lines, title, "position p", "value", height=290 + 22 * legend_rows
    )
    figure.update_layout(
        legend={"orientation": "h", "x": 0, "yref": "container", "y": 0, "yanchor": "bottom"},
        margin={"b": 50 + 22 * legend_rows},  # the axis title, then the legend's rows
    )
    return figure


def bit_figure(bits: np.ndarray, smooth: np.ndarray, bit: int) -> go.Figure:
    """Bit j of every position (a square wave) and the sinusoid with the same period 2^(j+1)."""
    lines = {f"bit {bit} of p": bits, f"sinusoid, period {2 ** (bit + 1)}": smooth}
    title = f"Bit {bit} and a sinusoid of period {2 ** (bit + 1)}"
    fig = curves(
        np.arange(len(bits)),
        lines,
        title,
        "position p",
        "value",
        steps=(f"bit {bit} of p",),
        dashed=(f"sinusoid, period {2 ** (bit + 1)}",),
    )
    # Four periods fill the width; more would draw a solid block (zoom out to see the rest).
    shown = min(len(bits), max(16, 4 * 2 ** (bit + 1)))
    fig.update_xaxes(range=[-0.5, shown - 0.5])
    fig.update_traces(line={"width": 3}, selector={"name": f"sinusoid, period {2 ** (bit + 1)}"})
    return fig


def distance_figure(profiles: Mapping[str, np.ndarray], title: str) -> go.Figure:
    """Mean similarity at each distance |p - q|, divided by its value at distance 0."""
    lines = {}
    for name, means in profiles.items():
        means = np.asarray(means, dtype=np.float64)
        lines[name] = means / means[0] if means[0] else means
    longest = max(len(v) for v in lines.values())
    fig = go.Figure()
    for name, values in lines.items():
        fig.add_trace(
            go.Scatter(
                x=np.arange(len(values)), y=np.round(values, 4), name=literal(name), mode="lines"
            )
        )
    fig.update_xaxes(title_text="distance |p − q|", range=[0, longest - 1])
    fig.update_yaxes(title_text="mean similarity ÷ similarity at distance 0")
    return plain_layout(fig, title, 340)


def layer_diff_bars(
    diffs: Mapping[str, np.ndarray], title: str, name: str
) -> html_heatmap.HtmlFigure:
    """Max |Δ| per layer (label -> (L,) values) as HTML bar rows, one row per layer: log
    lengths, since a rounding error (~1e-7) and a real difference (~0.5) must both show; the
    floor is a decade under the smallest value, so the shortest bar is still a bar."""
    stacked = np.stack([np.asarray(v, dtype=np.float64) for v in diffs.values()])  # (series, L)
    smallest = float(stacked[stacked > 0].min()) if (stacked > 0).any() else 1e-12
    floor = 10.0 ** (np.floor(np.log10(smallest)) - 1)
    return html_heatmap.bar_rows(
        [f"layer {layer}" for layer in range(stacked.shape[1])],
        diffs,
        title,
        "max |Δ| over heads and cells",
        QUALITATIVE_COLOURS[: len(diffs)],  # plotly's first colours, as its grouped bars had
        name=name,
        log_floor=floor,
    )


def histograms(
    samples: Mapping[str, np.ndarray],
    title: str,
    x_title: str,
    height: int = 360,
    x_range: tuple[float, float] = (-1.0, 1.0),
    n_bins: int = 80,
) -> go.Figure:
    """Overlaid density histograms, binned here so the browser gets bars, not every sample."""
    edges = np.linspace(*x_range, n_bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure()
    for name, values in samples.items():
        density, _ = np.histogram(values, bins=edges, density=True)
        fig.add_trace(
            go.Scatter(
                x=np.round(centres, 4),
                y=np.round(density, 4),
                name=literal(name),
                mode="lines",
                line={"shape": "hvh"},
                fill="tozeroy",
                opacity=0.6,
            )
        )
    fig.update_xaxes(title_text=x_title, range=list(x_range))
    fig.update_yaxes(title_text="density")
    return plain_layout(fig, title, height)


def permutation_grid(
    result: PermutationResult, put_back: bool, label: str, layer: int, head: int, every_head: bool
) -> html_heatmap.HtmlFigure | html_heatmap.HeadGrid:
    """One head's weights in the word-order experiment, as HTML (html_heatmap.attention_grid):
    the original run's, or the shuffled run's put back in the original order, with that head's
    max |Δ| to the original on the line under the title. every_head: the figure carries all
    heads, for the sliders to switch in the browser."""
    matrix = result.unshuffled if put_back else result.original  # (L, H, n, n)
    what = "shuffled, put back" if put_back else "original"

    def title_of(at_layer: int, at_head: int) -> str:
        return f"{label}: {what} (L{at_layer} H{at_head})"

    def difference_of(at_layer: int, at_head: int) -> str:
        return f"max |Δ| to the original: {result.head_diff(at_layer, at_head):.1e}"

    return html_heatmap.attention_grid(
        matrix,
        result.tokens,
        layer,
        head,
        every_head,
        title_of=title_of,
        note_of=difference_of if put_back else None,
        name=f"pos_perm_{label}_{what}",
    )
