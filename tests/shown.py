"""What a visitor is shown: a label as plotly and Markdown decode it, a figure's arrays as sent.

plotly and Markdown both decode HTML character references.

Independent of ui.escape: `shown(label)` fails if the label still holds a raw markup character
(a tag or an entity plotly would parse), and otherwise decodes it the way the renderers do.
"""

from __future__ import annotations

import base64
import html
import re

import numpy as np

_RAW_MARKUP = re.compile(r"<|>|&(?!#\d+;)")


def shown(label: str) -> str:
    """The characters a visitor sees for an escaped label (asserting nothing in it is markup)."""
    assert not _RAW_MARKUP.search(label), f"raw markup in a label: {label!r}"
    return html.unescape(label).replace("\u2060", "")  # the word joiner that stops autolinks


def sent_array(value: object) -> np.ndarray:
    """A plotly array as the browser receives it: a plain list, or base64 "bdata" with a dtype
    (and a shape, "n,m" or a list), as float64."""
    if not isinstance(value, dict):
        return np.asarray(value, dtype=np.float64)
    flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    shape = value.get("shape")
    if isinstance(shape, str):
        shape = [int(side) for side in shape.split(",")]
    return (flat.reshape(shape) if shape else flat).astype(np.float64)
