"""Figures drawn as plain HTML, without plotly.js: attention heatmaps, small matrices, bars.

Plotly's bundle costs a browser ~0.6-0.8 s of main-thread work to evaluate (4.7 MB of
JavaScript, most of a plain Streamlit heatmap app's page load: bench/bench_browser.py), on every
first visit to a page that draws with it, a phone several times that. A figure of a few cells or
bars needs none of it, so the first screens of most pages are drawn here:

- attention_grid: a head's heatmap (the Overview's, Positional §7's). Up to 12 word pieces a
  grid of coloured cells the browser lays out like text, each with its weight; past that, one
  image of n × n pixels. It says what charts.attention_heatmap says: the same title and
  fitted-scale note, the same Viridis colours on the same 0..zmax range, queries down the side
  and keys along the top. Up to ~128 pieces it also carries every head, so
  display.HEAD_SWITCH_JS can show another head without a
  server round trip; it repaints the cells with the same stops (VIRIDIS) and the same
  arithmetic as cell_rgb() below. The same script names the cell under the pointer (hover) and
  writes a clicked or tapped cell under the figure (phones have no hover).
- value_grid: a matrix on a plotly colour scale over the range the plotly heatmap would use:
  up to 12 × 12 with every value written in its cell; up to 128 a side as one image of its
  cells, whose values travel as text in the figure for the same script's hover and tap
  readout. value_strip: a few rows of many columns (a sentence's 384-wide vectors) as one
  image.
- bar_rows: grouped bars, one row per label, each number written after its bar.

Larger inputs keep plotly's figures, which zoom (widgets chooses).
Visitor text (word pieces, words, sentences) enters through escape.literal() only; the stores
hold the code's own titles and base64 numbers. The page's sanitiser (DOMPurify) keeps data-*
and style attributes and drops any script, so the markup carries data, never code.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import NewType

import numpy as np
from PIL import Image

from ui import charts, display_policy
from ui.escape import literal

# plotly's Viridis (plotly.colors.sequential.Viridis): ten evenly spaced stops, as the plotly
# heatmaps of the other pages draw them. Tested against plotly's own interpolation.
VIRIDIS = (
    "#440154",
    "#482878",
    "#3e4989",
    "#31688e",
    "#26828e",
    "#1f9e89",
    "#35b779",
    "#6ece58",
    "#b5de2b",
    "#fde725",
)
# The same stops as a colour scale (position 0..1, colour), for value_grid
VIRIDIS_SCALE = tuple((i / (len(VIRIDIS) - 1), colour) for i, colour in enumerate(VIRIDIS))
# Markup built here, the one run-time HTML that widgets shows: a figure of this module, whose
# visitor text (word pieces, words) goes through escape.literal() here, or a plotly figure's
# stores (stores_element), whose whole JSON is escaped here as an attribute value (hostile text
# in each: tests/test_html_heatmap.py).
HtmlFigure = NewType("HtmlFigure", str)
# What may not stand in a title inserted as it is (bar_rows'): a tag, or an "&" that does not
# begin one of escape.literal()'s numeric character references.
RAW_MARKUP = re.compile(r"<|>|&(?!#\d+;)")

# Labels along an axis on a wide screen, at most: every piece is labelled up to here. From
# SMALL_LABELS_FROM pieces the figure widens and its labels take a smaller font ("ae-many" in
# preload's figure styles), so 48 labels still get ~13 px each; past MAX_LABELS every k-th is.
MAX_LABELS = 48
SMALL_LABELS_FROM = 33
PHONE_LABELS = 16  # the same at most 640 px wide (the media query of preload's figure styles)


def stops_rgb() -> list[list[int]]:
    """The Viridis stops as [r, g, b] in 0..255 (HEAD_SWITCH_JS gets the same list)."""
    return [[int(colour[i : i + 2], 16) for i in (1, 3, 5)] for colour in VIRIDIS]


def _colour_bar(
    column: int, n_rows: int, gradient: str, title: str, top: str, bottom: str
) -> list[str]:
    """A figure's colour bar: its title above, then the ramp in grid column `column`, beside
    the n_rows rows of cells and as tall as they are, with its two ends written.

    gradient: a CSS gradient's colour stops, bottom to top. title, top, bottom: markup, the
    code's own words and numbers, escaped by the caller.
    """
    return [
        f'<span class="ae-bar-title" style="grid-row:1;grid-column:{column}">{title}</span>',
        f'<span class="ae-colourbar" style="grid-row:2 / span {n_rows};grid-column:{column}">'
        f'<span class="ae-ramp" style="background:linear-gradient(to top, {gradient})"></span>'
        f'<span class="ae-top">{top}</span><span class="ae-bottom">{bottom}</span></span>',
    ]


def _scale_gradient(scale: ColourScale) -> str:
    """A plotly colour scale ((position 0..1, colour), in order) as CSS gradient stops."""
    return ", ".join(f"{colour} {100 * position:g}%" for position, colour in scale)


def cell_rgb(weights: np.ndarray, zmax: float) -> np.ndarray:
    """(n, m) weights -> (n, m, 3) uint8: Viridis from 0 to zmax, linear between its stops.

    HEAD_SWITCH_JS repeats these float64 operations in the same order, and rounds halves up as
    it does (floor(x + 0.5)), so a head painted in the browser matches one sent by the server.
    """
    stops = np.array(stops_rgb(), dtype=np.float64)  # (10, 3)
    where = np.clip(np.asarray(weights, dtype=np.float64) / zmax, 0.0, 1.0) * (len(stops) - 1)
    lower = np.minimum(np.floor(where).astype(int), len(stops) - 2)  # (n, m) the stop below
    frac = (where - lower)[..., None]  # (n, m, 1) the way from that stop to the next
    return np.floor(stops[lower] * (1 - frac) + stops[lower + 1] * frac + 0.5).astype(np.uint8)


def hex_colours(rgb: np.ndarray) -> np.ndarray:
    """(n, m, 3) uint8 -> (n, m) '#rrggbb' strings."""
    return np.vectorize(lambda r, g, b: f"#{r:02x}{g:02x}{b:02x}")(
        rgb[..., 0].astype(int), rgb[..., 1].astype(int), rgb[..., 2].astype(int)
    )


def png_data_uri(rgb: np.ndarray) -> str:
    """(h, w, 3) uint8, or (h, w, 4) with an alpha channel -> a data: URI of the PNG with one
    pixel per cell (no colour profile, so the browser shows the bytes as they are)."""
    buffer = io.BytesIO()
    mode = "RGBA" if rgb.shape[-1] == 4 else "RGB"
    Image.fromarray(rgb, mode=mode).save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def ink_on(rgb: np.ndarray) -> np.ndarray:
    """(n, m, 3) uint8 cell colours -> (n, m) the number colour that reads on each: black on
    light, white on dark, by charts.cell_numbers' rule (WCAG relative luminance above 0.3)."""
    return np.vectorize(
        lambda r, g, b: "#000000" if charts.luminance(f"rgb({r}, {g}, {b})") > 0.3 else "#ffffff"
    )(rgb[..., 0].astype(int), rgb[..., 1].astype(int), rgb[..., 2].astype(int))


