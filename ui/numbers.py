"""Numbers as the app's prose prints them."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def signed(value: float, decimals: int = 3, plus: str = "+") -> str:
    """A number for prose with a true minus sign (−, not a hyphen) and `plus` before a positive
    one; a value that rounds to zero gets no sign at all, never "−0.00". NaN (Spearman's ρ over
    a single piece) is "undefined"."""
    if not math.isfinite(value):
        return "undefined"
    magnitude = f"{abs(value):.{decimals}f}"
    if float(magnitude) == 0:
        return magnitude
    return ("−" if value < 0 else plus) + magnitude


def percent(share: float) -> str:
    """A share in [0, 1] as a whole percent, with as many decimals as it takes (up to 3) not to
    claim all or none that is not: 2,558 of 2,560 is "99.9%", not "100%"."""
    for decimals in range(4):
        text = f"{share:.{decimals}%}"
        if not ((share < 1 and float(text[:-1]) == 100) or (share > 0 and float(text[:-1]) == 0)):
            return text
    return text


def even_share(keys: int) -> str:
    """What an even spread gives each of `keys` keys, as the fraction and its value: "1/4 = 0.25",
    "1/8 = 0.125" (exact, where two decimals would print 0.12), "1/3 ≈ 0.33"."""
    share = 1 / keys
    for decimals in (2, 3):
        if round(share, decimals) == share:
            return f"1/{keys} = {share:.{decimals}f}"
    return f"1/{keys} ≈ {share:.2f}"


def ranges(numbers: Iterable[int]) -> str:
    """Sorted whole numbers as runs: [0, 1, 2, 3, 5, 7, 8] -> "0–3, 5, 7, 8" (a run is 3 or more)."""
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    parts = []
    for run in runs:
        parts += [f"{run[0]}–{run[-1]}"] if len(run) >= 3 else [str(n) for n in run]
    return ", ".join(parts)


def extremes(values: Iterable[float] | np.ndarray) -> tuple[float, float]:
    """The smallest and the largest of some numbers (an array of any shape): the ends of the
    range a sentence states."""
    flat = np.asarray(values, dtype=np.float64).ravel()  # (count,)
    return float(flat.min()), float(flat.max())


def largest(values: Iterable[float] | np.ndarray) -> tuple[int, float]:
    """Where the largest of some numbers (n,) stands, and its value: the first of a tie."""
    flat = np.asarray(values).ravel()  # (n,)
    at = int(np.argmax(flat))
    return at, float(flat[at])


def largest_magnitude(values: Iterable[float] | np.ndarray) -> float:
    """The largest |value| of some numbers (an array of any shape): max |x|."""
    return float(np.max(np.abs(np.asarray(values))))


def mean_of(values: Iterable[float] | np.ndarray) -> float:
    """The mean of some numbers (an array of any shape), for a sentence that states it."""
    return float(np.mean(np.asarray(values)))  # in the array's own precision, as computed


def span(values: Iterable[float] | np.ndarray, spec: str = ".2f") -> str:
    """The range of some numbers as prose prints it, each end in the format spec: "0.12–0.87",
    or one number when both ends read the same in that format ("0.50")."""
    low, high = extremes(values)
    low_text, high_text = f"{low:{spec}}", f"{high:{spec}}"
    return low_text if low_text == high_text else f"{low_text}–{high_text}"


def row_spans(matrix: np.ndarray, spec: str = ".2f") -> list[str]:
    """span() of each row of a (rows, columns) matrix: one range per row, for a table."""
    return [span(row, spec) for row in np.asarray(matrix)]
