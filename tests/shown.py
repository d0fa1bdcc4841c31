"""What a visitor is shown: a label as plotly and Markdown decode it, a figure's arrays as sent.

plotly and Markdown both decode HTML character references.

Independent of ui.escape: `shown(label)` fails if the label still holds a raw markup character
(a tag or an entity plotly would parse), and otherwise decodes it the way the renderers do.
"""

from __future__ import annotations

import base64
import html
import json
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


# widgets.stores_aside's element, as html_heatmap.stores_element writes it
STORES_ELEMENT = re.compile(
    r'<div class="ae-stores" hidden data-store="([0-9a-f]{16})" data-heads="([^"<>]*)"></div>'
)


def sent_figures(at) -> list[dict]:
    """Every plotly figure's spec as a page sent it, an every-head figure's stores back in its
    layout.meta["heads"]: the page sends them beside the figure (widgets.stores_aside), and the
    browser script finds them by the figure's meta["store"]. A figure that names stores the
    page did not send fails here."""
    stores = {}
    for element in at.get("html"):
        for store_id, heads in STORES_ELEMENT.findall(element.proto.body):
            stores[store_id] = json.loads(html.unescape(heads))
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    for spec in specs:
        meta = spec["layout"].get("meta")
        if isinstance(meta, dict) and "every_head_of" in meta:
            assert "heads" not in meta, "every head's stores travel beside the figure"
        if isinstance(meta, dict) and "store" in meta:
            assert meta["store"] in stores, f"stores {meta['store']} named but not sent"
            meta["heads"] = stores[meta.pop("store")]
    return specs
