"""The course's path in Chromium: the map's links open pages inside the session
(ui/js/page_links.js) on a phone with the sidebar folded away. That every page opens on its
takeaway and payoff figure is checked on the navigation tour (tests/test_browser_suite.py). The walk by Next through every
page, with the sidebar's list and the map at the end, is one visitor's course in
tests/test_browser_hostile_tokenizer.py (with a tiny decoder loaded: three checks, one walk)."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.support.browser import wait_for_app
from ui import path

pytestmark = pytest.mark.browser

NEXT_LINK = '[data-testid="stMain"] [data-testid="stPageLink"] a'


def url_path_of(page) -> str:
    return urlparse(page.url).path.strip("/")


def open_and_wait(page, expected: str) -> None:
    """Wait for the address to name the page `expected`, then for its run to end."""
    page.wait_for_url(lambda url: urlparse(url).path.strip("/") == expected, timeout=60_000)
    wait_for_app(page, 120_000)


def visited_count(page) -> str:
    """The progress row's "k of N pages visited"."""
    return page.locator('[data-figure="path-progress"] .ae-where').inner_text()


def test_a_phone_follows_the_map_with_the_sidebar_folded(server, browser):
    context = browser.new_context(
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
        color_scheme="dark",
    )
    page = context.new_page()
    page.goto(f"{server.url}/positional")
    wait_for_app(page, 120_000)
    assert not page.locator('[data-testid="stSidebarNav"]').is_visible()  # folded away
    here = page.locator('[data-figure="model-map"] .ae-part.ae-here')
    assert here.count() == 1 and here.is_visible() and "position" in here.inner_text()
    page.locator('[data-figure="model-map"] a.ae-next').click()
    open_and_wait(page, "scaling_masking")
    assert visited_count(page) == f"2 of {len(path.STEPS)} pages visited"  # the same session
    # the map fits the phone's width
    box = page.locator('[data-figure="model-map"]').bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    context.close()
