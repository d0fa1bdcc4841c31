"""The HTML figures of ui/html_heatmap.py (the Overview's heatmap, value grids and strips, bar
rows), read back the way a browser would and checked against plotly's own colour scales."""

from __future__ import annotations

import base64
import io
import json
import re
from decimal import ROUND_HALF_UP, Decimal
from html import unescape
from html.parser import HTMLParser

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import pytest

from ui import (
    charts,
    display,
    display_policy,
    explanations_charts,
    html_heatmap,
    matrix_charts,
)

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


STORES = re.compile(
    r'<div class="ae-stores" hidden data-store="([0-9a-f]{16})" data-heads="([^"<>]*)"></div>'
)


def read(html: str | html_heatmap.HeadGrid) -> Figure:
    """The figure as a browser reads it; a HeadGrid's every-head stores (its second element)
    in .every_head, checked to be the ones its data-store names."""
    figure = Figure()
    if not isinstance(html, html_heatmap.HeadGrid):
        figure.feed(html)
        return figure
    figure.feed(html.figure)
    ((store_id, heads),) = STORES.findall(html.stores())
    assert figure.figure_attrs["data-store"] == store_id
    figure.every_head = json.loads(unescape(heads))
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


def viridis(weights: np.ndarray, zmax: float) -> np.ndarray:
    """(n, m) weights -> (n, m, 3) uint8 written here, not read from html_heatmap.cell_rgb: plotly's
    Viridis hex stops, evenly spaced on [0, zmax], each channel interpolated by np.interp and
    rounded half up."""
    stops = np.array(
        [
            [int(hex_stop[i : i + 2], 16) for i in (1, 3, 5)]
            for hex_stop in plotly.colors.sequential.Viridis
        ],
        dtype=np.float64,
    )  # (10, 3)
    where = np.clip(np.asarray(weights, dtype=np.float64) / zmax, 0.0, 1.0)  # (n, m) in [0, 1]
    positions = np.linspace(0.0, 1.0, len(stops))  # (10,) where each stop sits
    rgb = np.stack([np.interp(where, positions, stops[:, c]) for c in range(3)], axis=-1)
    return np.floor(rgb + 0.5).astype(np.uint8)  # (n, m, 3)


def hex_of(rgb: np.ndarray) -> str:
    """(3,) uint8 -> '#rrggbb'."""
    return "#" + "".join(f"{int(v):02x}" for v in rgb)


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
    np.testing.assert_array_equal(html_heatmap.cell_rgb(weights, 0.6), viridis(weights, 0.6))
    # above the top of the scale the colour stays at its end
    assert (
        html_heatmap.hex_colours(html_heatmap.cell_rgb(np.array([[0.9]]), zmax=0.6))[0, 0]
        == "#fde725"
    )


def test_the_switch_script_paints_with_the_same_stops():
    """HEAD_SWITCH_JS repaints a head in the browser: its colour stops are the module's."""

    (stops,) = re.findall(r"const STOPS = (\[.*?\]\]);", display.HEAD_SWITCH_JS)
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
            expected = hex_of(viridis(weights[i, j], 1.0))
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
    np.testing.assert_array_equal(pixels, viridis(weights, 1.0))
    assert not np.array_equal(pixels, viridis(weights.T, 1.0))
    (image,) = [c for c in figure.children if c["tag"] == "img"]
    assert (
        f"grid-row:2 / span {n}" in image["style"] and f"grid-column:2 / span {n}" in image["style"]
    )
    queries = [c["text"] for c in figure.children if "ae-query" in c["class"]]
    assert queries == [f"t{i}" for i in range(n)]


def test_visitor_tokens_are_text_and_no_markup_or_script_gets_through():
    n = len(HOSTILE)
    grid = html_heatmap.attention_grid(attentions_of(n), HOSTILE, 0, 0, every_head=True)
    figure = read(grid)
    html = grid.figure + grid.stores()
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


