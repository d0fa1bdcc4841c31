"""Word pieces that hold Markdown and HTML, headless: every page shows them as text.

A custom tokenizer decides the strings a page quotes (tests/test_browser_hostile_tokenizer.py
builds one whose unknown-word piece is HTML and Markdown). Here every tab of every page runs in
AppTest on that model, and what it sends the browser is read as the browser would: Markdown
sources, HTML figures and plotly figures' strings. The browser test opens each page once with
the same model and checks the drawn page; this one reaches every tab in seconds. The pages that
name "the token that moved most" in a caption run with a sentence made mostly of unknown
characters, so the token they name is the hostile piece.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT, answer_every_question, assert_no_exception, each_tab, page_paths
from shown import shown
from streamlit.testing.v1 import AppTest
from test_browser_hostile_tokenizer import HOSTILE_PIECE, hostile_tokenizer_model

from core.text import SPACE_MARK

SENTENCE = "☃ ⅎ ☃ ⅎ ☃ ⅎ ☃ ⅎ bank"  # eight unknown characters: eight hostile pieces
RAW_MARKUP = ("[x](https://example.com", "<img", "**b**")  # parts of HOSTILE_PIECE


@pytest.fixture(scope="module")
def hostile_folder(tmp_path_factory):
    return hostile_tokenizer_model(tmp_path_factory.mktemp("hostile") / "model")


@pytest.fixture()
def local_folders(monkeypatch):
    from ui import models

    monkeypatch.setenv("ATTENTION_EXPLORER_LOCAL_FOLDERS", "1")
    models.policy.clear()
    yield
    models.policy.clear()


def run_on_hostile_model(folder, page: str, state: dict[str, object]) -> AppTest:
    """app.py on `page` with the hostile model loaded (as after its Load button) and `state`."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    answer_every_question(at)  # the figures questions fold are drawn
    at.session_state["model"] = "other"
    at.session_state["custom_model"] = str(folder)
    at.session_state["_confirmed_custom_model"] = str(folder)  # what the Load button sets
    at.session_state["text"] = SENTENCE
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(page)
    return at.run()


def markdown_texts(at: AppTest) -> list[str]:
    """The Markdown source of every element that renders Markdown."""
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "subheader")
    return [element.value for kind in kinds for element in at.get(kind)]


@pytest.mark.parametrize(
    "page, state",
    [
        ("views/multi_head.py", {"mh_section": "4 · Remove heads", "mh_ablate_layer": True}),
        ("views/scaling_masking.py", {"sm_section": "3 · Switches", "sm_scale": False}),
    ],
)
def test_the_token_that_moved_most_is_shown_as_text(hostile_folder, local_folders, page, state):
    at = run_on_hostile_model(hostile_folder, page, state)
    assert_no_exception(at)
    assert not [e.value for e in at.error], "the hostile model was not loaded"
    texts = markdown_texts(at)
    named = [t for t in texts if "the token that moved most is" in t]
    assert len(named) == 1, "the caption that names a token is drawn"
    most_moved = shown(named[0]).split("the token that moved most is ")[1]
    as_shown = HOSTILE_PIECE.replace(" ", SPACE_MARK)  # an added piece shows its spaces
    assert as_shown in most_moved, f"precondition: it names a hostile piece ({most_moved})"
    leaked = [t for t in texts if any(raw in t for raw in RAW_MARKUP)]
    assert not leaked, f"a word piece reached Markdown as markup: {leaked[0][:200]}"


# The piece as a browser would act on it: an <img> tag with its handler (its spaces may show as
# ␣, core/text.py: the tag is still one if the ␣ is a space), a Markdown link, bold, TeX.
PIECE_AS_TAG = re.compile(r"<img[ ␣]src=x[ ␣]onerror=")
PIECE_AS_MARKDOWN = ("[x](https://example.com", "**b**", "$y$")


def plotly_strings(at: AppTest) -> list[str]:
    """Every string in every plotly figure's spec (titles, ticks, hover text, legend names)."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for chart in at.get("plotly_chart"):
        walk(json.loads(chart.proto.spec))
    return found


@pytest.mark.parametrize("page", page_paths())
def test_every_tab_sends_the_hostile_piece_as_text(hostile_folder, local_folders, page):
    first = run_on_hostile_model(hostile_folder, page, {})
    quoted = False
    for tab, at in enumerate(each_tab(first, page)):
        assert_no_exception(at)
        assert not [e.value for e in at.error], "the hostile model was not loaded"
        where = f"{page}, tab {tab}"
        markdown = markdown_texts(at)
        html = [element.proto.body for element in at.get("html")]
        plotly = plotly_strings(at)
        for text in markdown:  # rendered as Markdown, with HTML allowed in some
            assert not PIECE_AS_TAG.search(text), f"{where}: a tag in Markdown: {text[:200]}"
            assert not any(raw in text for raw in PIECE_AS_MARKDOWN), f"{where}: {text[:200]}"
        for body in html:  # HTML figures: inserted as markup
            assert not PIECE_AS_TAG.search(body), f"{where}: a tag in an HTML figure"
        for text in plotly:  # plotly reads <b>, <a>, <br> in its strings, hover text too
            assert not PIECE_AS_TAG.search(text), f"{where}: a tag in a plotly figure: {text}"
        quoted |= any("onerror" in text for text in [*markdown, *html, *plotly])
    # precondition: a page that runs the sidebar's sentence quotes the piece somewhere, but for
    # 5 · Inside a layer, whose figures are means over the sentence's tokens, and the check
    reads_sidebar = "trace_or_stop(" in (ROOT / page).read_text()
    # the check names pieces only in the feedback of an answered question (tests/test_check.py)
    names_no_piece = page in {"views/inside_layer.py", "views/check.py"}
    assert quoted != names_no_piece or not reads_sidebar, f"{page}: quoted the piece: {quoted}"
