"""The next-word panel: a decoder's likeliest next pieces after the sidebar's text, and beside
them what each switch does to them (core/next_word.py).

Every row of the panel is a run of its own through ui.door (one cache, one admission limit):
the model as trained, then √d_k off, the causal mask removed, the positions removed, one head
removed and all heads of its layer removed, each changed alone from the model as trained. A run
here keeps no Trace, only the (vocab,) log-probabilities of the next piece.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

import core
from core import next_word
from ui import display, door, models, next_word_charts, terms, widgets
from ui.escape import literal
from ui.models import load_model

K = 5  # next pieces shown for the model as trained


def _run_cost(model_name: str, text: str, **_: object) -> int:
    """Bytes one prediction run holds: one layer's scores and weights (H, n, n) at a time, the
    feed-forward's widened rows, a few (n, d_model) streams, and the (vocab,) scores in float64."""
    model = load_model(model_name)
    n = door.pieces(model, text)
    d_ff_rows = (3 if model.arch.gated_ffn else 2) * n * model.dims.d_ff
    floats = 2 * model.n_heads * n * n + d_ff_rows + 6 * n * model.d_model
    return 4 * floats + 3 * 8 * model.dims.vocab_size


@door.shared("a next-word run", cost=_run_cost)
def _log_probs(
    model_name: str,
    text: str,
    scale: bool,
    causal: bool,
    positions: bool,
    ablate: tuple[tuple[int, int], ...],
) -> np.ndarray:
    return next_word.next_log_probs(
        load_model(model_name),
        text,
        scale=scale,
        causal=causal,
        positions=positions,
        ablate=frozenset(ablate),
    )


def log_probs(
    model: core.Transformer,
    text: str,
    *,
    scale: bool = True,
    causal: bool | None = None,
    positions: bool = True,
    ablate: tuple[tuple[int, int], ...] = (),
) -> np.ndarray:
    """(vocab,) cached log p(next piece | text), one run with these switches (causal None: the
    model's own mask)."""
    causal = model.is_decoder if causal is None else bool(causal)
    return _log_probs(model.name, text, scale, causal, positions, tuple(sorted(ablate)))


def switches(model: core.Transformer, layer: int, head: int) -> dict[str, dict[str, object]]:
    """Run label -> the one switch it changes from the model as trained."""
    return {
        "√d_k off": {"scale": False},
        "causal mask removed": {"causal": False},
        "positions removed": {"positions": False},
        f"L{layer} H{head} removed": {"ablate": ((layer, head),)},
        f"layer {layer}'s {model.n_heads} heads removed": {
            "ablate": tuple((layer, h) for h in range(model.n_heads))
        },
    }


@dataclass(frozen=True)
class Panel:
    """What the panel shows: each run's prediction beside the trained one, and the grid."""

    runs: list[next_word.SwitchedPrediction]  # as trained first
    grid_ids: np.ndarray  # (m,) the pieces compared
    grid: np.ndarray  # (runs, m) probability each run gives each piece


def predictions(model: core.Transformer, text: str, layer: int, head: int) -> Panel:
    """The trained run and every switched run of `text` (each cached through the door)."""
    trained = log_probs(model, text)
    switched = {
        label: log_probs(model, text, **options)  # type: ignore[arg-type]
        for label, options in switches(model, layer, head).items()
    }
    ids, grid = next_word.prediction_grid([trained, *switched.values()], K)
    return Panel(next_word.compare_runs(trained, switched, K), ids, grid)


def _pieces(model: core.Transformer, ids: np.ndarray) -> list[str]:
    return [model.tokenizer.token_of(int(i)) for i in ids]


def _verdict(model: core.Transformer, panel: Panel) -> str:
    """One line: which switches change the likeliest next piece and which keep it."""
    trained = panel.runs[0]
    first = literal(model.tokenizer.token_of(trained.trained_top_id))
    changed = [run for run in panel.runs[1:] if not run.same_top]
    kept = [run for run in panel.runs[1:] if run.same_top]

    def names(runs: list[next_word.SwitchedPrediction]) -> str:
        # p: the probability the run gives the piece that comes first as trained
        return ", ".join(
            f"{run.label} (“{first}” p {run.trained_top_probability:.2f}, "
            f"TV {run.total_variation:.2f})"
            for run in runs
        )

    parts = [f"As trained, “{first}” comes first (p {trained.top_probabilities[0]:.2f})."]
    if changed:
        parts.append(f"Another piece comes first with {names(changed)}.")
    if kept:
        parts.append(f"It stays first with {names(kept)}.")
    return " ".join(parts)