def _stores(heads: np.ndarray, titles: Sequence[str], notes: Sequence[str]) -> list[dict]:
    """Each of the k heads' (k, n, n) entry in a figure's data-heads: title, note (the code's
    own words under the title, then the fitted scale's note, if any), top of scale, packed
    weights. Rounded and packed in one pass: a figure that carries every head builds them all
    on every new sentence, before it can be sent."""
    shown = np.round(np.asarray(heads, dtype=np.float64), 4)  # (k, n, n)
    packed = charts.packed_weights_each(heads)
    stores = []
    for weights, title, note, head_shown in zip(packed, titles, notes, shown, strict=True):
        zmax, scale_note = charts.fitted_scale(head_shown)
        stores.append(
            {
                "title": title,
                "note": " · ".join(part for part in (note, scale_note) if part),
                "zmax": zmax,
                "top": f"{zmax:.3g}",  # the colour bar's top label
                "weights": weights,
            }
        )
    return stores


def _label_classes(n: int) -> list[str]:
    """Which labels show: every one up to MAX_LABELS, then every k-th ('wide'); on a phone
    every k'-th, at most PHONE_LABELS ('narrow'). The styles hide the rest: they keep their
    cell's place, and their text for the hover."""
    wide = set(charts.token_ticks(["x"] * n, max_labels=MAX_LABELS)["tickvals"])
    narrow = set(charts.token_ticks(["x"] * n, max_labels=PHONE_LABELS)["tickvals"])
    return [
        "ae-lab" + (" ae-wide" if i in wide else "") + (" ae-narrow" if i in narrow else "")
        for i in range(n)
    ]


def many_class(n: int) -> str:
    """' ae-many' for a figure of n pieces that needs the smaller labels and the wider frame."""
    return " ae-many" if n >= SMALL_LABELS_FROM else ""


