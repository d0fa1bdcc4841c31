"""Figures for page 8, embedding projections (core/embeddings.py). Pure functions.

Position and token axes are numeric. User text (tokens, sentences) reaches plotly only through
escape.literal: plotly renders a few tags in hover text, and a sentence is not markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from ui.charts import (
    QUALITATIVE_COLOURS,
    STATE_AXIS_TITLE,
    annotate_heatmap,
    plain_layout,
    state_name,
)
from ui.display_policy import NUMBERS_UP_TO, SENTENCE_LABEL_CHARS
from ui.escape import literal

SENTENCE_COLOURS = QUALITATIVE_COLOURS[:10]
SYMBOLS_2D = ("circle", "square", "diamond", "triangle-up")
SYMBOLS_3D = ("circle", "square", "diamond", "cross")
FAINT = "rgba(150, 150, 150, 0.35)"  # background points: visible in both themes, never dominant
# Long sentence legends beside a half-width plot squeeze it to a strip: put them underneath.
LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.15, "x": 0, "font": {"size": 11}}


def sentence_label(index: int, sentence: str, max_chars: int = SENTENCE_LABEL_CHARS) -> str:
    """'s1 · I sat on the bank …' (escaped, shortened) for legends and hovers."""
    short = sentence if len(sentence) <= max_chars else sentence[: max_chars - 1] + "…"
    return f"s{index + 1} · {literal(short)}"


# ---------------------------------------------------------------------------------------------
# Positional encoding page
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Embedding projections page
# ---------------------------------------------------------------------------------------------


def _scatter(coords: np.ndarray, **kwargs: object) -> go.Scatter | go.Scatter3d:
    """A 2-D or 3-D scatter, depending on the number of columns of coords (m, 2|3)."""
    coords = np.round(np.asarray(coords, dtype=np.float64), 3)
    if coords.shape[1] == 3:
        marker = dict(kwargs.pop("marker", {}))
        if "size" in marker:  # 3-D markers draw larger
            size = marker["size"]
            marker["size"] = (
                [max(2, int(v * 0.6)) for v in size]
                if isinstance(size, list)
                else max(2, int(size * 0.6))
            )
        if marker.get("symbol") in SYMBOLS_2D and marker.get("symbol") not in SYMBOLS_3D:
            marker["symbol"] = "circle"
        return go.Scatter3d(x=coords[:, 0], y=coords[:, 1], z=coords[:, 2], marker=marker, **kwargs)
    return go.Scatter(x=coords[:, 0], y=coords[:, 1], **kwargs)


def _axes(fig: go.Figure, n_components: int, method: str) -> None:
    names = [f"{method} {i + 1}" for i in range(n_components)]
    if n_components == 3:
        fig.update_layout(
            scene={
                "xaxis": {"title": {"text": names[0]}},
                "yaxis": {"title": {"text": names[1]}},
                "zaxis": {"title": {"text": names[2]}},
            }
        )
    else:
        fig.update_xaxes(title_text=names[0])
        fig.update_yaxes(title_text=names[1])


def sense_names(n_sentences: int, senses: Sequence[str | None] | None) -> list[str]:
    """Each sentence's group as the figures name it (escaped): the sense its sentence was written
    for, or its number ('s7') where the page knows none."""
    senses = senses or [None] * n_sentences
    return [literal(sense) if sense else f"s{s + 1}" for s, sense in enumerate(senses)]


def group_colours(names: Sequence[str]) -> dict[str, str]:
    """One colour per distinct name, in order of first appearance."""
    distinct = list(dict.fromkeys(names))
    return {
        name: QUALITATIVE_COLOURS[k % len(QUALITATIVE_COLOURS)] for k, name in enumerate(distinct)
    }


def occurrence_labels(
    chosen: np.ndarray,
    tokens: Sequence[str],
    sentence: np.ndarray,
    senses: Sequence[str | None] | None,
) -> list[str]:
    """'bank · river (s1)' for each chosen point (escaped): its word, its sentence's sense and
    the sentence's number (two river banks stay apart)."""
    names = sense_names(int(sentence.max()) + 1 if len(sentence) else 0, senses)
    labels = []
    for i in np.asarray(chosen, dtype=np.int64):
        s = int(sentence[i])
        known = names[s] != f"s{s + 1}"
        labels.append(
            f"{literal(tokens[i])} · " + (f"{names[s]} (s{s + 1})" if known else f"s{s + 1}")
        )
    return labels


