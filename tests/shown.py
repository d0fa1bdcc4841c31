"""What a label looks like on screen: plotly and Markdown both decode HTML character references.

Independent of ui.escape: `shown(label)` fails if the label still holds a raw markup character
(a tag or an entity plotly would parse), and otherwise decodes it the way the renderers do.
"""

from __future__ import annotations

import html
import re

_RAW_MARKUP = re.compile(r"<|>|&(?!#\d+;)")


def shown(label: str) -> str:
    """The characters a visitor sees for an escaped label (asserting nothing in it is markup)."""
    assert not _RAW_MARKUP.search(label), f"raw markup in a label: {label!r}"
    return html.unescape(label).replace("\u2060", "")  # the word joiner that stops autolinks
