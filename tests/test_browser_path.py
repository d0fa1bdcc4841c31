"""The course's path in Chromium: the sidebar lists every page, Next from the Overview visits
every page once, and the map's links open pages inside the session (ui/js/page_links.js), on a
desktop and on a phone with the sidebar folded away."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from browser import page_exceptions, wait_for_app

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


def test_next_from_the_overview_visits_every_page_once_and_the_map_keeps_the_session(
    server, browser
):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(server.url)
    wait_for_app(page, 120_000)

    # The sidebar lists every page, none folded away behind "View N more".
    navigation = page.locator('[data-testid="stSidebarNav"]')
    assert page.locator('[data-testid="stSidebarNavViewButton"]').count() == 0
    for step in path.STEPS:
        link = navigation.locator("a").filter(has_text=step.title).first
        assert link.is_visible(), step.title

    # Next, page after page: each once, in the path's order, without an error.
    seen = [url_path_of(page)]
    for _ in range(len(path.STEPS) - 1):
        after = path.neighbours(path.step_at(seen[-1]))[1]
        link = page.locator(NEXT_LINK).filter(has_text=f"Next: {after.title}")
        link.click()
        open_and_wait(page, path.url_path(after))
        assert page_exceptions(page) == [], after.title
        seen.append(url_path_of(page))
    assert seen == [path.url_path(step) for step in path.STEPS]
    assert len(set(seen)) == len(seen)

    # The last page's map: every part ticked (every page visited in this session), its own
    # parts marked. A click on a part opens its page in the same session: the progress row
    # there counts all 14 pages, where a fresh load would count one.
    last = path.STEPS[-1]
    parts = page.locator('[data-figure="model-map"] .ae-part')
    assert parts.count() == len(path.PART_KEYS)
    assert page.locator('[data-figure="model-map"] .ae-part.ae-seen').count() == parts.count()
    assert page.locator('[data-figure="model-map"] .ae-part.ae-here').count() == len(last.parts)
    page.locator('[data-figure="model-map"] a.ae-part').filter(has_text="Q, K, V").click()
    open_and_wait(page, "qkv")
    assert visited_count(page) == f"{len(path.STEPS)} of {len(path.STEPS)} pages visited"
    context.close()


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
