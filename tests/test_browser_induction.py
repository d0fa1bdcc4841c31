"""Induction heads in chromium: found in a decoder's heads, and learned in the lab.

The headless tests (tests/test_induction_pages.py) check every number against core.induction;
here a real browser shows the same: 4 · Multi-head's grid for a tiny GPT-2 loaded from a local
folder, cell for cell as plotly holds it, and the lab's two-layer run trained by a click, its
figures drawn and its best head's score the one the page names.
"""

from __future__ import annotations

import re
import urllib.parse

import numpy as np
import pytest
from test_browser_hostile_urls import LOAD_BUTTON, OTHER
from test_browser_suite import new_tab
from tiny_families import write_tiny_family

import core
from core import induction
from tests.support.browser import LOCAL_USER_ENV, chromium, served_app, shown_errors

TEXT = "the river bank flows past the old mill"
# A heatmap's cells as plotly holds them after drawing: _fullData's z is decoded from base64.
HEATMAP_Z_JS = """
(selector) => {
  const gd = document.querySelector(selector);
  return gd._fullData.filter(t => t.type === 'heatmap').map(t => Array.from(t.z, row => Array.from(row)));
}
"""


@pytest.mark.browser
def test_induction_heads_found_in_a_decoder_and_learned_in_the_lab(tmp_path):
    folder = write_tiny_family(tmp_path / "gpt2", "gpt2", seed=3)
    found = induction.found_scores(core.load_folder(folder)).scores  # (L, H) each, computed here
    with served_app(extra_env=LOCAL_USER_ENV) as server, chromium() as browser:
        tab, context = new_tab(browser, server)
        try:
            page = tab.page
            query = {
                "model": OTHER,
                "custom_model": str(folder),
                "text": TEXT,
                "mh_section": "5 · Induction heads",
            }
            tab.goto(f"{server.url}/multi_head?{urllib.parse.urlencode(query)}")
            tab.act(lambda: page.locator(LOAD_BUTTON).click())
            grid = ".st-key-mh_induction_grid .js-plotly-plot"
            page.locator(grid).wait_for(timeout=120_000)
            page.wait_for_function(
                "s => { const gd = document.querySelector(s); return gd && gd._fullData; }",
                arg=grid,
            )
            previous, inductive = (
                np.array(z, dtype=float) for z in page.evaluate(HEATMAP_Z_JS, grid)
            )
            np.testing.assert_allclose(previous, np.round(found.previous_token, 3))
            np.testing.assert_allclose(inductive, np.round(found.induction, 3))
            assert not shown_errors(page), shown_errors(page)

            # Learned: the lab's second experiment, trained by a click.
            tab.goto(f"{server.url}/lab")
            train = page.get_by_role("button", name="Train (2 layers)")
            train.scroll_into_view_if_needed()
            tab.act(lambda: train.click())
            for key in ("ind_loss", "ind_previous_curves", "ind_induction_curves", "ind_grid"):
                page.locator(f".st-key-{key} .js-plotly-plot").wait_for(timeout=300_000)
            metric = page.locator('[data-testid="stMetric"]').filter(
                has_text="Best induction score"
            )
            label = metric.locator('[data-testid="stMetricLabel"]').inner_text()
            best = float(metric.locator('[data-testid="stMetricValue"]').inner_text())
            layer, head = (int(n) for n in re.search(r"L(\d+)\s*H(\d+)", label).groups())
            final = page.evaluate(HEATMAP_Z_JS, ".st-key-ind_grid .js-plotly-plot")[1]  # induction
            assert final[layer][head] == pytest.approx(best, abs=0.006)  # the metric is 2 decimals
            assert best == pytest.approx(max(max(row) for row in final), abs=0.006)
            assert layer == 1, "the induction head the page names is in layer 1"
            assert not shown_errors(page), shown_errors(page)
        finally:
            context.close()
