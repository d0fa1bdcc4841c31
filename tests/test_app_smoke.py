"""Every registered page runs headless without an exception: normal, empty and very long text."""

import pytest
from conftest import LONG_TEXT, assert_no_exception, page_paths, run_page

PAGES = page_paths()


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize(
    "text",
    ["The river bank flooded after the storm.", "", LONG_TEXT],
    ids=["normal", "empty", "3000-words"],
)
def test_page_runs(page, text):
    at = run_page(page, text=text)
    assert_no_exception(at)
    if text == "" and page.endswith("overview.py"):
        assert any("empty" in info.value for info in at.info), "empty text must get a message"
    if text == LONG_TEXT and page.endswith("overview.py"):
        assert any("512" in w.value for w in at.warning), "truncation must be announced"
