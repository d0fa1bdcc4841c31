"""Tables folded in an expander (widgets.folded) are not sent until the expander is opened, and
once opened show the page's numbers: checked here against a computation of their own.

A closed st.dataframe still cost the browser ~140 ms on every load and update; these tests pin
both halves of the trade: nothing while closed, the right table when open.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_no_exception, open_tab, run_page
from shown import html_figures

import core
from ui import multi_head_runs

SENTENCE = "The bank raised its rates."
PAIR = ("A man is playing a guitar.", "Someone plays an instrument.")


def opened(at, key: str):
    """The page rerun with the folded expander `key` open; its one table's columns."""
    assert len(at.dataframe) == 0, "a closed expander sends no table"
    assert at.expander(key=key).label
    at.session_state[key] = True
    at.run()
    assert_no_exception(at)
    assert len(at.dataframe) == 1
    return at.dataframe[0].value


def test_head_statistics_table_is_every_heads_entropy(model):
    at = run_page("views/heatmaps.py", text=SENTENCE)
    assert_no_exception(at)
    table = opened(at, "hm_stats_table")
    attentions = np.asarray(model.run(SENTENCE).attentions, dtype=np.float64)  # (L, H, n, n)
    n_layers, n_heads = attentions.shape[:2]
    assert list(table["layer"]) == [layer for layer in range(n_layers) for _ in range(n_heads)]
    assert list(table["head"]) == list(range(n_heads)) * n_layers
    for row, (layer, head) in enumerate([(0, 0), (2, 7), (5, 11)]):
        bits = [
            -sum(p * np.log2(p) for p in weights if p > 0) for weights in attentions[layer, head]
        ]
        shown = table["mean row entropy (bits)"][layer * n_heads + head]
        assert shown == pytest.approx(np.mean(bits), abs=1e-4), (row, layer, head)
        on_cls = attentions[layer, head, :, 0].mean()  # [CLS] is key 0
        assert table["share on [CLS]"][layer * n_heads + head] == pytest.approx(on_cls, abs=1e-4)


def test_explanation_scores_table_is_the_heatmaps_rows():
    """The table lists each word piece once, with the same scores the methods heatmap draws
    (there as each row ÷ its max |score|)."""
    from transformers import AutoTokenizer

    at = run_page("views/explanations.py", text=PAIR[0], pair=PAIR[1])
    assert_no_exception(at)
    table = opened(at, "xp_table")
    hf = AutoTokenizer.from_pretrained(str(core.load_model().model_dir))
    assert list(table["word piece"]) == hf.convert_ids_to_tokens(hf(PAIR[0])["input_ids"])
    grid = html_figures(at)["xp_methods"]  # every number written in: two decimals
    methods = grid["rows"]
    drawn = np.asarray(grid["numbers"]).reshape(len(methods), -1)  # (methods, pieces)
    for method, row in zip(methods, drawn, strict=True):
        scores = np.asarray(table[method], dtype=np.float64)
        np.testing.assert_allclose(row, scores / np.abs(scores).max(), atol=0.0051)
    # the rank agreement grid: Spearman's ρ of the table's columns, [CLS] and [SEP] left out
    from scipy.stats import spearmanr

    kept = ~table["word piece"].isin(["[CLS]", "[SEP]"]).to_numpy()
    columns = np.array([np.asarray(table[method], dtype=np.float64)[kept] for method in methods])
    expected = spearmanr(columns, axis=1).statistic  # (methods, methods)
    rho = np.asarray(html_figures(at)["xp_rho"]["numbers"]).reshape(len(methods), len(methods))
    np.testing.assert_allclose(rho, expected, atol=0.0051)  # written with two decimals


def test_probe_sentences_table_lists_the_probe_sentences():

    at = run_page("views/multi_head.py", text=SENTENCE)
    open_tab(at, "mh_section", "1 · All heads")
    assert_no_exception(at)
    table = opened(at, "mh_probes")
    assert list(table["sentence"]) == list(multi_head_runs.probe_sentences())