def projection_figure(
    coords: np.ndarray,
    tokens: Sequence[str],
    sentence: np.ndarray,
    sentences: Sequence[str],
    highlight: np.ndarray,
    title: str,
    method: str = "PCA",
    senses: Sequence[str | None] | None = None,
    one_point: bool = False,
    height: int = 520,
) -> go.Figure:
    """Every token as a point (m, 2|3). The highlighted ones (one word's occurrences) are big,
    coloured and labelled by their sentence's sense (or number), one legend entry per sense;
    every other token is one faint trace for orientation (its hover names the sentence).

    senses: per sentence, the sense it was written for, or None. one_point: the highlighted
    points coincide (the static table): the word is written once, not once per occurrence.
    """
    fig = go.Figure()
    is_highlight = np.zeros(len(tokens), dtype=bool)
    is_highlight[np.asarray(highlight, dtype=np.int64)] = True
    labels = [sentence_label(s, text) for s, text in enumerate(sentences)]
    names = sense_names(len(sentences), senses)
    rest = np.flatnonzero(~is_highlight)
    if rest.size:
        fig.add_trace(
            _scatter(
                coords[rest],
                mode="markers",
                marker={"size": 6, "color": FAINT},
                hovertext=[f"{literal(tokens[i])}<br>{labels[sentence[i]]}" for i in rest],
                hoverinfo="text",
                name="other tokens",
            )
        )
    chosen = np.asarray(highlight, dtype=np.int64)
    colours = group_colours([names[sentence[i]] for i in chosen])
    for rank, (name, hue) in enumerate(colours.items()):
        rows = np.array([i for i in chosen if names[sentence[i]] == name], dtype=np.int64)
        word = literal(tokens[rows[0]])
        # one label per group, on its first point: a sense's points lie close together, and
        # labels on each piled up (the hover names every point)
        label = word if one_point else name
        text = [label if k == 0 and (rank == 0 or not one_point) else "" for k in range(len(rows))]
        fig.add_trace(
            _scatter(
                coords[rows],
                mode="markers+text",
                text=text,
                # two senses' labels, above one group and below the next, stay apart when the
                # groups lie close; the static table's one word keeps the theme's text colour
                textposition="bottom center" if rank % 2 else "top center",
                textfont={"size": 13, **({} if one_point else {"color": hue})},
                hovertext=[
                    f"<b>{literal(tokens[i])}</b> · {name}<br>{labels[sentence[i]]}" for i in rows
                ],
                hoverinfo="text",
                name=f"{word} · {name}",
                marker={
                    "size": 15,
                    "color": hue,
                    "symbol": "star" if coords.shape[1] == 2 else "diamond",
                    "line": {"width": 1, "color": "rgba(40,40,40,0.8)"},
                },
            )
        )
    _axes(fig, coords.shape[1], method)
    plain_layout(fig, title, height)
    fig.update_layout(legend=LEGEND_BELOW)
    return fig


def state_marks(n_states: int) -> list[str]:
    """Each hidden state's short mark on a path, as the state axes write it: emb, 0, 1, …"""
    return ["emb", *(str(layer) for layer in range(n_states - 1))]


# Two paths' marks of one state closer than this share of the paths' extent print over each
# other: a mark is ~30 px wide on a ~700 px plot (and a model without position rows starts every
# occurrence of a word at one point). Hover still names every marker's state.
MARK_APART = 0.05


def _marks_apart(paths: np.ndarray, marks: Sequence[str]) -> list[list[str]]:
    """paths (L + 1, k, c): k paths' points at each state. Each path's marks, a mark left blank
    where an earlier path already wrote the same state's mark at (nearly) the same point."""
    n_states, k, _ = paths.shape
    extent = float(np.ptp(paths.reshape(-1, paths.shape[-1]), axis=0).max()) or 1.0
    shown = [list(marks) for _ in range(k)]
    for state in range(n_states):
        written: list[np.ndarray] = []  # points whose mark for this state is on the figure
        for path in range(k):
            point = paths[state, path]  # (c,)
            if any(np.abs(point - other).max() <= MARK_APART * extent for other in written):
                shown[path][state] = ""
            else:
                written.append(point)
    return shown


