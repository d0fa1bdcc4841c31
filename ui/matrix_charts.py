"""Token matrices and grids that the learning path's pages share (0 by hand, 1 context, 2 Q, K, V).

Pure functions: arrays in, plotly figures, HTML figures (through ui/html_heatmap.py, for a
few tokens: no plotly.js to load) or plain strings out, no streamlit. User tokens reach plotly
escaped (plotly reads a small HTML dialect in labels) and markdown escaped, both through
ui.escape.literal. Token axes are numeric with token tick labels (charts.token_ticks). Long
inputs are cut to the first display_policy.DRAW_LIMIT tokens here, so a 512-token sentence never
sends a 512 x 512 heatmap to the browser; the page says so and offers the whole matrix as CSV.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui import charts, display_policy, html_heatmap
from ui.escape import literal

HIGHLIGHT = "#EF553B"  # the chosen token's bar: a warm red, visible on light and dark themes
OTHERS = "#636EFA"  # every other bar: plotly's blue


def annotate_small(figure: go.Figure, n_rows: int, n_cols: int) -> go.Figure:
    """Print each cell's value (2 decimals) on small heatmaps: the real numbers, not just colour."""
    if display_policy.matrix_form(n_rows, n_cols) == "numbers":
        # Eight columns share a third of the page: one decimal at 10 px fits, two did not.
        wide = n_cols > display_policy.DENSE_FROM
        charts.annotate_heatmap(figure, decimals=1 if wide else 2, size=10 if wide else 11)
    return figure


def shape_label(matrix: np.ndarray) -> str:
    """'(3 × 384)': the shape of the whole matrix, for a figure's title."""
    return "(" + " × ".join(str(side) for side in matrix.shape) + ")"


def limit_note(n_tokens: int, limit: int = display_policy.DRAW_LIMIT) -> str | None:
    """A sentence saying that only the first `limit` tokens are drawn, or None if all are."""
    if n_tokens <= limit:
        return None
    return (
        f"The sentence has {n_tokens} tokens: the figures draw the first {limit} (fewer for "
        "wide matrices; each title says so), with colour and axis ranges fitted to what is "
        "drawn. The CSV downloads hold every row."
    )


def drawn_title(title: str, matrix: np.ndarray, shown: int, unit: str = "rows") -> str:
    """'X (512 × 384) · first 16 rows drawn': the whole shape, and what part of it is drawn."""
    cut = f" · first {shown} {unit} drawn" if shown < matrix.shape[0] else ""
    return f"{title} {shape_label(matrix)}{cut}"


def _finite_or_gap(values: np.ndarray) -> np.ndarray:
    """float64 copy with ±inf turned into NaN, which plotly draws as a gap (a masked entry)."""
    out = np.array(values, dtype=np.float64)
    out[~np.isfinite(out)] = np.nan
    return out