def test_every_head_travels_beside_the_figure_as_drawn():
    """The stores element holds, at l·H + h, head (l, h)'s weights at 4 decimals, title and
    scale; the figure's own data-heads the head it shows, and nothing else."""
    n = 60  # above FITTED_SCALE_FROM keys: the colours run to the largest weight
    attentions = attentions_of(n, seed=1)
    figure = read(html_heatmap.attention_grid(attentions, ["w"] * n, 0, 1, every_head=True))
    stores = figure.every_head
    assert json.loads(figure.figure_attrs["data-heads"]) == {"1": stores["1"]}
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


def test_one_head_grid_is_the_attention_grid_of_that_head_alone():
    """one_head_grid(head's weights) draws what attention_grid draws from every head, for that
    head only (a view of it stands in for the others, no copies), hostile tokens as text."""
    n = len(HOSTILE)
    attentions = attentions_of(n, seed=2)
    whole = html_heatmap.attention_grid(attentions, HOSTILE, 1, 3, every_head=False, name="x")
    alone = html_heatmap.one_head_grid(attentions[1, 3].copy(), HOSTILE, 1, 3, 2, 4, name="x")
    assert alone == whole
    figure = read(alone)
    assert list(json.loads(figure.figure_attrs["data-heads"])) == [str(1 * 4 + 3)]
    assert [c["text"] for c in figure.children if "ae-query" in c["class"]] == HOSTILE
    assert "<img" not in alone


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


@pytest.mark.parametrize("n", [33, 48, 49, 100])
def test_labels_stay_until_they_cannot_be_read_then_the_line_says_how_to_read_a_cell(n):
    """Up to 48 pieces every label shows on a wide screen (from 33 in a smaller font and a wider
    frame); past that one piece in ceil(n / 48) is labelled, and the line under the figure says
    so before telling how to read a cell. A phone, labelling at most 16, says its own."""
    html = html_heatmap.attention_grid(
        attentions_of(n), [f"t{i}" for i in range(n)], 0, 0, every_head=False
    )
    figure = read(html)
    keys = [c for c in figure.children if "ae-key" in c["class"]]
    wide = [i for i, c in enumerate(keys) if "ae-wide" in c["class"].split()]
    step = 1 if n <= 48 else -(-n // 48)
    assert wide == list(range(0, n, step))
    assert 'class="ae-heatmap ae-many"' in html  # 10 px labels, a 52rem frame (preload's styles)
    wide_note = "" if step == 1 else f"One piece in {step} is labelled. "
    phone_note = f"One piece in {-(-n // 16)} is labelled. "
    assert figure.texts["ae-readout"] == wide_note + phone_note + html_heatmap.READOUT_HINT
    assert f'<span class="ae-phone-note">{phone_note}</span>' in html
    if step > 1:
        assert f'<span class="ae-wide-note">{wide_note}</span>' in html
    few = html_heatmap.attention_grid(attentions_of(16), ["t"] * 16, 0, 0, every_head=False)
    assert "ae-many" not in few and read(few).texts["ae-readout"] == html_heatmap.READOUT_HINT


@pytest.mark.parametrize("n", [13, 40, 70, 100, 200, 512])
def test_long_inputs_label_every_kth_piece_and_fewer_on_a_phone(n):
    """Every label is there (the hover reads them); evenly spaced ones show: between half and
    all of MAX_LABELS on a wide screen, of PHONE_LABELS on a phone (the page's styles pick the class)."""
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


# ---- value_grid: a small matrix with its numbers (0 · Attention by hand) ------------------------
def attrs_of_cells(html: str) -> list[dict]:
    """Every cell's attributes, in row order, decoded as a browser decodes them."""

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.cells: list[dict] = []

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "i":
                self.cells.append(dict(attrs))

    parser = Cells()
    parser.feed(html)
    return parser.cells


def image_pixels(figure: Figure) -> np.ndarray:
    """(h, w, channels) the pixels of a figure's one image, decoded from its data: URI."""
    from PIL import Image

    (image,) = [c for c in figure.children if c["tag"] == "img"]
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(image["src"].split(",", 1)[1]))))


def grid_of(
    matrix: np.ndarray,
    rows: list[str],
    columns: list[str],
    scale_name: str = "Viridis",
    value_range: tuple[float, float] = (0.0, 1.0),
    decimals: int = 2,
    name: str = "grid",
) -> str:
    """html_heatmap.value_grid of these cells on plotly's named scale; the titles are fixed."""
    return html_heatmap.value_grid(
        np.asarray(matrix, dtype=np.float64),
        rows,
        columns,
        "t",
        plotly.colors.get_colorscale(scale_name),
        value_range,
        decimals=decimals,
        bar_title="value",
        axis_titles=("row", "column"),
        name=name,
    )


