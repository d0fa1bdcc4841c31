"""Hostile links, headless: every page opened from a link whose every key holds a visitor's value.

The same links as tests/test_browser_hostile_urls.py (hostile_link: Markdown links and images,
HTML and script, numbers out of range, paths on the server, a typed model name, the short and the
10,000-character hostile texts), two rounds a page so each key gets two values. AppTest runs the
server code a browser session runs, and what it would send is read as the browser would read it:
the Markdown sources, the HTML figures and the plotly figures' strings. The browser test opens a
few pages in chromium and checks the drawn page (no injected element, no script run).
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, assert_no_exception
from test_browser_hostile_urls import IMAGE, LINK, LOAD_BUTTON, OTHER, ROUNDS, hostile_link
from test_hostile_pieces_headless import plotly_strings
from test_url_links import open_link

from tests.support.browser import SENTENCE_TAB, app_pages

PAGES = app_pages()
# What the visitor's payload looks like once a renderer took it as markup: a Markdown link or
# image to the payload's host, or one of its elements (tests/test_browser_suite.py, MARKUP) with
# its script, unescaped. (The app's own figures hold <img> and <script> of their own.)
AS_MARKDOWN = ("](https://example.com", "](x)")
AS_TAG = re.compile(r"<(img|svg|script)\b[^<>]*(window\.__x|src=x)|<script>window\.__x", re.I)
SERVER_PATHS = (str(ROOT), str(Path(sys.prefix)), "site-packages", "/root", "/etc/passwd:")
MARKDOWN_KINDS = (
    "markdown",
    "caption",
    "info",
    "warning",
    "error",
    "success",
    "subheader",
    "title",
)


def markdown_sources(at) -> list[str]:
    """Every string the frontend renders as Markdown: elements, and the labels and help of
    controls."""
    texts = [element.value for kind in MARKDOWN_KINDS for element in at.get(kind)]
    for kind in (
        "slider",
        "selectbox",
        "radio",
        "toggle",
        "checkbox",
        "text_input",
        "text_area",
        "button",
    ):
        for widget in at.get(kind):
            texts += [widget.label, widget.help or ""]
    return texts


def pages_and_rounds() -> list[tuple[str, int]]:
    return [(p.path, round_index) for p in PAGES for round_index in range(len(ROUNDS))]


@pytest.mark.usefixtures("local_folders")  # as the browser's server: a typed folder is offered
@pytest.mark.parametrize(
    "page, round_index",
    pages_and_rounds(),
    ids=[f"{Path(p).stem}-{r}" for p, r in pages_and_rounds()],
)
def test_a_hostile_link_draws_the_page_with_the_visitor_text_as_text(page, round_index):
    app_page = next(p for p in PAGES if p.path == page)
    _, model = ROUNDS[round_index]
    query = {**hostile_link(app_page, round_index, model), **SENTENCE_TAB.get(page, {})}
    if model == OTHER:  # a typed model's name is quoted whole, on its Load button (Markdown)
        query["custom_model"] = f"{LINK} {IMAGE}"
    at = open_link(page, query)
    where = f"{app_page.title}, round {round_index}"
    assert_no_exception(at)

    markdown = markdown_sources(at)
    figures = [element.proto.body for element in at.get("html")]
    plotly = plotly_strings(at)
    for text in markdown:  # a word joiner stops an autolink, not a written link
        bare = text.replace("\u2060", "")
        assert not any(raw in bare for raw in AS_MARKDOWN), f"{where}: Markdown: {text[:160]}"
        assert not AS_TAG.search(text), f"{where}: a tag in Markdown: {text[:160]}"
    for text in [*figures, *plotly]:  # inserted as markup; plotly reads <a>, <b>, <br> in strings
        assert not AS_TAG.search(text), f"{where}: a tag in a figure: {text[:160]}"
    shown = " ".join([*markdown, *figures, *plotly, *(e.value for e in at.get("exception"))])
    leaked = [path for path in SERVER_PATHS if path in shown]
    assert not leaked, f"{where}: the page shows a server path {leaked}"

    # The sidebar's sentence and pair as sent (a page's own boxes cut a text at their max_chars).
    sidebar = {w.key: w.value for w in at.sidebar.get("text_area") + at.sidebar.get("text_input")}
    assert sidebar.get("text") == query["text"], f"{where}: the link's sentence was altered"
    assert sidebar.get("pair") == query["pair"], f"{where}: the link's pair was altered"
    if model == OTHER:  # a typed model waits for its button, which names it as text
        quoted = any("Re-login" in html.unescape(text) for text in markdown)  # as entities
        assert quoted, f"{where}: the name is not quoted"
        load_key = LOAD_BUTTON.removeprefix(".st-key-").split()[0]
        assert [b for b in at.sidebar.get("button") if b.key == load_key], f"{where}: no Load"
        alerts = [e.value for kind in ("error", "warning") for e in at.get(kind)]
        assert not any("Could not load" in a for a in alerts), f"{where}: it was loaded"
