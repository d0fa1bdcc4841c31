"""The "you are here" map of the model and the course's progress row, as HTML (no plotly.js).

model_map: the transformer as a row of parts in the order data flows through them, word pieces
to output, each with the loaded model's own sizes; the parts a page explains are marked, a part
whose page was visited has a tick, and each part links to the page that teaches it.
path_progress: every step of the course as a small numbered link, visited ones ticked.

Pure functions: they take sizes, labels and addresses and return markup; ui/model_map.py shows
it. Every text is escaped here (html.escape), though none is a visitor's: the labels are the
code's own and the sizes are numbers. Links are relative addresses of the app's own pages
("./qkv"), which ui/js/page_links.js turns into Streamlit's in-app navigation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape

from ui.html_heatmap import HtmlFigure


@dataclass(frozen=True)
class ModelSizes:
    """The sizes the map writes beside its parts, read from the loaded model."""

    vocab_size: int
    d_model: int
    max_positions: int  # the most word pieces a run reads
    n_heads: int
    d_head: int
    d_ff: int
    n_layers: int
    norm_name: str = "LayerNorm"  # core/anatomy.py: the model's norm, where it sits, its positions
    pre_norm: bool = False
    rotary: bool = False
    n_kv_heads: int = 0  # key/value heads; fewer than n_heads when grouped (0: one per head)

    @property
    def grouped(self) -> bool:
        """Each key/value head serves several query heads (the Llama family)."""
        return 0 < self.n_kv_heads < self.n_heads


@dataclass(frozen=True)
class Part:
    """One box of the map."""

    key: str
    label: str
    detail: Callable[[ModelSizes], str]  # the sizes written beside the label, or ""
    what: str  # one sentence for the tooltip
    # the label and sentence for a model whose anatomy differs from the default (None: none)
    relabel: Callable[[ModelSizes], tuple[str, str] | None] | None = None

    def text(self, sizes: ModelSizes) -> tuple[str, str]:
        """(label, tooltip sentence) for the loaded model."""
        changed = self.relabel(sizes) if self.relabel is not None else None
        return changed or (self.label, self.what)


def _rotary_positions(sizes: ModelSizes) -> tuple[str, str] | None:
    if not sizes.rotary:
        return None
    return (
        "positions (rotary)",
        "No vector is added for a position: inside every head, each query and key is turned by "
        "an angle that grows with its position: how word order enters (a causal mask depends "
        "on order too).",
    )


def _grouped_heads(sizes: ModelSizes) -> tuple[str, str] | None:
    if not sizes.grouped:
        return None
    return (
        "Q, K, V",
        f"Every vector projected into a query per head, and into a key and a value per key/value "
        f"head: {sizes.n_kv_heads} of them, each shared by {sizes.n_heads // sizes.n_kv_heads} "
        "query heads.",
    )


def _norm_placement(sizes: ModelSizes) -> tuple[str, str]:
    if sizes.pre_norm:
        return (
            f"+ residual ({sizes.norm_name} before each sublayer)",
            f"The update added to the vector it came from; each sublayer reads a {sizes.norm_name} "
            "copy of that vector.",
        )
    return (
        f"+ residual, {sizes.norm_name}",
        "The update added to the vector it came from, then normalised.",
    )


PARTS: tuple[Part, ...] = (
    Part(
        "pieces",
        "word pieces",
        lambda s: f"of {s.vocab_size:,}",
        "The text, cut into pieces from a fixed vocabulary of that many.",
    ),
    Part(
        "table",
        "table row",
        lambda s: f"{s.d_model} wide",
        "Each piece's row of the embedding table: the same vector in every sentence.",
    ),
    Part(
        "position",
        "+ position",
        lambda s: f"≤ {s.max_positions}",
        "A vector for each position (up to the longest input), added to the row: how word order "
        "enters (a causal mask depends on order too).",
        _rotary_positions,
    ),
    Part(
        "qkv",
        "Q, K, V",
        lambda s: (
            f"{s.n_heads} × {s.d_head}"
            + (f", K and V {s.n_kv_heads} × {s.d_head}" if s.grouped else "")
        ),
        "Every vector projected three times per head (heads × numbers per head): a query, a key "
        "and a value.",
        _grouped_heads,
    ),
    Part(
        "scores",
        "scores",
        lambda s: "QKᵀ/√d_k",
        "Each query against every key, scaled; a mask can remove keys.",
    ),
    Part(
        "softmax",
        "softmax",
        lambda s: "",
        "Scores turned into attention weights: each query's row sums to 1.",
    ),
    Part(
        "mix",
        "weighted values",
        lambda s: "",
        "Each position's new vector: the values averaged with its weights.",
    ),
    Part(
        "w_o",
        "W_O",
        lambda s: f"{s.n_heads}·{s.d_head}→{s.d_model}",
        "The heads' outputs side by side (heads · numbers per head), projected back to one "
        "vector per position.",
    ),
    Part(
        "residual_norm",
        "+ residual, LayerNorm",
        lambda s: "",
        "The update added to the vector it came from, then normalised.",
        _norm_placement,
    ),
    Part(
        "ffn",
        "feed-forward",
        lambda s: f"{s.d_model}→{s.d_ff}→{s.d_model}",
        "A small network applied to each position on its own: widen, then narrow back.",
    ),
    Part(
        "layers",
        "next layer",
        lambda s: f"×{s.n_layers}",
        "The same steps again with the next layer's weights, as many times as there are layers.",
    ),
    Part(
        "output",
        "output",
        lambda s: f"{s.d_model} wide",
        "One vector per word piece, each now shaped by the whole sentence.",
    ),
)
LAYER_PARTS = ("qkv", "scores", "softmax", "mix", "w_o", "residual_norm", "ffn")  # per layer


@dataclass(frozen=True)
class PageLink:
    """Where a box or a step leads: the page's relative address, its title, whether visited."""

    href: str  # "./qkv"; "./" for the default page
    title: str
    visited: bool
    current: bool  # the page on screen: shown, not linked