@pytest.mark.parametrize("scale_name", ["Viridis", "RdBu"])
@pytest.mark.parametrize("n_columns", [11, 41])  # cells of their own; past 12, one image
def test_value_grid_paints_plotlys_scale_over_the_range_given(scale_name, n_columns):
    """An independent computation: plotly's own sampling of the same named scale, whose ends
    are the range's ends; values past them keep the end colours."""
    scale = plotly.colors.get_colorscale(scale_name)
    low, high = -2.0, 3.0
    values = np.linspace(low, high, n_columns)[None, :]  # (1, m)
    html = grid_of(
        np.concatenate([values, [[low - 5] + [high + 5] * (n_columns - 1)]]),  # (2, m)
        ["a", "b"],
        [str(j) for j in range(n_columns)],
        scale_name,
        (low, high),
    )
    if n_columns <= display_policy.NUMBERS_UP_TO:
        cells = attrs_of_cells(html)
        painted = [background(cell) for cell in cells]  # '#rrggbb', row after row
        rgb = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in painted])
        rgb = rgb.reshape(2, n_columns, 3)
    else:
        assert not attrs_of_cells(html)
        rgb = image_pixels(read(html))[..., :3].astype(int)  # (2, m, 3) of RGBA
    theirs = plotly.colors.sample_colorscale(scale, np.linspace(0.0, 1.0, n_columns).tolist())
    for j, plotlys in enumerate(theirs):
        expected = [float(v) for v in plotlys[plotlys.index("(") + 1 : -1].split(",")]
        assert np.abs(rgb[0, j] - expected).max() <= 1, (j, rgb[0, j], plotlys)
    np.testing.assert_array_equal(rgb[1, 0], rgb[0, 0])  # below the range: the bottom colour
    np.testing.assert_array_equal(rgb[1, 1], rgb[0, -1])  # above it: the top colour


def test_value_grid_past_twelve_is_one_image_whose_values_travel_as_text():
    """Row i, column j of the image is matrix[i, j] (not its transpose); a masked value is a
    transparent pixel and an empty entry of data-values, which holds every value, row after row,
    to four significant digits for the readout. Labels stay text; square cells would make this
    20 × 7 figure three times as tall as wide, so it stops at 1.5."""
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(20, 7)) * 3
    matrix[4, 2] = -np.inf  # a masked score
    matrix[0, 0] = -0.0  # read out as "0", as the written cells never print "-0.0"
    rows = [HOSTILE[i % len(HOSTILE)] for i in range(20)]
    columns = [str(j) for j in range(7)]
    html = grid_of(matrix, rows, columns, "RdBu", (-9.0, 9.0), decimals=1, name="big")
    figure = read(html)
    assert figure.figure_attrs["class"] == "ae-matrix ae-image"
    assert (figure.figure_attrs["data-rows"], figure.figure_attrs["data-columns"]) == ("20", "7")
    pixels = image_pixels(figure)
    assert pixels.shape == (20, 7, 4)
    finite = np.where(np.isfinite(matrix), matrix, 0.0)
    expected = html_heatmap.scale_rgb(finite, plotly.colors.get_colorscale("RdBu"), -9.0, 9.0)
    shown = np.isfinite(matrix)
    np.testing.assert_array_equal(pixels[..., :3][shown], expected[shown])
    assert pixels[4, 2, 3] == 0 and (pixels[..., 3][shown] == 255).all()
    written = figure.figure_attrs["data-values"].split(",")
    assert len(written) == 20 * 7 and written[4 * 7 + 2] == "" and written[0] == "0"
    back = np.array([float(v) if v else np.nan for v in written]).reshape(20, 7)
    np.testing.assert_allclose(back[shown], matrix[shown], rtol=5e-4)
    assert [c["text"] for c in figure.children if "ae-query" in c["class"]] == rows
    assert [c["text"] for c in figure.children if "ae-key" in c["class"]] == columns
    # 20 rows: every label on a wide screen, one in 2 on a phone (at most 16), which says so
    assert figure.texts["ae-readout"] == "One piece in 2 is labelled. " + html_heatmap.CELL_HINT
    assert figure.tags <= {"style", "figure", "figcaption", "b", "span", "div", "img"}
    assert "<img src=x" not in html  # the hostile label's tag is text
    (image,) = [c for c in figure.children if c["tag"] == "img"]
    assert "grid-row:2 / span 20;grid-column:2 / span 7;aspect-ratio:1 / 1.5000" in image["style"]
    assert "min-height:12.8rem" in image["style"]  # 16 labels a phone shows, 0.8rem each


