"""The training lab's runs: trained once per settings, kept in a small cache, progress shown.

A run is a pure function of its settings (core.lab.train is seeded), so a cached run is the same
run a copied link would retrain: scrubbing the step slider or reopening a link costs no training.
Training goes through ui.door like every model run: one cache, one admission limit.
"""

from __future__ import annotations

import streamlit as st

from core import lab
from ui import door

MAX_STEPS = 500  # the longest run the page offers: ~1 s on one idle thread here, ~5 s loaded
PROGRESS_UPDATES = 20  # progress-bar messages per run: enough to see it move, few to send


@door.shared("training")
def trained_run(settings: lab.Settings) -> lab.TrainingRun:
    """The run for these settings, trained on a miss with a progress bar (a hit draws none)."""
    bar = st.progress(0.0, text=f"Training {settings.steps} steps …")
    every = max(1, settings.steps // PROGRESS_UPDATES)

    def report(done: int, total: int) -> None:
        if done % every == 0 or done == total:
            bar.progress(done / total, text=f"Training: step {done} of {total}")

    run = lab.train(settings, on_step=report)
    bar.empty()
    return run
