"""Word pieces that hold Markdown, headless: every sentence that names a piece shows it as text.

A custom tokenizer decides the strings a page quotes (tests/test_browser_hostile_tokenizer.py
builds one whose unknown-word piece is HTML and Markdown). Here the pages that name "the token
that moved most" in a caption run in AppTest on that model, with a sentence made mostly of
unknown characters, so the token they name is the hostile piece.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, assert_no_exception
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
    as_shown = HOSTILE_PIECE.replace(
        " ", SPACE_MARK
    )  # an added piece shows its spaces (core/text.py)
    assert as_shown in most_moved, f"precondition: it names a hostile piece ({most_moved})"
    leaked = [t for t in texts if any(raw in t for raw in RAW_MARKUP)]
    assert not leaked, f"a word piece reached Markdown as markup: {leaked[0][:200]}"
