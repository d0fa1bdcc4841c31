"""A real browser on the Overview: type a sentence, the heatmap's token labels follow; its cells
and labels as drawn, tapped and hovered; a desktop's keyboard focus and long text."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from test_browser_devices import open_page

from tests.support.browser import (
    GRID_SELECTOR,
    app_pages,
    page_exceptions,
    wait_for_app,
    wait_idle,
)

pytestmark = pytest.mark.browser

KEY_LABELS_JS = (
    "() => [...document.querySelectorAll('[data-testid=\"stMain\"] .ae-heatmap .ae-key')]"
    ".map(n => n.textContent)"
)


# The outline a focused element draws, and the background of the current page's link.
FOCUS_STYLE_JS = """
() => {
  const style = getComputedStyle(document.activeElement);
  const current = document.querySelector('[data-testid="stSidebarNav"] a[aria-current="page"]');
  return {tag: document.activeElement.tagName, outline: style.outlineStyle,
          width: parseFloat(style.outlineWidth), colour: style.outlineColor,
          currentOutline: current ? getComputedStyle(current).outlineStyle : null};
}
"""


def test_a_desktop_overview_follows_typing_focus_and_a_long_text(server, browser):
    """One load of the Overview on a 1280 × 900 desktop, as a visitor first sees it, for four
    checks that each opened it afresh before:
    - one sentence box only, the sidebar's (the phone's copy in the page is hidden; a phone
      sees that one: test_browser_devices.py, test_a_phone_sees_where_to_type_on_the_overview);
    - Tab to a sidebar link: it draws a solid outline at least 2 px wide, which the current
      page's link (a grey fill) does not have;
    - a sentence typed into the sidebar: the heatmap's token labels follow, and the link keeps it;
    - the sidebar's box with a long text, scrolled to its end: its last line of text ends above
      the "1956/20000" counter Streamlit writes inside the box's bottom edge."""
    overview = next(p for p in app_pages() if p.default)
    page, context = open_page(browser, server, overview, viewport={"width": 1280, "height": 900})
    try:
        assert not page.locator(".st-key-page_sentence textarea").is_visible()

        links = page.locator('[data-testid="stSidebarNav"] a')
        links.nth(1).focus()
        page.keyboard.press("Tab")  # focus by keyboard: :focus-visible
        focused = page.evaluate(FOCUS_STYLE_JS)
        assert focused["tag"] == "A"
        assert focused["outline"] == "solid" and focused["width"] >= 2, focused
        assert focused["currentOutline"] != "solid"

        page.wait_for_selector(GRID_SELECTOR, timeout=60_000)
        assert "arrow" in page.evaluate(KEY_LABELS_JS)
        box = page.get_by_label("Sentence", exact=True)
        box.fill("The quiet river bank flooded")
        box.press("Control+Enter")  # a text area commits on Ctrl+Enter
        page.wait_for_function(f"() => ({KEY_LABELS_JS})().includes('flooded')", timeout=60_000)
        wait_idle(page)
        labels = page.evaluate(KEY_LABELS_JS)
        assert "quiet" in labels and "arrow" not in labels
        assert page_exceptions(page) == []
        assert "text=The+quiet" in page.url or "text=The%20quiet" in page.url  # the link keeps it

        box = page.locator('[data-testid="stSidebar"] textarea').first
        box.fill(("The river bank was quiet after the storm. " * 50)[:1956])
        box.evaluate("e => { e.focus(); e.scrollTop = e.scrollHeight; }")
        counter = page.locator('[data-testid="stSidebar"] [data-testid="InputInstructions"]').first
        counter.wait_for()
        assert "1956/" in counter.text_content()
        gap = box.evaluate(
            "e => { const s = getComputedStyle(e); return parseFloat(s.paddingBottom); }"
        )
        assert gap >= counter.bounding_box()["height"]  # the last line sits above the counter
    finally:
        context.close()


HOSTILE_TEXT = 'A <img src=x onerror="window.__pwned=1"> & **bold** test'


def test_the_overview_loads_no_plotly_and_shows_tokens_as_text(server, browser, model):
    """The page every visit starts on draws its head as HTML: plotly.js (~0.8 s of a browser's
    main thread to evaluate) is never loaded there. Hostile word pieces are labels, not markup;
    hovering a cell names its query, key and weight."""
    context = browser.new_context(viewport={"width": 1300, "height": 1200})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/?text={quote(HOSTILE_TEXT)}&overview_layer=0&overview_head=0")
        wait_for_app(page)
        page.wait_for_selector(GRID_SELECTOR, timeout=60_000)
        wait_idle(page)
        assert page.evaluate("() => typeof window.Plotly") == "undefined"
        assert page.evaluate("() => document.querySelector('.js-plotly-plot')") is None
        labels = page.evaluate(KEY_LABELS_JS)
        assert {"<", "=", ">", "*", "&"} <= set(labels), labels
        assert page.evaluate("() => window.__pwned") is None
        images = page.evaluate(
            "() => [...document.querySelectorAll('[data-testid=stMain] img')]"
            ".map(i => [i.className, i.src.slice(0, 22)])"
        )
        assert images == [["ae-cells", "data:image/png;base64,"]]  # the cells, nothing typed

        # the cell of query 1 ("a") and key 0 ([CLS]): past 12 pieces the cells are one image
        n = len(labels)
        image = page.locator("[data-testid='stMain'] img.ae-cells")
        box = image.bounding_box()
        image.hover(position={"x": 0.5 * box["width"] / n, "y": 1.5 * box["height"] / n})
        title = image.get_attribute("title")
        assert title.startswith("query 1: a\nkey 0: [CLS]\nweight "), title
        weights = model.run(HOSTILE_TEXT).attentions[0, 0]  # (n_q, n_k) layer 0, head 0
        assert f"{weights[1, 0]:.3f}" != f"{weights[0, 1]:.3f}"  # a swapped cell would show
        assert title.endswith(f"weight {weights[1, 0]:.3f}"), title
        assert page_exceptions(page) == []
    finally:
        context.close()