def panel(model: core.Transformer, text: str, key: str, heading: str | None = None) -> None:
    """The next-word panel for a decoder; for an encoder one line saying why it is absent."""
    if not model.is_decoder:
        offer = models.decoder_offer()  # only what this server would load
        st.caption(
            f"{models.label(model)} is an encoder: it reads the text both ways and has no head "
            "that predicts the next word piece. "
            + (
                f"Load a decoder ({offer}) and this place shows its likeliest next pieces, and "
                "what each switch does to them."
                if offer
                else "This server offers no decoder to load; with one, this place would show "
                "its likeliest next pieces, and what each switch does to them."
            ),
            help=terms.ahead("encoder, decoder"),
        )
        return
    try:
        model.encode(text)
    except core.EmptyInput:
        return  # the page says so where it runs the sidebar's text
    if heading:
        st.subheader(heading)
    st.markdown(
        f"What {models.label(model)} predicts after the sidebar's sentence, and what each switch "
        "does to that prediction. Each row below is a run of its own with one thing changed "
        "from the model as trained (whatever the sidebar's switches say); p is the probability "
        "it gives the trained model's first piece, TV the total variation distance between the "
        "two predictions over the whole vocabulary (0: the same, 1: nothing in common)."
    )
    picker_column, _ = st.columns([2, 1])
    with picker_column:
        layer, head = widgets.layer_head_picker(model, key_prefix=f"{key}_")
    result = predictions(model, text, layer, head)
    trained = result.runs[0]
    bars_column, grid_column = st.columns([1, 2], gap="large")
    with bars_column:
        display.show_html_figure(
            next_word_charts.trained_bars(
                _pieces(model, trained.top_ids),
                trained.top_probabilities,
                "Next piece, as trained",
                name=f"{key}_trained",
            )
        )
    with grid_column:
        display.show_html_figure(
            next_word_charts.switch_grid(
                [run.label for run in result.runs],
                _pieces(model, result.grid_ids),
                result.grid,
                "What each switch does to the next piece",
                name=f"{key}_switches",
            )
        )
    st.markdown(_verdict(model, result))
    st.caption(
        f"{len(result.runs)} runs of the model, one per row, each through the server's shared "
        "cache and admission limit; a switched run is the trained weights off their training "
        "distribution, not a model trained that way. The pieces are the trained run's "
        f"{K} likeliest, then each switched run's likeliest where it differs."
    )


def two_sentences(
    model: core.Transformer, first: str, second: str, *, scale: bool, causal: bool, key: str
) -> float:
    """A decoder's counterpart of the sentence similarity: the two sentences' likeliest next
    pieces side by side (each run on its own with these switches); returns the total variation
    distance between the two predictions."""
    runs = [log_probs(model, text, scale=scale, causal=causal) for text in (first, second)]
    for column, log_p, name in zip(st.columns(2), runs, ("first", "second"), strict=True):
        rows = next_word.top_k(log_p, K)
        with column:
            display.show_html_figure(
                next_word_charts.trained_bars(
                    _pieces(model, rows),
                    np.exp(log_p[rows].astype(np.float64)),
                    f"Next piece after the {name} sentence",
                    name=f"{key}_{name}",
                )
            )
    return next_word.total_variation(*runs)


def after_removing(
    model: core.Transformer,
    text: str,
    removed: frozenset[tuple[int, int]] | set[tuple[int, int]],
    key: str,
) -> None:
    """For a decoder: the next piece as trained beside the same run with `removed` heads gone
    (one more run through the door); nothing for an encoder, which predicts no next piece."""
    if not model.is_decoder or not removed:
        return
    try:
        model.encode(text)
    except core.EmptyInput:
        return
    trained = log_probs(model, text)
    label = f"{len(removed)} head{'s' if len(removed) != 1 else ''} removed"
    ablated = log_probs(model, text, ablate=tuple(sorted(removed)))
    ids, grid = next_word.prediction_grid([trained, ablated], K)
    runs = next_word.compare_runs(trained, {label: ablated}, K)
    st.markdown(f"**What {models.label(model)} predicts next, with and without these heads**")
    display.show_html_figure(
        next_word_charts.switch_grid(
            [run.label for run in runs],
            _pieces(model, ids),
            grid,
            "The next piece, as trained and with the heads removed",
            name=f"{key}_next",
        )
    )
    st.markdown(_verdict(model, Panel(runs, ids, grid)))
