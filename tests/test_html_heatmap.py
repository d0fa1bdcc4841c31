"""The Overview's heatmap drawn as HTML (ui/html_heatmap.py), read back the way a browser would."""

from __future__ import annotations

import base64
import io
import json
import re
from decimal import ROUND_HALF_UP, Decimal
from html.parser import HTMLParser

import numpy as np
import plotly.colors
import pytest

from ui import charts, html_heatmap

HOSTILE = ["[CLS]", "<img src=x onerror=alert(1)>", 'a"b', "&amp;", "**bold**", "[SEP]"]


VOID_TAGS = {"img", "br", "input", "meta", "link"}  # elements with no end tag
TEXT_CLASSES = ("ae-title", "ae-note", "ae-top", "ae-readout")


class Figure(HTMLParser):
    """The parts of the figure a visitor sees: the grid's children in order (tag, class, style,
    text, src), the texts of the title, note, colour-bar top and readout, the attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.children: list[dict] = []
        self.figure_attrs: dict[str, str] = {}
        self.texts: dict[str, str] = {}
        self.tags: set[str] = set()
        self._open: list[dict] = []  # the elements open at this point, outermost first

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.add(tag)
        attributes = dict(attrs)
        classes = attributes.get("class", "").split()
        if tag == "figure":
            self.figure_attrs = attributes
        child = None
        if self._open and "ae-grid" in self._open[-1]["classes"]:
            child = {
                "tag": tag,
                "class": " ".join(classes),
                "style": attributes.get("style", ""),
                "src": attributes.get("src", ""),
                "text": "",
            }
            self.children.append(child)
        if tag not in VOID_TAGS:
            self._open.append({"classes": classes, "child": child})

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for element in self._open:
            if element["child"] is not None:
                element["child"]["text"] += data
            for name in TEXT_CLASSES:
                if name in element["classes"]:
                    self.texts[name] = self.texts.get(name, "") + data


def read(html: str) -> Figure:
    figure = Figure()
    figure.feed(html)
    return figure


def attentions_of(n: int, seed: int = 0) -> np.ndarray:
    """(2, 4, n, n) attention-like rows (each sums to 1), far from symmetric. Two layers of four
    heads: layer·4 + head and head·2 + layer name different heads, so a swap shows."""
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(n, 0.3), size=(2, 4, n)).astype(np.float32)


def grid_cells(figure: Figure, n: int) -> list[list[dict]]:
    """(n_q, n_k) the cells in the grid's row order: row 0 of children is the key labels."""
    rows = [figure.children[r * (n + 1) : (r + 1) * (n + 1)] for r in range(n + 1)]
    return [row[1:] for row in rows[1:]]


def background(cell: dict) -> str:
    return dict(part.split(":", 1) for part in cell["style"].split(";"))["background"]


def test_colours_are_plotlys_viridis_on_the_same_range():
    """An independent computation: plotly's own sampling of its Viridis scale."""
    weights = np.linspace(0.0, 1.0, 101)[None, :] * 0.6  # (1, 101) up to zmax
    ours = html_heatmap.hex_colours(html_heatmap.cell_rgb(weights, zmax=0.6))[0]
    theirs = plotly.colors.sample_colorscale("Viridis", np.linspace(0.0, 1.0, 101).tolist())
    for mine, plotlys in zip(ours, theirs, strict=True):
        r, g, b = (float(v) for v in plotlys[4:-1].split(","))
        mine_rgb = [int(mine[i : i + 2], 16) for i in (1, 3, 5)]
        assert max(abs(a - c) for a, c in zip(mine_rgb, (r, g, b), strict=True)) <= 1, mine
    assert tuple(html_heatmap.VIRIDIS) == tuple(plotly.colors.sequential.Viridis)
    # above the top of the scale the colour stays at its end
    assert (
        html_heatmap.hex_colours(html_heatmap.cell_rgb(np.array([[0.9]]), zmax=0.6))[0, 0]
        == "#fde725"
    )


def test_the_switch_script_paints_with_the_same_stops():
    """HEAD_SWITCH_JS repaints a head in the browser: its colour stops are the module's."""
    from ui import widgets

    (stops,) = re.findall(r"const STOPS = (\[.*?\]\]);", widgets.HEAD_SWITCH_JS)
    assert json.loads(stops) == html_heatmap.stops_rgb()