def _link(link: PageLink, classes: list[str], inner: str, tooltip: str) -> str:
    """An <a> to the page, or, for the page on screen, a <span> marked as the current page."""
    if link.visited:
        classes.append("ae-seen")
    attributes = f'class="{" ".join(classes)}" title="{escape(tooltip)}"'
    if link.current:
        return f'<span {attributes} aria-current="page">{inner}</span>'
    return f'<a {attributes} href="{escape(link.href)}" data-ae-page="1">{inner}</a>'


def _part_box(part: Part, sizes: ModelSizes, marked: bool, link: PageLink) -> str:
    """One part as a list item: its label and sizes, linked to the page that explains it."""
    detail = part.detail(sizes)
    label, what = part.text(sizes)
    state = " (visited)" if link.visited else ""
    where = "this page" if link.current else link.title
    tooltip = f"{label}{', ' + detail if detail else ''}. {what} Explained on: {where}{state}."
    tick = '<i class="ae-tick" aria-hidden="true">✓</i>' if link.visited else ""
    sizes_text = f" <small>{escape(detail)}</small>" if detail else ""
    inner = f"<b>{tick}{escape(label)}</b>{sizes_text}"
    classes = ["ae-part"] + (["ae-here"] if marked else [])
    return _item(_link(link, classes, inner, tooltip), marked, part.key in LAYER_PARTS)


def _item(content: str, marked: bool, in_layer: bool) -> str:
    """A list item of the map: ae-away if not marked (hidden on a phone), ae-in-layer inside
    the band of the parts every layer repeats."""
    classes = [name for name, on in (("ae-away", not marked), ("ae-in-layer", in_layer)) if on]
    class_attribute = f' class="{" ".join(classes)}"' if classes else ""
    return f"<li{class_attribute}>{content}</li>"


def model_map(
    sizes: ModelSizes,
    here: frozenset[str],
    links: Mapping[str, PageLink],
    where: str,
    previous: PageLink | None = None,
    following: PageLink | None = None,
) -> HtmlFigure:
    """The parts of the model in data order, those in `here` marked, each linked to its page
    (links: part key -> PageLink, one for every part in PARTS). The parts every layer repeats
    sit on one band that starts by saying how many layers there are. A phone shows the marked
    parts only, each run of the others as one "…" (ui/model_map.py's style sheet). where: a
    short line above the map (the step), the code's own words, followed by links to the
    previous and following step if given."""
    missing = {part.key for part in PARTS} - set(links)
    if missing:
        raise ValueError(f"no page for the parts {sorted(missing)}")
    unknown = here - {part.key for part in PARTS}
    if unknown:
        raise ValueError(f"no such parts: {sorted(unknown)}")
    layer_marked = bool(here & set(LAYER_PARTS))
    items, in_run = [], False  # in_run: the last item is an unmarked one
    for part in PARTS:
        marked = part.key in here
        if part.key == LAYER_PARTS[0]:  # the band's label, shown with any marked part in it
            label = f'<span class="ae-layer-label">{sizes.n_layers} layers, each:</span>'
            if not layer_marked and not in_run:
                items.append('<li class="ae-gap" aria-hidden="true">…</li>')
            items.append(_item(label, layer_marked, in_layer=True))
            in_run = not layer_marked
        if not marked and not in_run:
            items.append('<li class="ae-gap" aria-hidden="true">…</li>')
        items.append(_part_box(part, sizes, marked, links[part.key]))
        in_run = not marked
    steps = "".join(
        " · " + _link(link, [f"ae-{rel}"], text, f"{text}: {link.title}")
        for link, rel, text in ((previous, "prev", "← Previous"), (following, "next", "Next →"))
        if link is not None
    )
    return HtmlFigure(
        '<nav class="ae-map" data-figure="model-map" '
        'aria-label="The model, with the parts this page explains marked; arrow keys move between its links">'
        f'<span class="ae-where">{escape(where)}{steps}</span>'
        f'<ol class="ae-flow">{"".join(items)}</ol></nav>'
    )


def path_progress(steps: Sequence[tuple[str, PageLink]]) -> HtmlFigure:
    """Every step of the course in order, as (short mark, link) pairs: a small box with the
    mark, a tick once visited, the step on screen marked, each linked to its page."""
    seen = sum(link.visited for _, link in steps)
    boxes = []
    for mark, link in steps:
        state = "this page" if link.current else ("visited" if link.visited else "not yet")
        classes = ["ae-step"] + (["ae-now"] if link.current else [])
        inner = escape(mark)
        boxes.append("<li>" + _link(link, classes, inner, f"{link.title} ({state})") + "</li>")
    return HtmlFigure(
        '<nav class="ae-progress" data-figure="path-progress" aria-label="The course, step by '
        'step; arrow keys move between its links">'
        f'<span class="ae-where">{seen} of {len(steps)} pages visited</span>'
        f"<ol>{''.join(boxes)}</ol></nav>"
    )