def test_value_grid_image_of_few_rows_keeps_room_for_their_labels():
    """Six methods over 23 pieces: square cells would give each row 1/23 of a phone's narrow
    figure (~9 px), under the labels' line; a minimum height of 0.8rem a row keeps them apart."""
    names = ["last-layer attention", "attention rollout", "attention flow", "norm rollout",
             "gradient × input", "integrated gradients"]  # fmt: skip
    figure = read(grid_of(np.zeros((6, 23)), names, [f"p{k}" for k in range(23)]))
    (image,) = [c for c in figure.children if c["tag"] == "img"]
    assert "aspect-ratio:1 / 0.2609" in image["style"] and "min-height:4.8rem" in image["style"]


def test_value_grid_refuses_more_than_it_can_draw_as_an_image():
    too_long = display_policy.IMAGE_UP_TO + 1
    with pytest.raises(ValueError, match="at most"):
        grid_of(np.zeros((too_long, 2)), ["x"] * too_long, ["a", "b"])


def test_value_grid_of_one_value_paints_the_scales_middle():
    """A flat range (one token: a 1 × 1 matrix, min = max) has no bottom or top to scale by."""
    scale = plotly.colors.get_colorscale("Viridis")
    html = html_heatmap.value_grid(
        np.array([[3.0]]), ["a"], ["a"], "S", scale, (3.0, 3.0), 0, "score", ("q", "k"), "one"
    )
    (cell,) = attrs_of_cells(html)
    (middle,) = plotly.colors.sample_colorscale(scale, [0.5])
    expected = [float(v) for v in middle[middle.index("(") + 1 : -1].split(",")]
    painted = background(cell)
    assert [int(painted[i : i + 2], 16) for i in (1, 3, 5)] == pytest.approx(expected, abs=1)


def test_value_grid_writes_every_number_in_row_order_and_masked_cells_stay_empty():
    matrix = np.array([[4.0, 2.0, -np.inf], [0.125, 6.0, 1.0]])  # rows a, b; columns x, y, z
    html = grid_of(matrix, ["a", "b"], ["x", "y", "z"], value_range=(0.0, 6.0), decimals=1)
    figure = read(html)
    numbers = [c["text"] for c in figure.children if c["tag"] == "i"]
    assert numbers == ["4.0", "2.0", "", "0.1", "6.0", "1.0"]
    tooltips = [cell["title"] for cell in attrs_of_cells(html)]
    assert tooltips[0] == "a · x: 4.0" and tooltips[2] == "a · z: masked"
    assert tooltips[5] == "b · z: 1.0"
    assert figure.figure_attrs == {"class": "ae-matrix", "data-figure": "grid"}
    # the colour bar's ends are the range's, written with the same decimals
    assert figure.texts["ae-top"] == "6.0"


def test_value_grid_shows_hostile_labels_as_text_even_in_tooltips():
    n = len(HOSTILE)
    html = grid_of(np.eye(n), HOSTILE, HOSTILE, name="hostile")
    figure = read(html)
    assert [c["text"] for c in figure.children if "ae-query" in c["class"]] == HOSTILE
    assert [c["text"] for c in figure.children if "ae-key" in c["class"]] == HOSTILE
    tooltips = [cell["title"] for cell in attrs_of_cells(html)]
    assert tooltips[1] == f"{HOSTILE[0]} · {HOSTILE[1]}: 0.00"  # one attribute, decoded whole
    assert figure.tags <= {"style", "figure", "figcaption", "b", "span", "div", "i"}
    assert "<img" not in html