def test_rows_are_queries_and_columns_keys_painted_for_the_head_asked_for():
    n = 6
    attentions = attentions_of(n)
    figure = read(
        html_heatmap.attention_grid(attentions, HOSTILE, layer=1, head=2, every_head=True)
    )
    cells = grid_cells(figure, n)
    weights = np.round(attentions[1, 2].astype(np.float64), 4)
    for i in range(n):
        for j in range(n):
            expected = html_heatmap.hex_colours(
                html_heatmap.cell_rgb(np.array([[weights[i, j]]]), 1.0)
            )[0, 0]
            assert background(cells[i][j]) == expected, (i, j)
    assert figure.texts["ae-title"] == "Layer 1, head 2: attention weights"
    assert figure.figure_attrs["data-shown"] == str(1 * 4 + 2)


def test_printed_weights_round_half_up_to_two_decimals():
    """Up to NUMBERS_UP_TO pieces each cell prints its weight (a phone has no hover)."""
    n = 5
    attentions = attentions_of(n, seed=3)
    attentions[0, 0, 0, :] = [
        0.125,
        0.005,
        0.995,
        0.0,
        0.0,
    ]  # exact halves, and 1.0 by rounding
    figure = read(html_heatmap.attention_grid(attentions, HOSTILE[:n], 0, 0, every_head=True))
    cells = grid_cells(figure, n)
    for i in range(n):
        for j in range(n):
            value = Decimal(str(round(float(attentions[0, 0, i, j]), 4)))
            hundredths = value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            expected = "1.0" if hundredths >= 1 else f"{hundredths:.2f}"[1:]
            assert cells[i][j]["text"] == expected, (i, j, value)
    assert [cells[0][j]["text"] for j in range(3)] == [".13", ".01", "1.0"]
    # black on light cells, white on dark ones
    assert "color:#000000" in cells[0][2]["style"] and "color:#ffffff" in cells[0][3]["style"]
    many = read(html_heatmap.attention_grid(attentions_of(13), ["w"] * 13, 0, 0, every_head=True))
    assert not [cell for cell in many.children if cell["tag"] == "i"]  # an image, no numbers


def image_rgb(figure: Figure) -> np.ndarray:
    """(n, n, 3) the pixels of the figure's cell image, decoded from its data: URI."""
    from PIL import Image

    (image,) = [c for c in figure.children if c["tag"] == "img"]
    prefix = "data:image/png;base64,"
    assert image["src"].startswith(prefix)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(image["src"][len(prefix) :]))))


def test_past_twelve_pieces_the_cells_are_one_image_rows_queries_columns_keys():
    """One pixel per cell (16,000 elements at 128 pieces were slow to build): pixel (i, j) is
    query i's weight on key j, painted as the cells would be; the image spans the cells' area."""
    n = 20
    attentions = attentions_of(n, seed=2)
    figure = read(
        html_heatmap.attention_grid(attentions, [f"t{i}" for i in range(n)], 1, 0, every_head=True)
    )
    weights = np.round(attentions[1, 0].astype(np.float64), 4)
    pixels = image_rgb(figure)
    assert pixels.shape == (n, n, 3)
    np.testing.assert_array_equal(pixels, html_heatmap.cell_rgb(weights, 1.0))
    assert not np.array_equal(pixels, html_heatmap.cell_rgb(weights.T, 1.0))
    (image,) = [c for c in figure.children if c["tag"] == "img"]
    assert (
        f"grid-row:2 / span {n}" in image["style"] and f"grid-column:2 / span {n}" in image["style"]
    )
    queries = [c["text"] for c in figure.children if "ae-query" in c["class"]]
    assert queries == [f"t{i}" for i in range(n)]


def test_visitor_tokens_are_text_and_no_markup_or_script_gets_through():
    n = len(HOSTILE)
    html = html_heatmap.attention_grid(attentions_of(n), HOSTILE, 0, 0, every_head=True)
    figure = read(html)
    queries = [c["text"] for c in figure.children if "ae-query" in c["class"]]
    keys = [c["text"] for c in figure.children if "ae-key" in c["class"]]
    assert queries == HOSTILE and keys == HOSTILE  # decoded, they are the tokens themselves
    assert figure.tags <= {
        "style",
        "figure",
        "figcaption",
        "b",
        "span",
        "div",
        "i",
        "img",
    }
    assert figure.texts["ae-readout"] == html_heatmap.READOUT_HINT
    assert "<img" not in html and "onerror=" not in html.replace("onerror&#61;", "")


