"""Induction heads in chromium, found in a decoder's heads.

The headless tests (tests/test_induction_pages.py) check every number against core.induction,
the lab's trained runs included (the lab's figures in chromium: tests/test_lab.py); here a real
browser shows the same: 4 · Multi-head's grid for a tiny GPT-2 loaded from a local folder, cell
for cell as plotly holds it.
"""

from __future__ import annotations

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
def test_induction_heads_found_in_a_decoder_are_drawn_cell_for_cell(tmp_path):
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

        finally:
            context.close()