# ---- bar_rows: grouped weights as HTML rows (4 · Multi-head attention, 0 · By hand) -------------
def bars_of(html: str) -> HTMLParser:
    """The bar rows in order (tooltip, bar style, the number written after the bar), the labels
    and the legend's names, as a browser reads them."""

    class Bars(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[dict] = []
            self.labels: list[str] = []
            self.legend: list[str] = []
            self._open: list[str] = []  # the classes of the elements open at this point

        def handle_starttag(self, tag: str, attrs: list) -> None:
            attributes = dict(attrs)
            kind = attributes.get("class", "")
            if kind.startswith("ae-bar-row"):
                self.rows.append({"title": attributes["title"], "style": "", "text": ""})
            elif kind == "ae-bar":
                self.rows[-1]["style"] = attributes["style"]
            elif kind == "ae-bar-label":
                self.labels.append("")
            self._open.append(kind)

        def handle_endtag(self, tag: str) -> None:
            self._open.pop()

        def handle_data(self, data: str) -> None:
            inside = self._open[-1] if self._open else ""
            if inside.startswith("ae-bar-row"):
                self.rows[-1]["text"] += data
            elif inside == "ae-bar-label":
                self.labels[-1] += data
            elif inside == "ae-key-item":
                self.legend.append(data)

    parser = Bars()
    parser.feed(html)
    return parser


def test_bar_rows_lengths_are_shares_of_the_largest_value_label_by_label():
    series = {"first": np.array([0.5, 0.125, 0.0]), "second": np.array([0.25, 1.0, 0.75])}
    html = html_heatmap.bar_rows(
        ["a", "b", "c"], series, "T", "weight", ["#111111", "#222222"], name="bars"
    )
    parsed = bars_of(html)
    assert parsed.labels == ["a", "b", "c"]
    # label by label, each series in order: a's first and second, then b's, then c's
    expected = [0.5, 0.25, 0.125, 1.0, 0.0, 0.75]
    assert [row["text"] for row in parsed.rows] == [f"{v:.2f}" for v in expected]
    shares = [float(re.search(r"\* ([0-9.]+)\)", row["style"]).group(1)) for row in parsed.rows]
    assert shares == pytest.approx(expected, abs=1e-4)  # the largest value here is 1
    colours = [re.search(r"background:(#\w+)", row["style"]).group(1) for row in parsed.rows]
    assert colours == ["#111111", "#222222"] * 3
    assert parsed.rows[3]["title"] == "b · second: 1.00"
    assert parsed.legend == ["first", "second"]


def test_bar_rows_refuse_what_they_cannot_draw_truly():
    colours = ["#111111"]
    with pytest.raises(ValueError, match="negative"):
        html_heatmap.bar_rows(["a", "b"], {"s": np.array([0.5, -0.1])}, "T", "w", colours, "n")
    with pytest.raises(ValueError, match="labels"):
        html_heatmap.bar_rows(["a"], {"s": np.array([0.5, 0.1])}, "T", "w", colours, "n")


def test_signed_bar_rows_grow_from_a_zero_line_both_ways():
    # scores from −1 to 3: the zero line a quarter along each row, a bar's length |s| / 4,
    # a negative bar ending at the line, a positive one starting there
    scores = np.array([-1.0, 3.0, 0.5])
    html = html_heatmap.bar_rows(
        ["a", "b", "c"], {"s": scores}, "T", "score", ["#888888"], name="s", signed=True
    )
    parsed = bars_of(html)
    assert [row["text"] for row in parsed.rows] == ["-1.00", "3.00", "0.50"]
    widths = [float(re.search(r"width:[^*]*\* ([0-9.]+)\)", r["style"])[1]) for r in parsed.rows]
    starts = [
        float(re.search(r"margin-left:[^*]*\* ([0-9.-]+)\)", r["style"])[1]) for r in parsed.rows
    ]
    span = scores.max() - scores.min()
    assert widths == pytest.approx(np.abs(scores) / span, abs=1e-4)
    zero = -scores.min() / span
    assert starts == pytest.approx([zero - 1 / span, zero, zero], abs=1e-4)
    assert html.count(f"transparent calc((100% - 3.6rem) * {zero:.4f})") == 3  # each row's line
    with pytest.raises(ValueError, match="signed"):
        html_heatmap.bar_rows(
            ["a"], {"s": scores[:1]}, "T", "s", ["#888888"], "s", signed=True, largest=1.0
        )


def test_bar_rows_show_hostile_labels_and_series_names_as_text():
    series = {HOSTILE[1]: np.full(len(HOSTILE), 0.5), HOSTILE[2]: np.full(len(HOSTILE), 0.25)}
    html = html_heatmap.bar_rows(
        HOSTILE, series, "Where it looks", "weight", ["#111111", "#222222"], name="hostile"
    )
    parsed = bars_of(html)
    assert parsed.labels == HOSTILE
    assert parsed.legend == [HOSTILE[1], HOSTILE[2]]
    assert parsed.rows[1]["title"] == f"{HOSTILE[0]} · {HOSTILE[2]}: 0.25"
    assert read(html).tags <= {"style", "figure", "figcaption", "b", "span", "div"}
    assert "<img" not in html


def test_wide_grids_of_weights_write_two_decimals_as_fractions():
    """Past six columns one decimal would turn every small weight into 0.0: weights and shares
    are written as the Overview writes them ('.07'), other values with one decimal."""

    weights = np.full((2, 8), 0.07)
    weights[0, :2] = [0.125, 1.0]
    grid = read(
        matrix_charts.pair_grid(
            np.pad(weights, ((0, 6), (0, 0)), constant_values=0.07), list("abcdefgh"), "α", "w"
        )
    )
    cells = [c["text"] for c in grid.children if c["tag"] == "i"]
    assert cells[:3] == [".13", "1.0", ".07"]  # 0.125 rounds half up, as number_text does
    scores = read(
        matrix_charts.pair_grid(np.full((8, 8), 0.07) * 20, list("abcdefgh"), "S", "s", zmax=None)
    )
    assert {c["text"] for c in scores.children if c["tag"] == "i"} == {"1.4"}
    few = read(matrix_charts.pair_grid(np.full((3, 3), 0.07), list("abc"), "α", "w"))
    assert {c["text"] for c in few.children if c["tag"] == "i"} == {"0.07"}


def test_bar_rows_on_a_log_scale_keep_a_rounding_error_and_a_difference_both_visible():
    """Lengths are shares of the log distance from the floor to the largest value."""
    series = {"removed": np.array([1e-7, 1e-6]), "kept": np.array([0.1, 1.0])}
    html = html_heatmap.bar_rows(
        ["layer 0", "layer 1"], series, "T", "Δ", ["#111111", "#222222"], "log", log_floor=1e-8
    )
    parsed = bars_of(html)
    assert [row["text"] for row in parsed.rows] == ["1.0e-07", "1.0e-01", "1.0e-06", "1.0e+00"]
    shares = [float(re.search(r"\* ([0-9.]+)\)", row["style"]).group(1)) for row in parsed.rows]
    assert shares == pytest.approx([1 / 8, 7 / 8, 2 / 8, 1.0], abs=1e-4)  # 8 decades to 1


def test_value_strip_is_one_pixel_per_value_on_plotlys_scale_rows_in_order():
    """A few tokens' wide vectors as one image: row i of the image is row i of the matrix, each
    pixel plotly's RdBu colour for its value on the range given."""
    from PIL import Image

    scale = plotly.colors.get_colorscale("RdBu")
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(3, 40))
    matrix[1, 5] = 10.0  # past the range's top: the top colour
    reach = 2.5
    html = html_heatmap.value_strip(
        matrix, HOSTILE[:3], "X", scale, (-reach, reach), "value", "dimension", "strip"
    )
    figure = read(html)
    assert [c["text"] for c in figure.children if "ae-query" in c["class"]] == HOSTILE[:3]
    (image,) = [c for c in figure.children if c["tag"] == "img"]
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(image["src"].split(",", 1)[1]))))
    assert pixels.shape == (3, 40, 3)  # (rows, columns, rgb)
    shares = np.clip((matrix + reach) / (2 * reach), 0, 1)
    for i in range(3):
        theirs = plotly.colors.sample_colorscale(scale, shares[i].tolist())
        for j, colour in enumerate(theirs):
            expected = [float(v) for v in colour[colour.index("(") + 1 : -1].split(",")]
            assert np.abs(pixels[i, j] - expected).max() <= 1, (i, j)
    assert figure.tags <= {"style", "figure", "figcaption", "b", "span", "div", "img"}
    assert "onerror" not in html.replace("onerror&#61;", "")