def readout_hint(n: int, hint: str) -> str:
    """The line under a figure of n pieces before a cell is picked (markup of the code's own
    words): where labels are thinned, how many pieces carry one, then `hint` (how to read a
    cell). Wide screens and phones thin differently: each says its own in a span that the
    figure styles show only on its kind of screen."""
    wide_step = -(-n // MAX_LABELS)  # ceil: token_ticks' step for MAX_LABELS labels
    phone_step = -(-n // PHONE_LABELS)
    notes = [
        f'<span class="{kind}">One piece in {step} is labelled. </span>'
        for kind, step in (("ae-wide-note", wide_step), ("ae-phone-note", phone_step))
        if step > 1
    ]
    return "".join(notes) + hint


def number_text(steps: int) -> str:
    """A cell's printed weight from its k / WEIGHT_STEPS: 2 decimals, halves rounded up, no
    leading zero ('.37'; '1.0' for 1). Integer arithmetic, as HEAD_SWITCH_JS does it."""
    hundredths = (steps + charts.WEIGHT_STEPS // 200) // (charts.WEIGHT_STEPS // 100)
    return "1.0" if hundredths >= 100 else f".{hundredths:02d}"


@dataclass(frozen=True)
class HeadGrid:
    """An attention grid whose sliders switch its head in the browser.

    figure: the grid of the head shown, whose data-heads holds that head alone and whose
    data-store names the element that holds every head. stores(): that element, built when it
    is drawn. display.show_html_figure sends the figure first and the stores after it: the
    figure is what a visitor waits for after a keystroke, and every head's packed weights
    (~0.2 MB for MiniLM at 32 pieces) would otherwise be built, sent and parsed before it.
    """

    figure: HtmlFigure
    stores: Callable[[], HtmlFigure]


def attention_grid(
    attentions: np.ndarray,
    tokens: Sequence[str],
    layer: int,
    head: int,
    every_head: bool,
    title_of: Callable[[int, int], str] = charts.head_title,
    note_of: Callable[[int, int], str] | None = None,
    name: str = "",
    masked: bool = False,
) -> HtmlFigure | HeadGrid:
    """The HTML figure of head (layer, head); with every head when every_head (a HeadGrid).

    attentions: (L, H, n, n). The cells are painted for the head asked for. A store maps index
    l·H + h to what HEAD_SWITCH_JS needs to paint (and hover) head h of layer l: the figure
    carries the one shown, and a HeadGrid's stores every head (the sliders then switch it in
    the browser). title_of(l, h), note_of(l, h): head h of layer l's title and the line under
    it, the code's own words (charts.head_title's by default, and no line). name: the figure's
    data-figure attribute, by which tests find it, if given. masked: the run had a causal mask:
    the keys after each query are covered by hatched grey (masked_rows), not shown as weights
    of 0.
    """
    n_layers, n_heads, n, _ = attentions.shape
    shown_index = layer * n_heads + head
    carried = range(n_layers * n_heads) if every_head else [shown_index]
    titles = {index: title_of(*divmod(index, n_heads)) for index in carried}

    def note(index: int) -> str:
        parts = [note_of(*divmod(index, n_heads)) if note_of else "", MASKED_NOTE if masked else ""]
        return " · ".join(part for part in parts if part)

    notes = {index: note(index) for index in carried}
    (shown,) = _stores(attentions[layer, head][None], [titles[shown_index]], [notes[shown_index]])
    weights = np.round(attentions[layer, head].astype(np.float64), 4)  # (n_q, n_k) as stored
    # Up to display_policy.NUMBERS_UP_TO pieces, one element per cell with its number; past it,
    # one image: 16,000 cells at 128 pieces were slow to sanitise, parse and lay out
    # (bench/RESULTS.md).
    numbers = display_policy.matrix_form(n, n) == "numbers"
    rgb = cell_rgb(weights, shown["zmax"])  # (n_q, n_k, 3)
    steps = np.rint(weights * charts.WEIGHT_STEPS).astype(int)  # (n_q, n_k) as packed
    labels = [literal(token) for token in tokens]
    label_classes = _label_classes(n)
    upright = charts.upright_fits(list(tokens))
    gap = "1px" if numbers else "0"  # the image's cells touch
    gradient = ", ".join(VIRIDIS)

    cells: list[str] = ['<span class="ae-corner"></span>']
    # the top row: one key label per column
    key_class = "ae-key ae-upright" if upright else "ae-key"
    cells += [f'<span class="{key_class} {label_classes[j]}">{labels[j]}</span>' for j in range(n)]
    if numbers:  # one row per query: its label, then its weight over every key, printed
        colours, inks = hex_colours(rgb), ink_on(rgb)  # (n_q, n_k) each
        for i in range(n):
            cells.append(f'<span class="ae-query {label_classes[i]}">{labels[i]}</span>')
            cells += [
                f'<i style="background:{colours[i, j]};color:{inks[i, j]}">'
                f"{number_text(steps[i, j])}</i>"
                for j in range(n)
            ]
    else:  # the query labels down column 1, and one image of n × n pixels over the cells' area
        cells += [f'<span class="ae-query {label_classes[i]}">{labels[i]}</span>' for i in range(n)]
        image = png_data_uri(rgb)
        place = f"grid-row:2 / span {n};grid-column:2 / span {n}"
        cells.append(
            f'<img class="ae-cells" alt="attention weights: rows are queries, columns keys" '
            f'style="{place}" src="{image}">'
        )
    if masked:
        cells += masked_rows(n)
    cells += _colour_bar(n + 2, n, gradient, "weight", shown["top"], "0")

    store_json = json.dumps({shown_index: shown}, separators=(",", ":"))
    store_id = _store_id(attentions, titles, notes) if every_head else ""
    attributes = (
        (f'data-figure="{escape(name, quote=True)}" ' if name else "")
        + (f'data-store="{store_id}" ' if every_head else "")
        + f'data-every-head-of="{n_heads}" data-pieces="{n}" '
        f'data-steps="{charts.WEIGHT_STEPS}" data-shown="{shown_index}" '
        f'data-heads="{escape(store_json, quote=True)}"'
    )
    figure = HtmlFigure(
        f'<figure class="ae-heatmap{many_class(n)}" {attributes}>'
        f'<figcaption><b class="ae-title">{escape(shown["title"])}</b>'
        f'<span class="ae-note">{escape(shown["note"])}</span></figcaption>'
        '<div class="ae-body">'
        '<span class="ae-axis ae-axis-query">query (attending)</span>'
        f'<div class="ae-grid" style="--pieces:{n};gap:{gap}">{"".join(cells)}</div>'
        "</div>"
        '<div class="ae-axis ae-axis-key">key (attended to)</div>'
        f'<div class="ae-readout" aria-live="polite">{readout_hint(n, READOUT_HINT)}</div>'
        "</figure>"
    )
    if not every_head:
        return figure

    def every_store() -> HtmlFigure:
        heads = attentions.reshape(n_layers * n_heads, n, n)  # (L·H, n, n), index l·H + h
        stores = _stores(heads, list(titles.values()), list(notes.values()))
        return stores_element(dict(enumerate(stores)), store_id)[1]

    return HeadGrid(figure, every_store)


def _store_id(attentions: np.ndarray, titles: Mapping[int, str], notes: Mapping[int, str]) -> str:
    """The id of a figure's every-head stores, from what they are made of (the weights, titles
    and notes): known before they are built, and never another sentence's or figure's."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(np.ascontiguousarray(attentions, dtype=np.float32).tobytes())
    digest.update(json.dumps([list(titles.values()), list(notes.values())]).encode())
    return digest.hexdigest()


MASKED_NOTE = "hatched: masked, later keys a query may not see"
# Grey stripes over the weights' colours: the cells are there, a causal mask hides them.
MASKED_STYLE = (
    "background:repeating-linear-gradient(135deg,rgba(150,150,150,.92) 0 4px,"
    "rgba(215,215,215,.92) 4px 7px)"
)


def masked_rows(n: int) -> list[str]:
    """One hatched strip per query row over the keys after it (key j > query i), laid on the
    grid's cells (row i + 2, columns i + 3 on: the labels take row 1 and column 1). They are
    not cells (<i>), so the in-browser head switch repaints the weights under them and leaves
    them in place; pointing at one says "masked"."""
    return [
        f'<span class="ae-masked" title="masked: a later key query {i} may not see" '
        f'style="grid-row:{i + 2};grid-column:{i + 3} / span {n - 1 - i};{MASKED_STYLE}"></span>'
        for i in range(n - 1)
    ]


def one_head_grid(
    weights: np.ndarray,
    tokens: Sequence[str],
    layer: int,
    head: int,
    n_layers: int,
    n_heads: int,
    note_of: Callable[[int, int], str] | None = None,
    name: str = "",
    masked: bool = False,
    title_of: Callable[[int, int], str] = charts.head_title,
) -> HtmlFigure:
    """attention_grid of head (layer, head) of a model of n_layers × n_heads, from that head's
    (n, n) weights alone: for inputs too long to carry every head, or weights of a run the
    page's sliders cannot switch to in the browser (the sliders then rerun)."""
    # (L, H, n, n) of strides (0, 0, ·, ·): a view of the one head, of which only
    # [layer, head] is read, so no L·H copies are made
    every = np.broadcast_to(weights, (n_layers, n_heads, *np.shape(weights)))
    return attention_grid(
        every,
        tokens,
        layer,
        head,
        False,
        title_of=title_of,
        note_of=note_of,
        name=name,
        masked=masked,
    )


def model_view(
    thumbs: np.ndarray, selected: tuple[int, int], title: str, note: str = "", name: str = ""
) -> HtmlFigure:
    """Every head at once (bertviz's model view): thumbs (L, H, m, m), each head one image of
    m × m pixels, Viridis from 0 to the largest weight shown, labelled H h, the selected head
    framed. A layer's heads sit in a row of their own: H of them on a wide screen, at most six
    on a phone, where a tile is then a finger wide (the styles reflow them; ~14 px tiles in a
    plotly grid were too small to tap). ui/js/model_view.js moves the frame with the page's
    sliders and turns a click or tap on a head into slider moves. title, note: the code's own
    words; no visitor text reaches this figure.
    """
    n_layers, n_heads, m, _ = thumbs.shape
    shown = np.nan_to_num(np.round(np.asarray(thumbs, dtype=np.float64), 3))  # (L, H, m, m)
    zmax = float(shown.max()) if shown.size and shown.max() > 0 else 1.0
    per_phone_row = -(-n_heads // -(-n_heads // 6))  # H split into equal rows of at most 6
    rows = []
    for layer in range(n_layers):
        tiles = []
        for head in range(n_heads):
            framed = " ae-mv-on" if (layer, head) == tuple(selected) else ""
            image = png_data_uri(cell_rgb(shown[layer, head], zmax))
            tiles.append(
                f'<span class="ae-mv-tile{framed}" data-layer="{layer}" data-head="{head}" '
                f'title="layer {layer}, head {head}">'
                f'<img alt="layer {layer}, head {head}" src="{image}">'
                f'<span class="ae-mv-h">H{head}</span></span>'
            )
        rows.append(
            f'<div class="ae-mv-layer"><span class="ae-mv-l">L{layer}</span>'
            f'<div class="ae-mv-tiles" style="--heads:{n_heads};--phone-heads:{per_phone_row}">'
            f"{''.join(tiles)}</div></div>"
        )
    gradient = ", ".join(VIRIDIS)
    legend = (
        '<div class="ae-mv-scale"><span>weight 0</span>'
        f'<span class="ae-mv-ramp" style="background:linear-gradient(to right, {gradient})">'
        f"</span><span>{zmax:.3g}</span></div>"
    )
    layer_of, head_of = selected
    attributes = (
        f'data-figure="{escape(name, quote=True)}" ' if name else ""
    ) + f'data-every-head-of="{n_heads}" data-shown="{layer_of * n_heads + head_of}"'
    return HtmlFigure(
        f'<figure class="ae-model-view" {attributes}>'
        f'<figcaption><b class="ae-title">{escape(title)}</b>'
        f'<span class="ae-note">{escape(note)}</span></figcaption>'
        f"{''.join(rows)}{legend}</figure>"
    )


READOUT_HINT = "Click or tap a cell: its query, key and weight show here."
CELL_HINT = "Click or tap a cell: its row, column and value show here."  # a value grid's image


# ---- every head's stores of a plotly figure, beside it -------------------------------------
STORES_CLASS = "ae-stores"


def stores_element(
    stores: list[dict] | dict[int, dict], store_id: str | None = None
) -> tuple[str, HtmlFigure]:
    """(id, markup): a hidden element whose data-heads holds a figure's stores as JSON.

    stores: an every-head plotly figure's layout.meta["heads"], or an attention grid's by index
    l·H + h: their titles are the code's own words or escape.literal()'s text, the rest numbers
    and base64. The JSON is escaped as an attribute value, so nothing in it is read as markup.
    The id (store_id, or else a hash of the stores) is what its figure names it by: a figure
    finds the stores it was drawn with, and never meets another sentence's.
    """
    stores_json = json.dumps(stores, separators=(",", ":"))
    if store_id is None:
        store_id = hashlib.blake2b(stores_json.encode(), digest_size=8).hexdigest()
    markup = (
        f'<div class="{STORES_CLASS}" hidden data-store="{store_id}" '
        f'data-heads="{escape(stores_json, quote=True)}"></div>'
    )
    return store_id, HtmlFigure(markup)


# ---- a small matrix with its numbers, as HTML ----------------------------------------------
# The toy matrices of 0 · Attention by hand are the first thing a beginner sees, and all three of
# them are a few cells with their numbers written in: a page that draws them with plotly loads
# plotly.js (most of a plain app's page load, bench/bench_browser.py) for twelve coloured squares.
ColourScale = Sequence[tuple[float, str]]  # plotly's form: (position 0..1, colour), in order


def _channels(colour: str) -> tuple[int, int, int]:
    """'#rrggbb' or 'rgb(r, g, b)' (the two forms plotly's scales use) -> (r, g, b)."""
    if colour.startswith("#"):
        return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)
    red, green, blue = (int(float(c)) for c in colour[colour.index("(") + 1 : -1].split(",")[:3])
    return red, green, blue


def scale_rgb(values: np.ndarray, scale: ColourScale, low: float, high: float) -> np.ndarray:
    """(n, m) values -> (n, m, 3) uint8: their colours on a plotly colour scale from low to high,
    linear between its stops, as plotly paints a heatmap. A flat range paints the middle."""
    positions = np.array([position for position, _ in scale])  # (stops,)
    stops = np.array([_channels(colour) for _, colour in scale], dtype=np.float64)  # (stops, 3)
    values = np.asarray(values, dtype=np.float64)  # (n, m)
    span = high - low
    where = (values - low) / span if span > 0 else np.full(values.shape, 0.5)  # (n, m) in 0..1
    where = np.clip(np.nan_to_num(where, nan=0.5), 0.0, 1.0)
    rgb = np.stack([np.interp(where, positions, stops[:, c]) for c in range(3)], axis=-1)
    return np.floor(rgb + 0.5).astype(np.uint8)  # (n, m, 3)


def value_grid(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    title: str,
    scale: ColourScale,
    value_range: tuple[float, float],
    decimals: int,
    bar_title: str,
    axis_titles: tuple[str, str],
    name: str,
    fractions: bool = False,
    blank: str = "masked",
) -> HtmlFigure:
    """An (n, m) matrix as coloured cells: every value written in its cell up to
    display_policy.NUMBERS_UP_TO rows and columns, one image past that (at most
    display_policy.IMAGE_UP_TO on either side).

    fractions: the values are weights or shares in 0..1, written as the Overview writes them
    (number_text: '.07', '1.0'), two decimals in three characters, where '0.07' would not fit.

    row_labels, column_labels: visitor text (word pieces, words), escaped here. value_range:
    the colour scale's bottom and top. bar_title and axis_titles (rows, columns): the code's own
    words; an underscore in bar_title subscripts what follows. name: the figure's
    data-figure attribute, by which tests find it. A value that is not finite is an empty
    cell, and blank (the code's own words) says why: a masked score, by default. Written cells
    say what they are in a tooltip (hover), and their number is printed, so a phone, without
    hover, loses nothing. The image's cells are too many to print: display.HEAD_SWITCH_JS
    names the one under the pointer, and writes a clicked or tapped one under the figure, from
    the figure's data-values (the numbers as text).
    """
    n_rows, n_columns = matrix.shape
    if max(n_rows, n_columns) > display_policy.IMAGE_UP_TO:
        raise ValueError(f"value_grid draws at most {display_policy.IMAGE_UP_TO} rows and columns")
    values = np.asarray(matrix, dtype=np.float64)
    low, high = value_range
    rgb = scale_rgb(values, scale, low, high)  # (n, m, 3)
    rows = [literal(label) for label in row_labels]
    columns = [literal(label) for label in column_labels]
    numbers = display_policy.matrix_form(n_rows, n_columns) == "numbers"
    if numbers:
        dense = n_columns > display_policy.DENSE_FROM  # narrow cells: smaller type, shorter numbers
        kind = "ae-matrix ae-dense" if dense else "ae-matrix"
        key_class = "ae-key ae-upright" if charts.upright_fits(list(column_labels)) else "ae-key"
        cells = _written_cells(
            values,
            rows,
            columns,
            rgb,
            decimals=decimals,
            fractions=fractions,
            dense=dense,
            key_class=key_class,
            blank=escape(blank),
        )
    else:
        kind = "ae-matrix ae-image" + many_class(max(n_rows, n_columns))
        cells = _image_cells(values, rows, columns, rgb, list(column_labels))
    bar_decimals = 2 if fractions else decimals  # the ends as precisely as the cells
    cells += _colour_bar(
        n_columns + 2,
        n_rows,
        _scale_gradient(scale),
        charts.subscripts(escape(bar_title)),  # x_i·x_j as on the plotly maps
        f"{high:.{bar_decimals}f}",
        f"{low:.{bar_decimals}f}",
    )
    row_title, column_title = (escape(text) for text in axis_titles)
    hint = readout_hint(max(n_rows, n_columns), CELL_HINT)
    readout = "" if numbers else f'<div class="ae-readout" aria-live="polite">{hint}</div>'
    data = (
        ""
        if numbers
        else f' data-rows="{n_rows}" data-columns="{n_columns}" '
        f'data-values="{_values_text(values)}" data-blank="{escape(blank, quote=True)}"'
    )
    return HtmlFigure(
        f'<figure class="{kind}" data-figure="{escape(name, quote=True)}"{data}>'
        f'<figcaption><b class="ae-title">{escape(title)}</b></figcaption>'
        '<div class="ae-body">'
        f'<span class="ae-axis ae-axis-query">{row_title}</span>'
        f'<div class="ae-grid" style="--pieces:{n_columns};gap:{"1px" if numbers else "0"}">'
        f"{''.join(cells)}</div>"
        "</div>"
        f'<div class="ae-axis ae-axis-key">{column_title}</div>'
        f"{readout}"
        "</figure>"
    )


def _written_cells(
    values: np.ndarray,
    rows: list[str],
    columns: list[str],
    rgb: np.ndarray,
    *,
    decimals: int,
    fractions: bool,
    dense: bool,
    key_class: str,
    blank: str,
) -> list[str]:
    """A small grid's corner, column labels, and per row its label and its cells, each with
    its number and tooltip. rows, columns: labels already through literal(); blank: what an
    empty cell's tooltip says, escaped."""
    colours, inks = hex_colours(rgb), ink_on(rgb)  # (n, m) each
    cells: list[str] = ['<span class="ae-corner"></span>']
    cells += [f'<span class="{key_class}">{label}</span>' for label in columns]
    for i, row in enumerate(rows):
        cells.append(f'<span class="ae-query">{row}</span>')
        for j, column in enumerate(columns):
            value = values[i, j]
            if not np.isfinite(value):
                cells.append(f'<i class="ae-gap" title="{row} · {column}: {blank}"></i>')
                continue
            if fractions:  # as k / WEIGHT_STEPS, rounded as the Overview's cells are
                number = number_text(round(float(value) * charts.WEIGHT_STEPS))
            else:  # never "-0.0"; in a dense grid at most 4 characters, as plotly's were
                number = charts.cell_number(float(value), decimals, compact=dense)
            cells.append(
                f'<i style="background:{colours[i, j]};color:{inks[i, j]}" '
                f'title="{row} · {column}: {number}">{number}</i>'
            )
    return cells


def _image_cells(
    values: np.ndarray,
    rows: list[str],
    columns: list[str],
    rgb: np.ndarray,
    column_text: list[str],
) -> list[str]:
    """A large grid's corner, thinned labels on both sides, and one image of its cells (a
    pixel each, a masked one transparent). rows, columns: labels already through literal();
    column_text: the same unescaped, to measure whether they fit upright."""
    n_rows, n_columns = values.shape
    alpha = np.where(np.isfinite(values), 255, 0).astype(np.uint8)[..., None]  # (n, m, 1)
    image = png_data_uri(np.concatenate([rgb, alpha], axis=-1))  # (n, m, 4) RGBA
    row_classes, column_classes = _label_classes(n_rows), _label_classes(n_columns)
    upright = charts.upright_fits(column_text)
    key_class = "ae-key ae-upright" if upright else "ae-key"
    cells = ['<span class="ae-corner"></span>']
    cells += [
        f'<span class="{key_class} {column_classes[j]}">{label}</span>'
        for j, label in enumerate(columns)
    ]
    cells += [
        f'<span class="ae-query {row_classes[i]}">{label}</span>' for i, label in enumerate(rows)
    ]
    # Square cells, unless that makes the figure over 1.5 times as tall as it is wide (a long
    # sentence's 8-wide queries) or its rows thinner than 1/24 of its width (six methods'
    # scores over 32 pieces), where labels would overlap. How many labels show: at most
    # MAX_LABELS a side, PHONE_LABELS in a figure under 26rem wide (preload's styles).
    # A narrow figure (a phone) keeps at least 0.8rem for each row label it can show, so six
    # methods' names do not run into each other: the image then stretches, not the labels.
    height = min(max(n_rows / n_columns, min(n_rows / 24, 1.0)), 1.5)  # per unit of width
    shown_rows = min(n_rows, PHONE_LABELS)
    place = (
        f"grid-row:2 / span {n_rows};grid-column:2 / span {n_columns};aspect-ratio:1 / {height:.4f};"
        f"min-height:{0.8 * shown_rows:g}rem"
    )
    cells.append(
        f'<img class="ae-cells" alt="{n_rows} × {n_columns} values, one pixel each" '
        f'style="{place}" src="{image}">'
    )
    return cells


def _values_text(values: np.ndarray) -> str:
    """(n, m) values -> their text, row after row, comma-separated, for the readout: four
    significant digits (a share of 1/40 is 0.025 to three decimals, 0.02497 here), a masked
    value empty, never "-0" (+ 0.0 turns -0.0 into 0.0). Numbers only, so the attribute needs
    no escaping beyond its quotes."""
    return ",".join(
        f"{value + 0.0:.4g}" if np.isfinite(value) else "" for value in values.ravel().tolist()
    )


def value_strip(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    title: str,
    scale: ColourScale,
    value_range: tuple[float, float],
    bar_title: str,
    column_title: str,
    name: str,
) -> HtmlFigure:
    """A few rows of many columns (a sentence's 384-wide vectors) as one image, a pixel per
    value stretched to a band per row, beside the row labels and a colour bar.

    Too many values to print: the figure says the page's CSV holds them. row_labels: visitor
    text, escaped here; title, bar_title and column_title: the code's own words (the rows need
    no title: a few bands are shorter than one written sideways). name: the figure's
    data-figure attribute, by which tests find it.
    """
    n_rows, n_columns = matrix.shape
    low, high = value_range
    rgb = scale_rgb(np.asarray(matrix, dtype=np.float64), scale, low, high)  # (n, m, 3)
    rows = [literal(label) for label in row_labels]
    cells = [
        '<span class="ae-corner"></span>',
        # the first and the last column's index, at the ends of the band
        f'<span class="ae-strip-ends"><span>0</span><span>{n_columns - 1}</span></span>',
    ]
    cells += [f'<span class="ae-query">{label}</span>' for label in rows]
    place = f"grid-row:2 / span {n_rows};grid-column:2;height:calc({n_rows} * 1.6rem)"
    cells.append(
        f'<img class="ae-cells ae-strip" style="{place}" src="{png_data_uri(rgb)}" '
        f'alt="{n_rows} × {n_columns} values, one pixel each" '
        f'title="{n_rows} × {n_columns} values: the CSV below holds every number">'
    )
    cells += _colour_bar(
        3, n_rows, _scale_gradient(scale), escape(bar_title), f"{high:.2f}", f"{low:.2f}"
    )
    return HtmlFigure(
        f'<figure class="ae-matrix ae-wide" data-figure="{escape(name, quote=True)}">'
        f'<figcaption><b class="ae-title">{escape(title)}</b></figcaption>'
        '<div class="ae-body">'
        f'<div class="ae-grid" style="--pieces:1;gap:0">{"".join(cells)}</div>'
        "</div>"
        f'<div class="ae-axis ae-axis-key">{escape(column_title)}</div>'
        "</figure>"
    )


# ---- grouped bars, as HTML --------------------------------------------------------------------
def bar_rows(
    labels: Sequence[str],
    series: Mapping[str, np.ndarray],
    title: str,
    value_title: str,
    colours: Sequence[str],
    name: str,
    log_floor: float | None = None,
    highlight: int | None = None,
    highlight_colour: str = "",
    largest: float | None = None,
    decimals: int = 2,
    signed: bool = False,
) -> HtmlFigure:
    """Non-negative values of a few labels as horizontal bars: one row per label, one bar per
    series in it, with the number written after each bar.

    signed: the values may be negative (scores): a bar grows from a zero line drawn in every
    row, leftwards below zero, over a scale from the lowest value (or 0) to the largest (or 0).

    log_floor: bars on a log scale from this value (for values a million times apart, such as
    rounding errors beside real differences), each number written as 1.2e-07, and the axis
    says so. A value at or below the floor has no bar. highlight: one label whose bars are
    painted highlight_colour and whose label is bold (the word a chart is about). largest: the
    value a full-length bar stands for, when bars must compare with another figure's (by
    default this figure's largest value). decimals: of the numbers written after the bars.

    labels and the series' names: visitor text (word pieces, sentences), escaped here. title:
    text as a plotly title takes it, the code's own words with any visitor text already through
    escape.literal() (whose character references the browser decodes back). value_title: the
    code's own words. colours: one per series, in order. Every bar's length is
    its share of the largest value, so bars of different series compare. name: the figure's
    data-figure attribute, by which tests find it.
    """
    rows = np.array([np.asarray(values, dtype=np.float64) for values in series.values()]).T
    if rows.shape[0] != len(labels):  # (n_labels, n_series)
        raise ValueError(f"{len(labels)} labels but {rows.shape[0]} values per series")
    if (rows < 0).any() and not signed:
        raise ValueError("bar_rows draws lengths from zero: the values must not be negative")
    if signed and (log_floor is not None or largest is not None):
        raise ValueError("signed bars span their own values, on a linear scale")
    if RAW_MARKUP.search(title):
        raise ValueError("bar_rows' title holds raw markup: visitor text goes through literal()")
    shared_scale = largest is not None  # another figure's bars compare with these
    if largest is None:
        largest = float(rows.max()) if rows.size and rows.max() > 0 else 1.0
    starts = np.zeros(rows.shape)  # (labels, series): where each bar starts, as a share
    zero_line = ""  # a signed row's style attribute: a thin grey line at zero
    if signed:
        low, high = min(float(rows.min()), 0.0), max(float(rows.max()), 0.0)
        span = high - low if high > low else 1.0
        zero = -low / span  # the zero line's place along the row, 0..1
        lengths = np.abs(rows) / span
        starts = zero + np.minimum(rows, 0.0) / span
        scale_note = "bar: from the grey line at 0, leftwards below 0"
        at = f"calc((100% - 3.6rem) * {zero:.4f})"
        zero_line = (
            f' style="background:linear-gradient(90deg,transparent {at},#888888 {at},'
            f'#888888 calc({at} + 1px),transparent calc({at} + 1px))"'
        )
    elif log_floor is not None:  # (labels, series) shares of the log distance floor -> largest
        decades = max(np.log10(largest / log_floor), 1e-12)
        lengths = np.clip(np.log10(np.maximum(rows, log_floor) / log_floor) / decades, 0.0, 1.0)
        scale_note = f"bar: log scale from {log_floor:.0e} to the largest"
    else:
        lengths = rows / largest  # (labels, series)
        scale_note = (
            f"a full bar: {largest:.2f}" if shared_scale else "the longest bar: the largest"
        )
    names = [literal(series_name) for series_name in series]
    legend = "".join(  # a swatch never parts from its name at a line break
        f'<span class="ae-key-item"><span class="ae-swatch" style="background:{colours[k]}">'
        f"</span>{names[k]}</span>"
        for k in range(len(names))
    )
    cells: list[str] = []
    for i, label in enumerate(labels):
        shown = literal(label)
        marked = i == highlight
        label_class = "ae-bar-label ae-marked" if marked else "ae-bar-label"
        cells.append(
            f'<span class="{label_class}" style="grid-row:span {len(names)}">{shown}</span>'
        )
        for k, value in enumerate(rows[i]):
            number = f"{value:.1e}" if log_floor is not None else f"{value:.{decimals}f}"
            row_class = "ae-bar-row ae-group-end" if k == len(names) - 1 else "ae-bar-row"
            start = f"margin-left:calc((100% - 3.6rem) * {starts[i, k]:.4f});" if signed else ""
            cells.append(
                f'<span class="{row_class}" title="{shown} · {names[k]}: {number}"{zero_line}>'
                # the row's width less room for the number, times the value's share
                f'<span class="ae-bar" style="width:calc((100% - 3.6rem) * {lengths[i, k]:.4f});'
                f"{start}"
                f'background:{highlight_colour if marked else colours[k]}"></span>{number}</span>'
            )
    return HtmlFigure(
        f'<figure class="ae-bars" data-figure="{escape(name, quote=True)}">'
        f'<figcaption><b class="ae-title">{title}</b>'  # literal()'s output, as for plotly
        f'<span class="ae-legend">{legend}</span></figcaption>'
        f'<div class="ae-bar-grid">{"".join(cells)}</div>'
        f'<div class="ae-axis ae-axis-key">{escape(value_title)} ({escape(scale_note)})</div>'
        "</figure>"
    )
