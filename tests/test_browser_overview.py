"""A real browser on the Overview: type a sentence, the heatmap's token labels follow."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from browser import page_exceptions, wait_for_app, wait_idle

pytestmark = pytest.mark.browser


def heatmap_tick_labels(page) -> list[str]:
    """The x-axis tick labels of the first plotly chart on the page."""
    return page.eval_on_selector_all(
        ".js-plotly-plot .xtick text", "nodes => nodes.map(n => n.textContent)"
    )


def test_typing_a_sentence_updates_the_heatmap(server, browser):
    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    page.goto(url)
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot .xtick text", timeout=60_000)
    assert "arrow" in heatmap_tick_labels(page)

    box = page.get_by_label("Sentence", exact=True)
    box.fill("The quiet river bank flooded")
    box.press("Control+Enter")  # a text area commits on Ctrl+Enter
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')]"
        ".some(t => t.textContent === 'flooded')",
        timeout=60_000,
    )
    wait_idle(page)
    labels = heatmap_tick_labels(page)
    assert "quiet" in labels and "arrow" not in labels
    assert page_exceptions(page) == []
    assert "text=The+quiet" in page.url or "text=The%20quiet" in page.url  # the link keeps it


# Wide letters, capitals, CJK and a long word piece: the labels charts.label_margin must fit.
WIDE_LABELS_TEXT = "MMMM WWWW mmmmmmmm 東京 unbelievable [MASK] straightforwardness 42%"


def test_heatmap_margins_fit_their_labels_so_plotly_draws_once(server, browser):
    """The margins charts.label_margin estimates already hold every tick label and axis title.

    plotly's automargin widens a margin (and draws the figure again) only when something does
    not fit, so the drawn margins equal the requested ones exactly when the estimate was enough.
    """
    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    page.goto(f"{url}?text={quote(WIDE_LABELS_TEXT)}")
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot .xtick text", timeout=60_000)
    wait_idle(page)
    labels = heatmap_tick_labels(page)
    assert "東" in labels and "[MASK]" in labels
    requested, drawn = page.eval_on_selector(
        ".js-plotly-plot",
        "gd => [gd.layout.margin, gd._fullLayout._size]",
    )
    assert drawn["l"] == requested["l"], "the y labels or title pushed the left margin"
    assert drawn["b"] == requested["b"], "the x labels or title pushed the bottom margin"
    assert page_exceptions(page) == []
