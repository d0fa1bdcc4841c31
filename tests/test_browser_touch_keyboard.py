"""A phone's tap and a keyboard's Tab in Chromium: the head view's lines kept by a tap, and
focus that shows and gets past the map and the progress row quickly."""

from __future__ import annotations

import pytest

from tests.support.browser import page_exceptions, wait_for_app, wait_idle

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}

# The head view's lines as drawn now: (query, key) of every line of every visible path shape.
DRAWN_LINES_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')]
  .filter(gd => gd.layout && gd.layout.meta && gd.layout.meta.hover_lines)
  .flatMap(gd => gd.layout.shapes.filter(shape => shape.visible !== false))
  .flatMap(shape => [...shape.path.matchAll(/M0,(\\d+)L1,(\\d+)/g)])
  .map(match => [Number(match[1]), Number(match[2])])
"""


def _lines(page) -> set[tuple[int, int]]:
    return {tuple(line) for line in page.evaluate(DRAWN_LINES_JS)}


def test_a_tap_on_a_token_keeps_its_lines_and_a_tap_off_the_dots_brings_all_back(server, browser):
    """A phone has no hover: a tap on a token's dot keeps its lines in the browser, as pointing
    does on a desktop (query side: what it reads; key side: who reads it), and a tap between
    the columns, on no dot, brings every line back. No tap selects: no run, nothing moves."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/head_view?text=Time+flies+like+an+arrow.")
        wait_for_app(page, 120_000)
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=90_000)
        wait_idle(page)
        every_line = _lines(page)
        assert {query for query, _ in every_line} > {2}
        figure = page.locator("[data-testid='stMain'] .js-plotly-plot").first
        # the two traces with dots: the query column, then the key column
        columns = figure.locator(".scatterlayer .trace", has=page.locator("path.point"))

        def tap_flies(side: int) -> float:
            dot = columns.nth(side).locator("path.point").nth(2)  # "flies"
            dot.scroll_into_view_if_needed()
            box = dot.bounding_box()
            y = box["y"] + box["height"] / 2
            page.touchscreen.tap(box["x"] + box["width"] / 2, y)
            expected = {line for line in every_line if line[side] == 2}
            page.wait_for_function(
                f"n => ({DRAWN_LINES_JS})().every(line => line[{side}] === 2)"
                f" && ({DRAWN_LINES_JS})().length === n",
                arg=len(expected),
                timeout=10_000,
            )
            assert _lines(page) == expected
            return y

        for side in (0, 1):  # query side: what "flies" reads; key side: who reads it
            y = tap_flies(side)
            middle = figure.bounding_box()
            page.touchscreen.tap(middle["x"] + middle["width"] / 2, y)  # between the columns
            page.wait_for_function(
                f"n => ({DRAWN_LINES_JS})().length === n", arg=len(every_line), timeout=10_000
            )
            assert _lines(page) == every_line
        wait_idle(page)
        # kept and brought back in the browser: the page was never asked to select the token
        assert "▶" not in figure.text_content() and "hv_token" not in page.url
        assert page_exceptions(page) == []
    finally:
        context.close()


# What has the keyboard's focus, and how its focus ring is drawn.
FOCUSED_JS = """
() => {
  const e = document.activeElement;
  const style = getComputedStyle(e);
  return {
    tag: e.tagName,
    text: (e.getAttribute('aria-label') || e.textContent || '').trim(),
    inMap: !!e.closest('nav.ae-map'),
    inProgress: !!e.closest('nav.ae-progress'),
    pageLink: !!e.closest('[data-testid="stMain"] [data-testid="stPageLink"]'),
    sidebarLink: !!e.closest('[data-testid="stSidebarNav"]'),
    slider: e.getAttribute('role') === 'slider' || e.type === 'range',
    outline: [style.outlineStyle, style.outlineWidth, style.outlineColor],
  };
}
"""


def test_tab_meets_the_map_and_the_progress_row_once_and_shows_focus(server, browser):
    """Tab from the page's top: the map and the progress row are one stop each (arrow keys move
    inside them), the first slider comes a few presses after the main area, and Previous/Next
    show a focus ring as strong as the sidebar's links."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{server.url}/qkv")
        wait_for_app(page, 120_000)
        page.wait_for_selector("nav.ae-progress a", timeout=60_000)
        wait_idle(page)
        walk = []
        for _ in range(80):
            page.keyboard.press("Tab")
            walk.append(page.evaluate(FOCUSED_JS))
            if walk[-1]["text"] == "Skip to main content" and len(walk) > 1:
                break  # round the page once
        assert walk[0]["text"] == "Skip to main content"
        assert sum(stop["inMap"] for stop in walk) == 1
        assert sum(stop["inProgress"] for stop in walk) == 1
        main = next(i for i, stop in enumerate(walk) if stop["tag"] == "MAIN")
        slider = next(i for i, stop in enumerate(walk) if stop["slider"])
        assert slider - main <= 6, walk[main : slider + 1]
        sidebar = next(stop for stop in walk if stop["sidebarLink"])
        links = [stop for stop in walk if stop["pageLink"]]
        assert len(links) == 2 and "Previous:" in links[0]["text"] and "Next:" in links[1]["text"]
        for stop in links:  # as visible as the sidebar's: a solid ring at least as wide
            assert stop["outline"][0] == sidebar["outline"][0] == "solid"
            assert float(stop["outline"][1].rstrip("px")) >= float(
                sidebar["outline"][1].rstrip("px")
            )
        # inside the map, the arrow keys move between its links; Tab then leaves it
        page.locator("nav.ae-map a[tabindex='0']").focus()
        first = page.evaluate(FOCUSED_JS)["text"]
        page.keyboard.press("ArrowRight")
        second = page.evaluate(FOCUSED_JS)
        assert second["inMap"] and second["text"] != first
        assert page.locator("nav.ae-map a[tabindex='0']").count() == 1
        page.keyboard.press("Tab")
        assert not page.evaluate(FOCUSED_JS)["inMap"]
        assert page_exceptions(page) == []
    finally:
        page.close()
