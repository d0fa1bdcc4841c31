"""Every registered page runs headless without an exception: empty, very long and odd text (a
normal sentence: tests/test_door_pages.py, every page and tab).

The odd texts (control characters only, one 1,000-letter word) are the ones the browser test
types into a page's own boxes (tests/test_browser_suite.py, HOSTILE_ROUNDS); here every page
gets them in the sidebar, which is all a page without boxes of its own reads: the unreadable one
as the sentence, then as the pair beside the long word. (A few cases run in other tests, on
the same input or the same kind: RUN_ELSEWHERE.)
"""

import pytest
from conftest import LONG_TEXT, ROOT, assert_no_exception, each_tab, page_paths, run_page
from test_browser_suite import CONTROL_ONLY, ONE_LONG_WORD, SENTENCE_TAB

PAGES = page_paths()


# A normal sentence on every page and tab, with this test's check (no exception), is
# test_door_pages.py::test_every_page_and_tab_runs_the_model_only_through_the_door (the default
# sentence): it was run here too, on "The river bank flooded after the storm.".
TEXTS = {
    "empty": "",
    "3000-words": LONG_TEXT,
    "control-only": CONTROL_ONLY,
    "one-long-word": ONE_LONG_WORD,
}
# (text, page) cases another test runs on the same kind of input, with this test's check:
# Explanations (drawn whole, no tabs) at the 512-piece cap, no exception, and what it leaves out.
# The empty text on a page opened on its first tab, with no pair: the same run, the same check,
# in each page's own bad-input test.
RUN_ELSEWHERE = {
    ("3000-words", "views/explanations.py"): (
        "test_explain_pages.py::test_pages_at_512_word_pieces_say_what_they_leave_out"
    ),
    ("empty", "views/information_flow.py"): "test_explain_pages.py::test_pages_with_bad_input",
    ("empty", "views/explanations.py"): "test_explain_pages.py::test_pages_with_bad_input",
    ("empty", "views/multi_head.py"): (
        "test_learning_scaling_heads.py::test_pages_survive_bad_input"
    ),
    ("empty", "views/inside_layer.py"): (
        "test_learning_length_order_layer.py::test_changed_pages_survive_bad_input"
    ),
    ("empty", "views/qkv.py"): (
        "test_learning_length_order_layer.py::test_changed_pages_survive_bad_input"
    ),
}


@pytest.mark.parametrize(
    "page, text",
    [
        pytest.param(page, text, id=f"{name}-{page}")
        for name, text in TEXTS.items()
        for page in PAGES
        if (name, page) not in RUN_ELSEWHERE
    ],
)
def test_page_runs(page, text):
    # (SENTENCE_TAB: a page with tabs is opened on the tab that reads the sentence)
    pair = CONTROL_ONLY if text == ONE_LONG_WORD else None  # an unreadable pair is left out
    at = run_page(page, text=text, pair=pair, query=SENTENCE_TAB.get(page))
    assert_no_exception(at)
    if text == "" and page.endswith("overview.py"):
        assert any("empty" in info.value for info in at.info), "empty text must get a message"
    if text == LONG_TEXT and page.endswith("overview.py"):
        assert any("512" in w.value for w in at.warning), "truncation must be announced"
    if text in (LONG_TEXT, ONE_LONG_WORD):
        for opened in each_tab(at, page):  # a page in tabs: every section meets the text
            assert_no_exception(opened)
    if text == CONTROL_ONLY and "trace_or_stop(" in (ROOT / page).read_text():
        # a page that draws the sidebar's sentence stops with a message, not a blank page
        assert any("readable" in info.value for info in at.info), "unreadable text needs a message"
