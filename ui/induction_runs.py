"""Induction heads through the one door: the training run and every head's scores, cached.

A run is a pure function of its settings (core.induction.train_induction is seeded), so a cached
run is the same run a copied link would retrain; the scores of a Trace are a pure function of its
attentions and of where the repeated segment sits. Both go through ui.door like every model run:
one cache, one admission limit.
"""

from __future__ import annotations

from collections.abc import Sequence

import core
from core import induction
from ui import door, widgets


def _training_cost(settings: induction.InductionSettings) -> int:
    return induction.training_bytes(settings)


@door.shared("training the induction model", cost=_training_cost)
def trained_run(settings: induction.InductionSettings) -> induction.InductionRun:
    """The run for these settings, trained on a miss with a progress bar (a hit draws none).

    The bar counts towards settings.max_steps; a run that is solved earlier stops there.
    """
    layers = "layer" if settings.n_layers == 1 else "layers"
    first_text = f"Training {settings.n_layers} {layers} …"
    with widgets.training_bar(first_text, settings.max_steps, of="of at most") as report:
        return induction.train_induction(settings, on_step=report)


def _scores_cost(trace: core.Trace, **_: object) -> int:
    # two (L, H) scores read from diagonals of the (L, H, n, n) block: (L, H, n) float64 at most
    n_layers, n_heads, n, _n = trace.attentions.shape
    return 2 * 8 * n_layers * n_heads * n


@door.shared("the induction scores", cost=_scores_cost)
def found_scores(trace: core.Trace, layout: induction.RepeatLayout) -> induction.HeadScores:
    """Every head's previous-token and induction score in a run over a repeated sequence."""
    return induction.head_scores(trace.attentions, layout)


def _mean_scores_cost(traces: Sequence[core.Trace], **_: object) -> int:
    return sum(_scores_cost(trace) for trace in traces)


@door.shared("the induction scores", cost=_mean_scores_cost)
def mean_found_scores(
    traces: Sequence[core.Trace], layouts: Sequence[induction.RepeatLayout]
) -> induction.HeadScores:
    """The scores averaged over several runs, each over its own repeated sequence."""
    return induction.mean_head_scores([trace.attentions for trace in traces], layouts)


def _measured_cost(model: core.Transformer) -> int:
    # one sequence's run at a time: the Trace of [specials] + 2 T pieces, until its scores are read
    return model.run_bytes(2 * induction.FOUND_SEGMENT_LENGTH + 2)


@door.shared(
    "measuring induction heads",
    cost=_measured_cost,
    spinner="Measuring every head on repeated random word pieces …",
)
def measured_scores(model: core.Transformer) -> induction.FoundScores:
    """Every head's previous-token and induction score on the model, averaged over
    core.induction.FOUND_SEQUENCES repeated sequences of random pieces; once per model."""
    return induction.found_scores(model)
