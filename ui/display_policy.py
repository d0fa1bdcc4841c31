"""The one display policy: whether a matrix or a set of bars is drawn as HTML (every number
written in, or one image of the cells) or as a plotly figure, and whether a page sends every
head so its sliders switch heads in the browser. Every size that decides it lives here;
ui/display.py's show_matrix and show_bars ask this module, and every view draws a matrix or bars
through those (tests/test_architecture.py).

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

# ---- how much a plotly figure draws, and how it labels it --------------------------------------
# Rows or columns one plotly heatmap draws: past it, block means (the scaling and masking page's
# heatmaps) or every k-th row (the positional page's tables).
HEATMAP_AXIS_UP_TO = 128
HEADS_GRID_TOKENS = (
    48  # tokens per axis of each small map of an all-heads grid: block means past it
)
CELL_BUDGET = 6_144  # cells per token-by-dimension heatmap: 16 rows of a 384-wide X
TOKEN_ROWS_UP_TO = 64  # tokens of a per-token weights heatmap: the first ones past it
MAX_TICK_LABELS = 64  # beyond this, every k-th token is labelled so labels stay legible
SQUARE_TICKS = 16  # token labels per axis on a square heatmap, which often sits in a half column
WEIGHT_LABELS_UP_TO = 32  # row labels of a weights heatmap: every k-th past it (they overlap)
LAYER_TICKS_UP_TO = 12  # every layer numbered on an axis while the numbers fit a phone's
FEWEST_TICKS = 4  # a log axis labelled with 1, 2, 5 × 10^k that gets fewer takes every digit
HOVER_TOKENS_UP_TO = 160  # per-cell hover text costs n² strings; long inputs hover by index
LABELLED_BARS = 12  # bars that still get their value printed on them
SENTENCE_LABEL_CHARS = 60  # a sentence named in a legend: shortened past it
# Frames a playing figure carries (the lab's Play), at most: fewer where one step moves the map
# by several frames' worth (ui/lab_charts.play_indices).
PLAY_FRAMES_UP_TO = 50
# ---- the numbers written in cells ----------------------------------------------------------------
DENSE_FROM = 6  # columns past which a cell is too narrow for two decimals at 13 px (one is kept)
CELL_CHARS = 4  # characters of a number in a narrow cell (phones): -0.62 is written -.62
COMPACT_FROM_HEADS = 9  # from this many heads per row, cell numbers drop their leading zero
WEIGHT_STEPS = 10_000  # attention heatmaps show weights to 4 decimals: k / 10,000, k in 0..10,000
FITTED_SCALE_FROM = 48  # keys: beyond this a typical weight (1/n) is too small for a 0-1 scale

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


def reduced_in_heatmap(n_tokens: int) -> bool:
    """Whether a plotly heatmap of n_tokens rows averages or thins them (HEATMAP_AXIS_UP_TO)."""
    return n_tokens > HEATMAP_AXIS_UP_TO


def averaged_in_heads_grid(n_tokens: int) -> bool:
    """Whether each small map of an all-heads grid averages blocks of tokens."""
    return n_tokens > HEADS_GRID_TOKENS


def scale_fitted(n_keys: int) -> bool:
    """Whether attention weights over n_keys keys are coloured up to the largest weight, not 1."""
    return n_keys > FITTED_SCALE_FROM


def switches_in_browser(n_layers: int, n_heads: int, n_pieces: int) -> bool:
    """Whether every head of (n_layers, n_heads) over n_pieces travels with the page."""
    return n_layers * n_heads * n_pieces**2 <= SWITCH_IN_BROWSER_UP_TO_WEIGHTS