def test_every_head_travels_in_the_figure_as_drawn():
    """data-heads holds, at l·H + h, head (l, h)'s weights at 4 decimals, title and scale."""
    n = 60  # above FITTED_SCALE_FROM keys: the colours run to the largest weight
    attentions = attentions_of(n, seed=1)
    figure = read(html_heatmap.attention_grid(attentions, ["w"] * n, 0, 1, every_head=True))
    stores = json.loads(figure.figure_attrs["data-heads"])
    assert sorted(map(int, stores)) == list(range(2 * 4))
    for layer in range(2):
        for head in range(4):
            store = stores[str(layer * 4 + head)]
            counts = np.frombuffer(base64.b64decode(store["weights"]), dtype="<u2")
            shown = counts.reshape(n, n) / charts.WEIGHT_STEPS
            np.testing.assert_allclose(shown, np.round(attentions[layer, head], 4), atol=1e-9)
            largest = float(np.round(attentions[layer, head].astype(np.float64), 4).max())
            assert store["zmax"] == pytest.approx(largest)
            assert store["title"] == charts.head_title(layer, head)
            assert store["note"] == charts.fitted_scale_note(largest)
    assert figure.texts["ae-note"] == stores["1"]["note"]
    assert figure.texts["ae-top"] == stores["1"]["top"]
    # past the in-browser bound the figure carries the head it shows, for its hover, and no other
    alone = read(html_heatmap.attention_grid(attentions, ["w"] * n, 1, 2, every_head=False))
    assert list(json.loads(alone.figure_attrs["data-heads"])) == [str(1 * 4 + 2)]
    assert alone.figure_attrs["data-shown"] == "6"


class Elements(HTMLParser):
    """Every start tag with its attributes, and any text outside the tags."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[tuple[str, dict]] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.started.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text += data


def test_a_plotly_figures_stores_are_one_hidden_element_of_text_only():
    """stores_element: the stores come back from data-heads as they went in, hostile titles
    included, in one hidden div; its id follows the stores, so another sentence's differ."""
    stores = [
        {"title": title, "zmax": 0.5, "weights": "AAEC"} for title in HOSTILE + ['"></div><b>']
    ]
    store_id, markup = html_heatmap.stores_element(stores)
    elements = Elements()
    elements.feed(markup)
    ((tag, attributes),) = elements.started
    assert tag == "div" and elements.text == ""
    assert set(attributes) == {"class", "hidden", "data-store", "data-heads"}
    assert attributes["class"] == html_heatmap.STORES_CLASS and attributes["data-store"] == store_id
    assert json.loads(attributes["data-heads"]) == stores
    assert re.fullmatch("[0-9a-f]{16}", store_id)
    assert html_heatmap.stores_element(stores)[0] == store_id
    assert html_heatmap.stores_element(stores[::-1])[0] != store_id


@pytest.mark.parametrize("n", [13, 40, 70, 100, 200, 512])
def test_long_inputs_label_every_kth_piece_and_fewer_on_a_phone(n):
    """Every label is there (the hover reads them); evenly spaced ones show: between half and
    all of MAX_LABELS on a wide screen, of PHONE_LABELS on a phone (GRID_CSS picks the class)."""
    figure = read(
        html_heatmap.attention_grid(
            attentions_of(n), [f"t{i}" for i in range(n)], 0, 0, every_head=False
        )
    )
    keys = [c for c in figure.children if "ae-key" in c["class"]]
    queries = [c for c in figure.children if "ae-query" in c["class"]]
    assert [c["text"] for c in keys] == [c["text"] for c in queries] == [f"t{i}" for i in range(n)]
    for name, most in (
        ("ae-wide", html_heatmap.MAX_LABELS),
        ("ae-narrow", html_heatmap.PHONE_LABELS),
    ):
        shown = [i for i, c in enumerate(keys) if name in c["class"].split()]
        assert min(n, most) // 2 <= len(shown) <= most, (name, len(shown))
        assert shown[0] == 0 and len(set(np.diff(shown))) <= 1, (
            name,
            shown,
        )  # evenly spaced
        assert shown == [i for i, c in enumerate(queries) if name in c["class"].split()]