def test_bar_rows_mark_the_highlighted_label_and_paint_its_bars():
    html = html_heatmap.bar_rows(
        ["money", "bank", "grows"],
        {"softmax weight": np.array([0.2, 0.7, 0.1])},
        "Where bank looks",
        "softmax weight",
        ["#636efa"],
        name="payoff",
        highlight=1,
        highlight_colour="#ef553b",
    )
    parsed = bars_of(html)
    colours = [re.search(r"background:(#\w+)", row["style"]).group(1) for row in parsed.rows]
    assert colours == ["#636efa", "#ef553b", "#636efa"]
    assert re.findall(r'class="ae-bar-label ae-marked"[^>]*>([^<]+)<', html) == ["bank"]


def test_value_grid_never_writes_minus_zero_and_dense_grids_stay_short():
    """-0.04 at one decimal is 0.0, as plotly's cell numbers were; past DENSE_FROM columns a
    number keeps to four characters (-12.34 -> -12), and the figure is marked dense."""
    matrix = np.array([[-0.04, -12.34, 0.5, 1.25, -0.62, 2.0, 3.0, 4.0]])
    html = grid_of(matrix, ["a"], [str(j) for j in range(8)], "RdBu", (-13.0, 13.0), decimals=1)
    numbers = [c["text"] for c in read(html).children if c["tag"] == "i"]
    assert numbers == [".0", "-12", ".5", "1.2", "-.6", "2.0", "3.0", "4.0"]
    assert 'class="ae-matrix ae-dense"' in html


