"""The one display policy: whether a matrix or a set of bars is drawn as HTML (every number
written in, or one image of the cells) or as a plotly figure, and whether a page sends every
head so its sliders switch heads in the browser. Every size that decides it lives here;
ui/display.py's show_matrix and show_bars ask this module, and every view calls those.

HTML first: a page whose figures are all HTML never loads plotly.js (~0.6 s of a browser's main
thread), and a phone reads a number written in a cell without a hover. Past these sizes a figure
needs plotly's zoom, or a block picture that fits hundreds of tokens.
No streamlit here: the pure figure modules read the same sizes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np

NUMBERS_UP_TO = 12  # rows and columns: up to here every cell prints its value (phones: no hover)
IMAGE_UP_TO = 128  # rows or columns of a matrix drawn as one HTML image of its cells, at most
# Tokens a token-by-token matrix draws per axis: whole as HTML up to here; past it plotly draws
# the first DRAW_LIMIT (matrix_charts.limit_note says so) or a page's block means. Beyond ~50
# rows a cell is too small to read anyway.
DRAW_LIMIT = 48
BARS_UP_TO = 24  # labels: up to here bars are HTML rows, past it plotly's grouped bars
# Up to this many attention weights (L·H·n²: MiniLM's 72 heads at 128 pieces, 2.4 MB packed) a
# page may send every head and switch heads in the browser; beyond, each head comes from the
# server. Counted in weights, not pieces: BERT-base's 144 heads switch in the browser up to 90.
SWITCH_IN_BROWSER_UP_TO_WEIGHTS = 72 * 128 * 128

MatrixForm = Literal["numbers", "strip", "image", "plotly"]


def matrix_form(
    n_rows: int, n_columns: int, rows_up_to: int = IMAGE_UP_TO, strip: bool = False
) -> MatrixForm:
    """How an (n_rows, n_columns) matrix is drawn: "numbers" (HTML cells with their values),
    "strip" (a few rows of any width as one image, where the caller has one), "image" (one HTML
    image with a readout, up to rows_up_to rows and IMAGE_UP_TO columns) or "plotly".

    rows_up_to: fewer where the plotly figure it stands in for draws fewer (DRAW_LIMIT).
    """
    if n_rows <= NUMBERS_UP_TO and n_columns <= NUMBERS_UP_TO:
        return "numbers"
    if strip and n_rows <= NUMBERS_UP_TO:
        return "strip"
    if n_rows <= rows_up_to and n_columns <= IMAGE_UP_TO:
        return "image"
    return "plotly"


def bars_as_html(n_labels: int, values: Iterable[np.ndarray] = ()) -> bool:
    """Whether bars over n_labels labels are HTML rows: up to BARS_UP_TO labels, and no
    negative value among values (the numbers of HTML bars that grow from the left edge only:
    plotly's bars grow down from zero)."""
    return n_labels <= BARS_UP_TO and all((np.asarray(v) >= 0).all() for v in values)


def switches_in_browser(n_layers: int, n_heads: int, n_pieces: int) -> bool:
    """Whether every head of (n_layers, n_heads) over n_pieces travels with the page."""
    return n_layers * n_heads * n_pieces**2 <= SWITCH_IN_BROWSER_UP_TO_WEIGHTS