# Wide letters, capitals, CJK and a long word piece: the labels charts.label_margin must fit.
WIDE_LABELS_TEXT = "MMMM WWWW mmmmmmmm 東京 unbelievable [MASK] straightforwardness 42%"


def test_heatmap_margins_fit_their_labels_so_plotly_draws_once(server, browser, model):
    """The margins charts.label_margin estimates already hold every tick label and axis title.

    plotly's automargin widens a margin (and draws the figure again) only when something does
    not fit, so the drawn margins equal the requested ones exactly when the estimate was enough.
    Measured on 3 · Scaling and masking's section 3 (open with √d_k off), whose two heatmaps
    are charts.attention_heatmap's figure of the sidebar sentence past display_policy.DRAW_LIMIT pieces (HTML
    grids below that): the wide labels three times over, 50 pieces.
    """
    from ui import display_policy

    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    section = quote("3 · Switches")
    text = " ".join([WIDE_LABELS_TEXT] * 3)
    assert len(model.run(text).tokens) > display_policy.DRAW_LIMIT
    page.goto(f"{url}/scaling_masking?sm_section={section}&text={quote(text)}")
    wait_for_app(page)
    find = (
        "[...document.querySelectorAll('.js-plotly-plot')].find(gd => gd.layout && "
        "(gd.layout.title.text || '').includes('as trained') && gd.querySelector('.xtick text'))"
    )
    page.wait_for_function(f"() => !!{find}", timeout=60_000)
    wait_idle(page)
    requested, drawn, labels = page.evaluate(
        f"() => {{ const gd = {find};"
        " return [gd.layout.margin, gd._fullLayout._size,"
        " [...gd.querySelectorAll('.xtick text')].map(t => t.textContent)]; }"
    )
    # every few labels at 50 pieces (charts.token_ticks): the wide and the CJK ones among them
    assert {"東", "京"} & set(labels) and "[MASK]" in labels, labels
    assert drawn["l"] == requested["l"], "the y labels or title pushed the left margin"
    assert drawn["b"] == requested["b"], "the x labels or title pushed the bottom margin"
    assert page_exceptions(page) == []


VISIBLE_LABELS_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] .ae-heatmap .ae-key')]
  .filter(label => getComputedStyle(label).visibility === 'visible').length
"""


def test_a_tap_on_a_cell_writes_query_key_and_weight_under_the_figure(server, browser, model):
    """Phones have no hover: a tap (or click) on a cell names it under the figure, from a grid
    of cells (up to 12 pieces) and from the image of longer inputs; on a 390 px phone about
    PHONE_LABELS key labels show, on a desktop about MAX_LABELS."""
    from ui import html_heatmap

    short, long = "The bank flooded.", " ".join(["the river bank flooded again"] * 20)
    for device, visible in (
        ({"width": 390, "height": 844}, 16),
        ({"width": 1300, "height": 1200}, html_heatmap.MAX_LABELS),
    ):
        context = browser.new_context(viewport=device, has_touch=True)
        page = context.new_page()
        try:
            page.goto(f"{server.url}/?text={quote(short)}&overview_layer=1&overview_head=3")
            wait_for_app(page)
            page.wait_for_selector(GRID_SELECTOR, timeout=60_000)
            readout = page.locator("[data-testid='stMain'] .ae-readout")
            assert readout.text_content() == html_heatmap.READOUT_HINT
            weights = model.run(short).attentions[1, 3]  # (n_q, n_k)
            n = len(weights)
            page.locator(GRID_SELECTOR).nth(2 * n + 1).tap()  # query 2, key 1
            expected = f"query 2: bank · key 1: the · weight {weights[2, 1]:.3f}"
            page.wait_for_function(
                "t => document.querySelector('[data-testid=stMain] .ae-readout').textContent === t",
                arg=expected,
            )
            # the tapped cell, and only it, stays framed
            framed = page.locator("[data-testid='stMain'] .ae-grid i.ae-picked")
            assert framed.count() == 1
            assert (
                framed.bounding_box() == page.locator(GRID_SELECTOR).nth(2 * n + 1).bounding_box()
            )

            page.goto(f"{server.url}/?text={quote(long)}")
            wait_for_app(page)
            page.wait_for_selector("[data-testid='stMain'] img.ae-cells", timeout=60_000)
            wait_idle(page)
            shown = page.evaluate(VISIBLE_LABELS_JS)
            assert visible // 2 <= shown <= visible, (device, shown)
            image = page.locator("[data-testid='stMain'] img.ae-cells")
            box = image.bounding_box()
            n = len(model.run(long).tokens)
            image.tap(position={"x": 3.5 * box["width"] / n, "y": 0.5 * box["height"] / n})
            page.wait_for_function(
                "() => document.querySelector('[data-testid=stMain] .ae-readout')"
                ".textContent.startsWith('query 0: [CLS] · key 3: bank · weight ')"
            )
            # a frame lies over the tapped pixel: row 0, column 3 of the image (the tap scrolled
            # the image into view: its box is read again)
            frame = page.locator("[data-testid='stMain'] .ae-mark").bounding_box()
            box = image.bounding_box()
            centre_x = (frame["x"] + frame["width"] / 2 - box["x"]) * n / box["width"]
            centre_y = (frame["y"] + frame["height"] / 2 - box["y"]) * n / box["height"]
            assert (int(centre_y), int(centre_x)) == (0, 3), (centre_y, centre_x)
            assert page_exceptions(page) == []
        finally:
            context.close()