def test_bar_rows_take_a_shared_scale_and_refuse_raw_markup_in_a_title():
    """Two charts that must compare (a shared word in two sentences) share one full length;
    a title is inserted as given, so raw markup in it is refused, not shown."""
    shared = html_heatmap.bar_rows(
        ["a", "b"], {"w": np.array([0.2, 0.4])}, "T", "w", ["#111111"], "s", largest=0.8
    )
    shares = [
        float(re.search(r"\* ([0-9.]+)\)", row["style"]).group(1)) for row in bars_of(shared).rows
    ]
    assert shares == pytest.approx([0.25, 0.5])
    assert "(a full bar: 0.80)" in shared  # the axis says what a full bar stands for
    for title in ("<b>x</b>", "a & b", "&amp;"):
        with pytest.raises(ValueError, match="markup"):
            html_heatmap.bar_rows(["a"], {"w": np.array([1.0])}, title, "w", ["#111111"], "t")
    html_heatmap.bar_rows(
        ["a"], {"w": np.array([1.0])}, "Where &#91;x&#93; looks", "w", ["#1"], "t"
    )


# ---- which picture a matrix gets, by size (ui/display_policy.py, through ui/display.py) --------
def drawn_as(monkeypatch, show, *args) -> str:
    """'written', 'image', 'strip' or 'plotly': what display.show_* sends for these arguments
    (the page calls replaced by recorders, so no Streamlit runs)."""

    sent: list[str] = []

    def html(figure: str) -> None:
        classes = re.search(r'<figure class="([^"]+)"', figure).group(1).split()
        sent.append(
            "image" if "ae-image" in classes else "strip" if "ae-wide" in classes else "written"
        )

    monkeypatch.setattr(display, "show_html_figure", html)
    monkeypatch.setattr(display, "show_figure", lambda *_, **__: sent.append("plotly"))
    show(*args)
    (kind,) = set(sent)
    return kind


def _show_mixing(matrix: np.ndarray, tokens: list[str]) -> None:
    """A mixing matrix as the information-flow page shows it: its shares' grid, else plotly."""
    display.show_matrix(
        matrix.shape,
        html=lambda: matrix_charts.pair_grid(matrix, tokens, "R", name="k", zmax=None),
        plotly=lambda: go.Figure(),
        key="k",
    )


