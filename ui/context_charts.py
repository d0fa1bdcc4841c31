"""Figures for page 1, context from first principles (core/context.py).

Pure functions: arrays in, plotly figures out, no streamlit. Tokens reach plotly escaped through
ui.escape.literal. The token matrices the page shares with others are in ui/matrix_charts.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ui import html_heatmap
from ui.escape import literal
from ui.matrix_charts import OTHERS

SHORT_ROWS, LONG_ROWS = OTHERS, "#00CC96"  # plotly's blue and green: readable on both themes


def weights_by_length(
    word: str,
    tokens: Sequence[str],
    weights_by_rows: dict[str, np.ndarray],
    name: str,
) -> html_heatmap.HtmlFigure:
    """Page 1's length lesson as HTML bars: the shared word's softmax row in sentence A, one bar
    per kind of row X was made of (the table's short rows, layer 0's long inputs)."""
    return html_heatmap.bar_rows(
        list(tokens),
        weights_by_rows,
        f"Where “{literal(word)}” looks in sentence A, by the rows X is made of",
        "softmax weight",
        [SHORT_ROWS, LONG_ROWS],
        name=name,
        largest=1.0,  # both series on the scale of a whole row's weight
    )