def trajectory_figure(
    coords: np.ndarray,
    chosen: np.ndarray,
    tokens: Sequence[str],
    sentence: np.ndarray,
    sentences: Sequence[str],
    background_layer: int,
    title: str,
    senses: Sequence[str | None] | None = None,
    height: int = 560,
) -> go.Figure:
    """(L + 1, m, 2|3) coordinates: the chosen points' paths over the states, coloured by their
    sentence's sense (or number), as projection_figure colours them.

    The states read in order on every path: each marker carries its state's mark (emb, 0, 1, …),
    markers grow (and in 2-D darken) from the embedding output to the last layer, and in 2-D each marker
    after the first is an arrowhead pointing the way the path goes."""
    n_states, _, n_components = coords.shape
    labels = [sentence_label(s, text) for s, text in enumerate(sentences)]
    names = sense_names(len(sentences), senses)
    colours = group_colours([names[sentence[i]] for i in np.asarray(chosen, dtype=np.int64)])
    path_names = occurrence_labels(chosen, tokens, sentence, senses)
    marks = state_marks(n_states)
    ramp = np.linspace(0.0, 1.0, n_states)  # (L + 1,) 0 at the embedding output, 1 at the end
    fig = go.Figure()
    background = coords[background_layer]  # (m, c) every token at one state, for orientation
    fig.add_trace(
        _scatter(
            background,
            mode="markers",
            marker={"size": 5, "color": FAINT},
            hovertext=[f"{literal(t)}, {state_name(background_layer)}" for t in tokens],
            hoverinfo="text",
            name=f"all tokens, {state_name(background_layer)}",
        )
    )
    path_marks = _marks_apart(coords[:, np.asarray(chosen, dtype=np.int64)], marks)
    for rank, i in enumerate(np.asarray(chosen, dtype=np.int64)):
        s = int(sentence[i])
        hue = colours[names[s]]
        marker: dict[str, object] = {
            "size": np.round(7 + 7 * ramp, 1).tolist(),
            "color": hue,
            "line": {"width": 1, "color": "rgba(40,40,40,0.8)"},
        }
        if n_components == 2:  # Scatter3d has no arrowheads, nor an opacity per marker
            marker["opacity"] = np.round(0.45 + 0.55 * ramp, 2).tolist()
            marker["symbol"] = ["circle", *["arrow"] * (n_states - 1)]
            marker["angleref"] = "previous"
        fig.add_trace(
            _scatter(
                coords[:, i],  # (L + 1, c)
                mode="lines+markers+text",
                text=path_marks[rank],
                textposition="top center",
                textfont={"size": 10, "color": hue},
                line={"color": hue, "width": 2},
                marker=marker,
                hovertext=[
                    f"<b>{literal(tokens[i])}</b> · {names[s]}, {state_name(h)}<br>{labels[s]}"
                    for h in range(n_states)
                ],
                hoverinfo="text",
                name=path_names[rank],
            )
        )
    _axes(fig, n_components, "PCA")
    plain_layout(fig, title, height)
    fig.update_layout(legend=LEGEND_BELOW)
    return fig


def comparison_figure(
    coords_as_set: np.ndarray,
    coords_other: np.ndarray,
    chosen: np.ndarray,
    tokens: Sequence[str],
    names: tuple[str, str],
    title: str,
    height: int = 500,
) -> go.Figure:
    """The same tokens under two settings (m, 2) each; chosen tokens joined by an arrow."""
    fig = go.Figure()
    for coords, name, symbol, hue in (
        (coords_as_set, names[0], "circle", SENTENCE_COLOURS[0]),
        (coords_other, names[1], "x", SENTENCE_COLOURS[4]),
    ):
        fig.add_trace(
            go.Scatter(
                x=np.round(coords[:, 0], 3),
                y=np.round(coords[:, 1], 3),
                mode="markers",
                marker={"size": 6, "symbol": symbol, "opacity": 0.7, "color": hue},
                hovertext=[f"{literal(t)} · {literal(name)}" for t in tokens],
                hoverinfo="text",
                name=literal(name),
            )
        )
    for i in np.asarray(chosen, dtype=np.int64):
        fig.add_annotation(
            x=float(coords_other[i, 0]),
            y=float(coords_other[i, 1]),
            ax=float(coords_as_set[i, 0]),
            ay=float(coords_as_set[i, 1]),
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=3,
            arrowwidth=2,
            arrowcolor="#EF553B",
            text="",
        )
    fig.update_xaxes(title_text="PCA 1")
    fig.update_yaxes(title_text="PCA 2")
    return plain_layout(fig, title, height)


def cosine_heatmap(
    table: np.ndarray, labels: Sequence[str], title: str, height: int | None = None
) -> go.Figure:
    """(k, k) cosine table, labels on both numeric axes; colours span [min(table), 1].

    Cosines of one word in several contexts are all high; a -1..1 scale would paint them one
    colour, so the scale starts at the smallest value (rounded down to 0.1) instead.
    """
    k = table.shape[0]
    values = np.round(np.asarray(table, dtype=np.float64), 3)
    safe = [literal(label) for label in labels]
    ticks = {"tickmode": "array", "tickvals": list(range(k)), "ticktext": safe}
    low = float(np.floor(values.min() * 10) / 10) if values.size else 0.0
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=np.arange(k),
            y=np.arange(k),
            zmin=min(low, 0.9),
            zmax=1.0,
            colorscale="Viridis",
            customdata=_pair_labels(safe),
            colorbar={"title": {"text": "cosine"}},
            hovertemplate="%{customdata[0]} vs %{customdata[1]}: %{z:.3f}<extra></extra>",
        )
    )
    if k <= NUMBERS_UP_TO:
        annotate_heatmap(fig)  # black or white by the cell's colour (grey sat on mid-green)
    fig.update_xaxes(**ticks, tickangle=-40)
    fig.update_yaxes(**ticks, autorange="reversed")
    return plain_layout(fig, title, height or int(min(560, 60 * k + 160)))