def token_matrix(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    x_title: str,
    limit: int = display_policy.DRAW_LIMIT,
    columns: Sequence[str] | None = None,
) -> go.Figure:
    """Heatmap of an (n, m) matrix, one row per token, shape in the title.

    Draws the first `limit` rows, fewer when the matrix is wide, so that at most
    display_policy.CELL_BUDGET cells are sent (a 384-wide X has more columns than its figure has
    pixels anyway).
    columns: a name for each of the m columns (the toy's features), written under them.
    """
    rows_for_budget = max(8, display_policy.CELL_BUDGET // max(1, matrix.shape[1]))
    shown = min(len(tokens), limit, rows_for_budget)
    figure = charts.matrix_heatmap(
        _finite_or_gap(matrix[:shown]),
        list(tokens[:shown]),
        title=drawn_title(title, matrix, shown),
        x_title=x_title,
    )
    if columns is not None:
        figure.update_xaxes(**charts.token_ticks(list(columns)))
    return annotate_small(figure, shown, matrix.shape[1])


def pair_matrix(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    colorbar_title: str = "weight",
    zmax: float | None = 1.0,
    limit: int = display_policy.DRAW_LIMIT,
    height: int | None = None,
) -> go.Figure:
    """Heatmap of an (n, n) token-by-token matrix (first `limit` tokens), shape in the title.

    Masked entries (-inf scores) become gaps. zmax=None lets the colour range follow the data
    (for dot products, which are not bounded by 1). When the matrix is cut, its weights are
    spread over more keys than are drawn, so the colour range follows the drawn part too.
    """
    shown = min(len(tokens), limit)
    figure = charts.attention_heatmap(
        _finite_or_gap(matrix[:shown, :shown]),
        list(tokens[:shown]),
        list(tokens[:shown]),
        title=drawn_title(title, matrix, shown, unit="tokens"),
        zmax=zmax if shown == len(tokens) else None,
        colorbar_title=colorbar_title,
        height=height,
    )
    if shown > display_policy.SQUARE_TICKS:  # fewer labels, or they overlap in a half-width column
        figure.update_xaxes(charts.token_ticks(list(tokens[:shown]), display_policy.SQUARE_TICKS))
        figure.update_yaxes(charts.token_ticks(list(tokens[:shown]), display_policy.SQUARE_TICKS))
    return annotate_small(figure, shown, shown)


# The same colours as the plotly heatmaps above draw: Viridis for weights and scores, RdBu
# (red below zero, blue above) for a token's features, as plotly.py spells these scales out.
VIRIDIS_SCALE = plotly.colors.make_colorscale(list(plotly.colors.sequential.Viridis))
RDBU_SCALE = plotly.colors.make_colorscale(list(plotly.colors.diverging.RdBu))


def _centred_range(matrix: np.ndarray) -> tuple[float, float]:
    """A diverging scale's ends, centred on 0: the larger side sets both (matrix_heatmap's)."""
    reach = float(np.max(np.abs(matrix))) or 1.0
    return -reach, reach


def grid_decimals(n_columns: int) -> int:
    """Decimals a grid's cells print: one past six columns, where two no longer fit a cell of a
    matrix sharing the page's width with two others (as annotate_small prints them)."""
    return 1 if n_columns > display_policy.DENSE_FROM else 2


def pair_grid(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    name: str,
    colorbar_title: str = "weight",
    zmax: float | None = 1.0,
    decimals: int | None = None,
    axis_titles: tuple[str, str] = ("query", "key"),
    shape_in_title: bool = True,
) -> html_heatmap.HtmlFigure:
    """pair_matrix's picture as HTML: every number written in, or one image of its cells, as
    display_policy.matrix_form says.

    Viridis from 0 to zmax, or over the finite values' own range when zmax is None (scores);
    a masked (-inf) score is an empty cell. No plotly.js to load for it. shape_in_title: "(n × n)"
    after the title, as pair_matrix writes it (information_flow_charts.mixing_heatmap does not).
    """
    finite = matrix[np.isfinite(matrix)]
    value_range = (
        (0.0, zmax)
        if zmax is not None
        else (float(finite.min()), float(finite.max()))
        if finite.size
        else (0.0, 1.0)
    )
    # weights or shares across more columns than two decimals fit: '.07', not '0.1'
    fractions = (
        decimals is None
        and grid_decimals(matrix.shape[1]) < 2
        and bool(finite.size)
        and finite.min() >= 0.0
        and finite.max() <= 1.0
    )
    return html_heatmap.value_grid(
        matrix,
        tokens,
        tokens,
        title=f"{title} {shape_label(matrix)}" if shape_in_title else title,
        scale=VIRIDIS_SCALE,
        value_range=value_range,
        decimals=grid_decimals(matrix.shape[1]) if decimals is None else decimals,
        bar_title=colorbar_title,
        axis_titles=axis_titles,
        name=name,
        fractions=fractions,
    )


def token_grid(
    matrix: np.ndarray,
    tokens: Sequence[str],
    columns: Sequence[str],
    title: str,
    name: str,
    x_title: str = "feature",
) -> html_heatmap.HtmlFigure:
    """token_matrix's picture as HTML: every number written in, or one image of its cells, as
    display_policy.matrix_form says. One row per token, one column per dimension or named
    feature, RdBu centred on 0 as charts.matrix_heatmap draws it."""
    return html_heatmap.value_grid(
        matrix,
        tokens,
        columns,
        title=f"{title} {shape_label(matrix)}",
        scale=RDBU_SCALE,
        value_range=_centred_range(matrix),
        decimals=grid_decimals(matrix.shape[1]),
        bar_title="value",
        axis_titles=("token", x_title),
        name=name,
    )


def token_strip(
    matrix: np.ndarray, tokens: Sequence[str], title: str, name: str, x_title: str
) -> html_heatmap.HtmlFigure:
    """token_matrix's picture of a few tokens' wide vectors (matrix_form's "strip"), as one HTML image:
    a band per token, a pixel per dimension, RdBu centred on 0 as charts.matrix_heatmap."""
    return html_heatmap.value_strip(
        matrix,
        tokens,
        title=f"{title} {shape_label(matrix)}",
        scale=RDBU_SCALE,
        value_range=_centred_range(matrix),
        bar_title="value",
        column_title=x_title,
        name=name,
    )


def highlight_bars(
    figure: go.Figure,
    values: np.ndarray,
    tokens: Sequence[str],
    highlight: int | None,
    row: int,
    col: int,
    name: str,
) -> None:
    """Add one bar per token to a subplot, the highlighted token in HIGHLIGHT."""
    colours = [HIGHLIGHT if i == highlight else OTHERS for i in range(len(values))]
    figure.add_trace(
        go.Bar(
            x=np.arange(len(values)),
            y=_finite_or_gap(values),
            marker_color=colours,
            customdata=np.asarray([literal(t) for t in tokens], dtype=object),
            hovertemplate="%{x}: <b>%{customdata}</b><br>" + name + " %{y:.3f}<extra></extra>",
            name=name,
            showlegend=False,
        ),
        row=row,
        col=col,
    )
    figure.update_xaxes(charts.token_ticks(tokens), row=row, col=col)


def shared_word_weights(
    word: str,
    weights_a: np.ndarray,
    tokens_a: Sequence[str],
    index_a: int,
    weights_b: np.ndarray,
    tokens_b: Sequence[str],
    index_b: int,
    limit: int = display_policy.DRAW_LIMIT,
) -> go.Figure:
    """Two bar charts: the softmax row of `word` in sentence A and in sentence B (first `limit`)."""
    shown_a, shown_b = min(len(tokens_a), limit), min(len(tokens_b), limit)
    figure = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        subplot_titles=(f"in sentence A (row {index_a})", f"in sentence B (row {index_b})"),
    )
    highlight_bars(figure, weights_a[:shown_a], tokens_a[:shown_a], index_a, 1, 1, "weight")
    highlight_bars(figure, weights_b[:shown_b], tokens_b[:shown_b], index_b, 1, 2, "weight")
    # No fixed [0, 1] range: over a long sentence every weight is small and would vanish.
    figure.update_yaxes(rangemode="tozero")
    figure.update_yaxes(title_text="softmax weight", row=1, col=1)
    figure.update_xaxes(title_text="token of the sentence", tickangle=-45)
    figure.update_layout(
        title={"text": f"Where “{literal(word)}” looks, in each sentence"},
        height=360,
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
    )
    return figure


def shared_word_bars(
    word: str,
    weights: np.ndarray,
    tokens: Sequence[str],
    index: int,
    sentence_name: str,
    largest: float,
    name: str,
) -> html_heatmap.HtmlFigure:
    """One sentence's half of shared_word_weights as HTML bar rows (for a sentence of at most
    display_policy.BARS_UP_TO tokens): the softmax row of `word`, its own bar in HIGHLIGHT.
    largest: the larger of the two rows' largest weights, so both halves share one scale (the
    plotly figure's shared y axis)."""
    return html_heatmap.bar_rows(
        list(tokens),
        {"softmax weight": weights},
        f"Where “{literal(word)}” looks in sentence {sentence_name} (row {index})",
        "softmax weight",
        [OTHERS],
        name=name,
        highlight=index,
        highlight_colour=HIGHLIGHT,
        largest=largest,
    )