def _show_scores(matrix: np.ndarray, tokens: list[str]) -> None:
    """Explanation scores, a row per method, as the explanations page shows them."""
    display.show_matrix(
        matrix.shape,
        html=lambda: explanations_charts.methods_grid(matrix, ["a"], tokens, "s", "u", "k"),
        plotly=lambda: go.Figure(),
        key="k",
    )


def test_widgets_draw_written_cells_an_image_or_plotly_by_size(monkeypatch):
    """The edges the README gives: numbers written up to 12; one image up to 48 tokens on the
    learning pages (their plotly figures draw the first 48) and up to 128 for mixing matrices
    and explanation scores; a few tokens' 384-wide vectors as a strip; plotly past all that."""

    def matrix(n_rows: int, n_columns: int) -> np.ndarray:
        return np.random.default_rng(0).random((n_rows, n_columns))

    def square(n: int):
        return (display.show_token_matrix, matrix(n, n), ["t"] * n, "S", "k", "f", True)

    def vectors(n: int, width: int):
        return (display.show_token_matrix, matrix(n, width), ["t"] * n, "Q", "k", "f", False)

    def mixing(n: int):
        return (_show_mixing, matrix(n, n), ["t"] * n)

    def scores(n: int):
        return (_show_scores, matrix(1, n), ["t"] * n)

    cases = [
        (square(12), "written"),
        (square(13), "image"),
        (square(48), "image"),
        (square(49), "plotly"),
        (vectors(12, 64), "strip"),
        (vectors(30, 8), "image"),
        (vectors(13, 384), "plotly"),
        (mixing(128), "image"),
        (mixing(129), "plotly"),
        (scores(12), "written"),
        (scores(128), "image"),
        (scores(129), "plotly"),
    ]
    for case, expected in cases:
        shape = np.shape(case[1])
        assert drawn_as(monkeypatch, *case) == expected, (case[0].__name__, shape, expected)


def test_a_matrix_or_bars_without_an_html_form_are_plotly_at_any_size(monkeypatch):
    """html=None: a figure the policy has no HTML form for (subplots, frames, a line over bars)
    is drawn by plotly even where its size would be written cells or HTML rows."""

    def no_html_matrix(n: int, with_html: bool) -> None:
        weights = np.full((n, n), 1.0 / n)
        grid = lambda: matrix_charts.pair_grid(weights, ["t"] * n, "W", name="k")  # noqa: E731
        display.show_matrix(weights.shape, grid if with_html else None, lambda: go.Figure(), "k")

    def no_html_bars(n: int, with_html: bool) -> None:
        rows = lambda: html_heatmap.bar_rows(  # noqa: E731
            ["t"] * n, {"w": np.ones(n)}, "W", "w", ["#111111"], "k"
        )
        display.show_bars(n, rows if with_html else None, lambda: go.Figure(), "k")

    for show in (no_html_matrix, no_html_bars):
        assert drawn_as(monkeypatch, show, 3, True) == "written", show.__name__
        assert drawn_as(monkeypatch, show, 3, False) == "plotly", show.__name__


def test_bars_are_html_up_to_24_labels_and_plotly_past_them_or_below_zero(monkeypatch):
    """display.show_bars asks the one policy: HTML rows for up to 24 labels of values that are
    not negative, plotly's bars past 24 labels or for a negative value (they grow down from 0)."""

    def bars(n: int, low: float = 0.0):
        values = np.linspace(low, 1.0, n)
        return (
            display.show_bars,
            n,
            lambda: html_heatmap.bar_rows(
                [str(k) for k in range(n)], {"w": values}, "t", "w", ["#111111"], "k"
            ),
            lambda: go.Figure(),
            "k",
            "f",
            [values],
        )

    assert drawn_as(monkeypatch, *bars(24)) == "written"
    assert drawn_as(monkeypatch, *bars(25)) == "plotly"
    assert drawn_as(monkeypatch, *bars(3, low=-0.5)) == "plotly"
    sent = []
    monkeypatch.setattr(display, "show_figure", lambda *_, **__: sent.append("plotly"))
    display.show_bars(30, lambda: html_heatmap.HtmlFigure(""), None, "k")  # no plotly form
    assert sent == []
