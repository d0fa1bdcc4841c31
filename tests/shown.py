"""What a visitor is shown: a label as plotly and Markdown decode it, a figure's arrays as sent.

plotly and Markdown both decode HTML character references.

Independent of ui.escape: `shown(label)` fails if the label still holds a raw markup character
(a tag or an entity plotly would parse), and otherwise decodes it the way the renderers do.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from html.parser import HTMLParser

import numpy as np
from PIL import Image

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


# display.stores_aside's element, as html_heatmap.stores_element writes it
STORES_ELEMENT = re.compile(
    r'<div class="ae-stores" hidden data-store="([0-9a-f]{16})" data-heads="([^"<>]*)"></div>'
)


def sent_figures(at) -> list[dict]:
    """Every plotly figure's spec as a page sent it, an every-head figure's stores back in its
    layout.meta["heads"]: the page sends them beside the figure (display.stores_aside), and the
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


class _HtmlFigureReader(HTMLParser):
    """html_heatmap's value grids and bar rows as a browser reads them (see html_figures)."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: dict[str, dict] = {}
        self._figure: dict | None = None
        self._open: list[str] = []  # the classes of the elements open at this point

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        kind = attributes.get("class", "")
        if tag == "figure" and "data-figure" in attributes:
            self._figure = {
                "kind": kind,
                "title": "",
                "note": "",  # an attention grid's line under the title
                "heads": json.loads(attributes.get("data-heads") or "null"),  # its stores
                "store": attributes.get("data-store"),  # every head's, sent after it
                "rows": [],  # a grid's row labels, or the bars' labels
                "columns": [],  # a grid's column labels
                "series": [],  # the bars' series names, from the legend
                "numbers": [],  # written in the cells or after the bars, in order
                "image": "data-values" in attributes,  # a grid of one image, not cells
            }
            if "data-values" in attributes:  # its readout's numbers, row after row
                self._figure["numbers"] = attributes["data-values"].split(",")
            self.figures[attributes["data-figure"]] = self._figure
        first = kind.split(" ")[0]  # an attention grid's labels carry more classes
        if self._figure is not None:
            if first in ("ae-query", "ae-bar-label"):
                self._figure["rows"].append("")
            elif first == "ae-key":
                self._figure["columns"].append("")
            elif tag == "i" or first == "ae-bar-row":
                self._figure["numbers"].append("")
        if tag not in ("img", "br"):
            self._open.append("cell" if tag == "i" else first)

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()
        if tag == "figure":
            self._figure = None

    def handle_data(self, data: str) -> None:
        if self._figure is None or not self._open:
            return
        inside = self._open[-1]
        figure = self._figure
        if inside == "ae-title":
            figure["title"] += data
        elif inside == "ae-note":
            figure["note"] += data
        elif inside in ("ae-query", "ae-bar-label"):
            figure["rows"][-1] += data
        elif inside == "ae-key":
            figure["columns"][-1] += data
        elif inside in ("cell", "ae-bar-row"):
            figure["numbers"][-1] += data
        elif inside == "ae-key-item":
            figure["series"].append(data)


def html_figures_of(*markups: str) -> dict[str, dict]:
    """html_figures of markup itself: the figures in these strings, by data-figure name."""
    reader = _HtmlFigureReader()
    stores = {}
    for markup in markups:
        reader.feed(markup)
        for store_id, heads in STORES_ELEMENT.findall(markup):
            stores[store_id] = json.loads(html.unescape(heads))
    for figure in reader.figures.values():
        figure["numbers"] = [float(text) if text else np.nan for text in figure["numbers"]]
        store = figure.pop("store")
        if store is not None:  # an attention grid's every head, beside it: the page sent it
            assert store in stores, f"stores {store} named but not sent"
            figure["heads"] = {**stores[store], **figure["heads"]}
    return reader.figures


def html_figures(at) -> dict[str, dict]:
    """The HTML figures a page sent with a data-figure name (html_heatmap.value_grid, bar_rows,
    attention_grid), by that name: kind ("ae-matrix", "ae-bars" or "ae-heatmap"), title, note,
    rows (labels), columns (a grid's), series (the bars' names) as decoded text, heads (an
    attention grid's stores), image (a value grid drawn as one image), and numbers: a grid's
    row by row (nan for a masked cell; an image's from its data-values), the bars' label by
    label, each label's series in order."""
    return html_figures_of(*(element.proto.body for element in at.get("html")))


def bar_series(figure: dict) -> dict[str, np.ndarray]:
    """An HTML bar figure's numbers by series: name -> (labels,) values."""
    names = figure["series"]
    numbers = np.asarray(figure["numbers"]).reshape(len(figure["rows"]), len(names))
    return {name: numbers[:, k] for k, name in enumerate(names)}


def model_view_tiles(markup: str) -> dict[tuple[int, int], dict]:
    """html_heatmap.model_view's tiles by (layer, head): framed or not, and the pixels of the
    tile's image (m, m, 3)."""
    tiles = {}
    for match in re.finditer(
        r'<span class="ae-mv-tile( ae-mv-on)?" data-layer="(\d+)" data-head="(\d+)"[^>]*>'
        r'<img alt="[^"]*" src="data:image/png;base64,([^"]+)">',
        markup,
    ):
        framed, layer, head, png = match.groups()
        pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB"))
        tiles[int(layer), int(head)] = {"framed": bool(framed), "pixels": pixels}
    return tiles