def _pair_labels(labels: Sequence[str]) -> np.ndarray:
    """(k, k, 2) customdata: the row label and the column label of every cell."""
    grid = np.empty((len(labels), len(labels), 2), dtype=object)
    grid[:, :, 0] = np.asarray(labels, dtype=object)[:, None]
    grid[:, :, 1] = np.asarray(labels, dtype=object)[None, :]
    return grid


def layer_lines(
    values: Mapping[str, np.ndarray],
    x_labels: Sequence[str],
    title: str,
    y_title: str,
    height: int = 320,
    x_title: str = STATE_AXIS_TITLE,
) -> go.Figure:
    """Lines over the stages: the static table, then the hidden states (x is numeric with the
    stage names as ticks: "static", "emb", then each layer's number, as charts.state_axis)."""
    fig = go.Figure()
    x = np.arange(len(x_labels))
    for name, series in values.items():
        fig.add_trace(
            go.Scatter(
                x=x,
                y=np.round(np.asarray(series, dtype=np.float64), 4),
                mode="lines+markers",
                name=literal(name),
            )
        )
    fig.update_xaxes(
        tickmode="array", tickvals=list(x), ticktext=list(x_labels), title_text=x_title
    )
    fig.update_yaxes(title_text=y_title)
    return plain_layout(fig, title, height)


def neighbour_table(
    ids: np.ndarray,
    cosines: np.ndarray,
    word: str,
    tokens: Sequence[str],
    sentence: np.ndarray,
    senses: Sequence[str | None] | None,
    row_labels: Sequence[str],
) -> dict[str, list[str]]:
    """(q, k) neighbour indices into the points (-1: none) and their cosines -> a table of one
    row per chosen occurrence, columns 1st … kth (escaped): another occurrence of the followed
    `word` with its sense, "bank · river (s3) .84"; any other token with its sentence, "river
    (s1) .42"."""
    ordinals = ("1st", "2nd", "3rd", *(f"{n}th" for n in range(4, ids.shape[1] + 1)))

    def cell(index: int, cos: float) -> str:
        if index < 0:
            return "—"
        if tokens[index] == word:
            (name,) = occurrence_labels(np.array([index]), tokens, sentence, senses)
        else:
            name = f"{literal(tokens[index])} (s{int(sentence[index]) + 1})"
        # a no-break space keeps each token with its cosine when a phone wraps the cell
        return f"{name}\u00a0{cos:.2f}".replace("\u00a00.", "\u00a0.")

    table: dict[str, list[str]] = {"occurrence": list(row_labels)}
    for rank in range(ids.shape[1]):
        table[ordinals[rank]] = [cell(int(ids[q, rank]), cosines[q, rank]) for q in range(len(ids))]
    return table


def sense_match_figure(
    matched: np.ndarray, counted: int, chance: float, title: str, height: int = 320
) -> go.Figure:
    """(L + 1,) occurrences whose nearest other occurrence has their sense, at every state, as a
    share of the `counted` ones, beside the share a random pick would reach (a dashed line)."""
    n_states = len(matched)
    x = np.arange(n_states)
    share = np.round(np.asarray(matched, dtype=np.float64) / counted, 4)
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=share,
            mode="lines+markers",
            name="nearest has the same sense",
            customdata=np.asarray(matched),
            hovertemplate=f"%{{customdata}} of {counted}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[0, n_states - 1],
            y=[round(chance, 4)] * 2,
            mode="lines",
            line={"dash": "dash", "color": "#7F7F7F"},
            name="a random pick",
            hoverinfo="skip",
        )
    )
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(x),
        ticktext=state_marks(n_states),
        title_text=STATE_AXIS_TITLE,
    )
    fig.update_yaxes(title_text="share of occurrences", range=[-0.05, 1.15], tickformat=".0%")
    # the last state's count written at its point (the takeaway's "k of n"); the legend in one
    # line above the plot, where beside it it took half of a column's width
    fig.add_annotation(
        x=n_states - 1,
        y=share[-1],
        text=f"{int(matched[-1])} of {counted}",
        showarrow=False,
        yshift=12,
        xanchor="right",
    )
    plain_layout(fig, title, height)
    fig.update_layout(
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        margin={"t": 90 + 18 * title.count("<br>")},
    )
    return fig
