"""Tables and downloads: numbers as a static table, a matrix or every head's weights as CSV.

A label in a CSV file is visitor text (a word piece of a shared link's sentence, say): quoted,
so its commas stay inside its cell, and a label a spreadsheet would read as a formula (=, +, -,
@ first) gets a leading apostrophe, as OWASP advises against CSV injection.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import streamlit as st

from ui.escape import literal


def matrix_csv(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> str:
    """A labelled CSV of a 2-D matrix; labels are quoted so commas in tokens stay inside cells."""
    buffer = io.StringIO()
    buffer.write(",".join([_csv_label("")] + [_csv_label(c) for c in col_labels]) + "\n")
    for label, row in zip(row_labels, np.asarray(matrix), strict=True):
        buffer.write(",".join([_csv_label(label)] + [f"{v:.6g}" for v in row]) + "\n")
    return buffer.getvalue()


def static_table(columns: Mapping[str, Sequence], decimals: Mapping[str, int]) -> None:
    """A few rows as a static table (st.table), numbers written to the decimals given per column.

    For tables of a handful of rows: st.dataframe's scrolling grid loads a script of its own
    (~0.13 s of a page load, side by side), which a table this small does not need. st.table
    reads its cells as Markdown, so text cells go through escape.literal(). The numbers are
    written here as text, not through pandas' Styler, which needs jinja2 for it; st.table
    aligns text cells left.
    """
    import pandas as pd  # here, not at the top: the Overview loads no pandas (ui/preload.py)

    frame = pd.DataFrame(
        {
            name: [_table_cell(value, decimals.get(name)) for value in values]
            for name, values in columns.items()
        }
    )
    st.table(frame, hide_index=True)


def _table_cell(value: object, places: int | None) -> object:
    """A cell as static_table shows it: text escaped, a number to `places` decimals if given."""
    if isinstance(value, str):
        return literal(value)
    if places is None:
        return value
    return f"{value:.{places}f}"


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a formula


def _csv_label(label: str) -> str:
    """A label as one quoted CSV cell: commas and quotes in a token stay inside it, and a label
    that would start a formula starts with an apostrophe instead."""
    text = str(label)
    if text.startswith(FORMULA_STARTS):
        text = "'" + text
    return '"' + text.replace('"', '""') + '"'


def every_head_csv(attentions: np.ndarray, labels: Sequence[str]) -> str:
    """(L, H, n, n) -> CSV: one row per layer, head and query, one column per key."""
    buffer = io.StringIO()
    header = ["layer", "head", _csv_label("query")] + [_csv_label(k) for k in labels]
    buffer.write(",".join(header) + "\n")
    for layer, heads in enumerate(attentions):
        for head, attn_weights in enumerate(heads):
            for query, row in zip(labels, attn_weights, strict=True):
                values = ",".join(f"{v:.6g}" for v in row)
                buffer.write(f"{layer},{head},{_csv_label(query)},{values}\n")
    return buffer.getvalue()


def download_every_head(
    weights: Callable[[], np.ndarray],
    labels: Sequence[str],
    filename: str,
    key: str | None = None,
) -> None:
    """A download button for every head's weights as one CSV (built lazily, only when clicked).

    For a page whose sliders switch heads in the browser: the server does not know the head on
    screen until the next run, so a one-head CSV could be another head's.
    weights: returns the (L, H, n, n) weights as shown, from the page's Trace fetched again
    (ui.traces.refetch); the button keeps the callable, not a copy, for as long as the visitor's
    page is open.
    """
    st.download_button(
        "Download every head as CSV",
        data=lambda: every_head_csv(weights(), labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",
    )


def dimension_labels(matrix: np.ndarray) -> list[str]:
    """A (rows, d) matrix's column labels when its columns are dimensions: d0 … d(d−1)."""
    return [f"d{k}" for k in range(matrix.shape[1])]


def download_matrix(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    filename: str,
    label: str = "Download as CSV",
    key: str | None = None,
) -> None:
    """A download button for a matrix as CSV (built lazily, only when clicked)."""
    # The button's callable lives as long as the visitor's page. A slice of a Trace array is a
    # view that keeps the whole (L, H, n, n) block alive (~75 MB at 512 tokens) after the Trace
    # cache has let it go; one copied (n, n) matrix is ~1 MB.
    own_copy = np.array(matrix, copy=True)
    st.download_button(
        label,
        data=lambda: matrix_csv(own_copy, row_labels, col_labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",  # downloading must not rerun the page
    )
