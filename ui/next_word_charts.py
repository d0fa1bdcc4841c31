"""Figures of the next-word panel (ui/next_word.py), drawn as HTML: no plotly.js, so the
Overview, which draws without it, can show them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ui import html_heatmap
from ui.escape import literal

TRAINED_COLOUR = "#31688e"  # a Viridis blue: the model as trained


def trained_bars(
    pieces: Sequence[str], probabilities: np.ndarray, title: str, name: str
) -> html_heatmap.HtmlFigure:
    """The k likeliest next pieces as bars with their probabilities (pieces: visitor-facing
    text from the tokenizer, escaped by bar_rows; title: the code's words with any visitor text
    through literal())."""
    return html_heatmap.bar_rows(
        list(pieces),
        {"probability": np.asarray(probabilities, dtype=np.float64)},
        title,
        "probability of coming next",
        [TRAINED_COLOUR],
        name=name,
        largest=1.0,  # bars of a probability: a full bar is certainty
        decimals=3,
    )


def switch_grid(
    run_labels: Sequence[str],
    pieces: Sequence[str],
    probabilities: np.ndarray,
    title: str,
    name: str,
) -> html_heatmap.HtmlFigure:
    """(runs, m) probabilities: one row per run (as trained, then one switch each), one column
    per next piece, every probability written in its cell, Viridis from 0 to the largest."""
    values = np.asarray(probabilities, dtype=np.float64)
    top = float(values.max()) if values.size and values.max() > 0 else 1.0
    return html_heatmap.value_grid(
        values,
        list(run_labels),
        list(pieces),
        title,
        scale=html_heatmap.VIRIDIS_SCALE,
        value_range=(0.0, top),
        decimals=2,
        bar_title="p",
        axis_titles=("run", "next piece"),
        name=name,
        fractions=True,
    )


def piece_title(piece: str) -> str:
    """A piece quoted for a figure title: escaped, as bar_rows wants visitor text."""
    return f"“{literal(piece)}”"
