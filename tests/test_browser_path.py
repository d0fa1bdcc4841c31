"""The course's path in Chromium: the map's links open pages inside the session
(ui/js/page_links.js) on a phone with the sidebar folded away. The walk by Next through every
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


# ---- every page opens on its payoff ---------------------------------------------------------------
FIRST_SCREEN = {"width": 1280, "height": 900}
# The check is questions only: no figure to open on, and a takeaway would give its answers away.
NO_PAYOFF = {path.CHECK_FILE}
# The takeaway's bottom and the top of the first figure after it, in page pixels (null until
# both are drawn). A figure: a plotly chart (not the blank one ui/preload.py shows early) or an
# HTML figure of ui/html_heatmap.py (a <figure>; the model map and progress row are <nav>s).
PAYOFF_JS = """
() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const said = main && main.querySelector('.st-key-takeaway');
  if (!said) return null;
  const figures = [...main.querySelectorAll(
    '.js-plotly-plot:not(.st-key-_plotly_preload .js-plotly-plot), figure[class^="ae-"]')]
    .filter(f => said.compareDocumentPosition(f) & Node.DOCUMENT_POSITION_FOLLOWING);
  if (!figures.length) return null;
  const scroller = main.closest('[data-testid="stAppViewContainer"]') || document.scrollingElement;
  const top = (e) => e.getBoundingClientRect().top + (scroller.scrollTop || 0);
  return {said: top(said) + said.getBoundingClientRect().height, figure: top(figures[0])};
}
"""


def test_every_page_opens_on_its_takeaway_and_payoff_figure(server, browser):
    """One visitor at 1280 × 900 opens every page: its one-sentence takeaway (ui/takeaway.py)
    and the figure that follows it both start on the first screen, above 900 px."""
    context = browser.new_context(viewport=FIRST_SCREEN, reduced_motion="reduce")
    page = context.new_page()
    below: list[str] = []
    try:
        for step in path.STEPS:
            page.goto(f"{server.url}/{path.url_path(step)}")
            wait_for_app(page, 120_000)
            if step.file in NO_PAYOFF:
                continue
            try:
                page.wait_for_function(PAYOFF_JS, timeout=60_000, polling=100)
            except Exception as err:  # playwright's TimeoutError: say which page
                raise AssertionError(f"{step.title}: no takeaway with a figure after it") from err
            where = page.evaluate(PAYOFF_JS)
            if where["said"] > FIRST_SCREEN["height"] or where["figure"] > FIRST_SCREEN["height"]:
                below.append(
                    f"{step.title}: takeaway ends {where['said']:.0f} px, figure "
                    f"starts {where['figure']:.0f} px"
                )
    finally:
        context.close()
    assert not below, "below the first screen:\n" + "\n".join(below)
