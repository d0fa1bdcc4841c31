"""Numbers as the app's prose prints them."""

from __future__ import annotations


def signed(value: float, decimals: int = 3, plus: str = "+") -> str:
    """A number for prose with a true minus sign (−, not a hyphen) and `plus` before a positive
    one; a value that rounds to zero gets no sign at all, never "−0.00"."""
    magnitude = f"{abs(value):.{decimals}f}"
    if float(magnitude) == 0:
        return magnitude
    return ("−" if value < 0 else plus) + magnitude
