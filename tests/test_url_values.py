"""Fast checks: URL values that cannot break a page, and the review's
smaller defects (statistics of the hidden specials, formulas from the switches, the
permutation experiment on sentence pairs, pages that start from the model as it is, caches).

The browser half of these URL checks (a copied link reopens the same figures) is tests/test_browser_links.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from bound_keys import url_bound_keys
from conftest import (
    ROOT,
    answer_every_question,
    assert_no_exception,
    open_tab,
    page_paths,
    section_key,
    section_labels,
)
from shown import sent_array as decoded

from core import head_stats, positional
from ui import heatmaps_runs, positional_runs

SPECIALS = ("[CLS]", "[SEP]")


# ---- every URL-bound control survives garbage in the URL ----------------------------------
ALL_KEYS = url_bound_keys()
TEXT_KEYS = {"text", "pair", "custom_model", "model"}  # hostile text: tests/test_browser_suite.py


def test_the_controls_named_in_the_issue_are_bound_to_the_url():
    assert {"sm_query", "pos_bit", "pos_p", "ctx_word", "image_format"} <= set(ALL_KEYS)


GARBAGE = ("999999", "-3", "zz", "", "nan", "2.5")
WIDGET_KINDS = ("slider", "number_input", "select_slider", "selectbox", "radio", "multiselect",
                "toggle", "checkbox", "text_input", "text_area")  # fmt: skip


def bound_widgets(at) -> dict[str, object]:
    """The URL-bound widgets drawn by the last run, by key."""
    keys = set(ALL_KEYS)
    return {e.key: e for kind in WIDGET_KINDS for e in at.get(kind) if e.key in keys}


def open_every_tab(at, page: str):
    """The bound widgets of each tab in turn (the first as opened, then every later one), and
    each later tab's headings: a tab opens on its own heading, so distinct headings show that
    every tab opened."""
    yield bound_widgets(at)
    headings = set()
    for label in section_labels(page)[1:]:
        open_tab(at, section_key(page), label)
        assert_no_exception(at)
        headings.add(tuple(heading.value for heading in at.subheader))
        yield bound_widgets(at)
    assert len(headings) == len(section_labels(page)[1:]), "a tab did not open"


def page_run(page: str, query: dict[str, str]):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    answer_every_question(at)  # the figures questions fold are drawn
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    if page != page_paths()[0]:
        at.switch_page(page)
        at.run()
    assert_no_exception(at)
    return at


_defaults: dict[str, list[dict[str, object]]] = {}


def default_values(page: str) -> list[dict[str, object]]:
    """Every bound widget's value, tab by tab, from a link with the sentence only (cached)."""
    if page not in _defaults:
        at = page_run(page, {"text": SENTENCE})
        _defaults[page] = [
            {key: widget.value for key, widget in tab.items()} for tab in open_every_tab(at, page)
        ]
    return _defaults[page]


def expected_value(widget, garbage: str, default: object) -> object:
    """What a widget holds after `garbage` arrived in its URL key: a text box the text itself; a
    number inside a slider's or number box's range that number (cut to a whole number for a
    whole-number widget: "2.5" is 2); a multiselect given "" nothing, a valid empty choice;
    anything else the widget's default."""
    kind = type(widget).__name__
    if kind in ("TextInput", "TextArea"):
        return garbage
    if kind == "Multiselect" and garbage == "":
        return []
    low, high = getattr(widget, "min", None), getattr(widget, "max", None)
    if kind in ("Slider", "NumberInput") and isinstance(default, (int, float)):
        try:
            number = float(garbage)
        except ValueError:
            return default
        if low is not None and high is not None and low <= number <= high:
            return type(default)(number)
    return default


SENTENCE = "The bank by the river."


@pytest.mark.parametrize("round_index", range(3))
@pytest.mark.parametrize("page", page_paths())
def test_garbage_in_every_url_key_falls_back_to_valid_values(page, round_index):
    """Out-of-range numbers, words and blanks in every bound key: the page draws, no error, and
    every widget holds what expected_value() says, against the values the same page shows from
    a link without the garbage.

    Three rounds per page; key i gets GARBAGE[(i + 2 * round) % 6], so across the keys every
    kind of garbage meets every page.
    """
    query = {
        key: GARBAGE[(index + 2 * round_index) % len(GARBAGE)]
        for index, key in enumerate(k for k in ALL_KEYS if k not in TEXT_KEYS)
    }
    defaults = default_values(page)
    at = page_run(page, {**query, "text": SENTENCE})
    checked = 0
    for tab, (widgets, tab_defaults) in enumerate(
        zip(open_every_tab(at, page), defaults, strict=True)
    ):
        for key, widget in widgets.items():
            if key not in query or key not in tab_defaults:
                continue  # the sidebar's sentence; or a widget drawn only for some inputs
            want = expected_value(widget, query[key], tab_defaults[key])
            assert widget.value == want, (
                f"tab {tab}: {key}={query[key]!r} gave {widget.value!r}, expected {want!r}"
            )
            checked += 1
    assert checked >= 3, f"only {checked} widgets checked"  # the sidebar's switches at least


# ---- "Hide [CLS] and [SEP]" reaches the per-head statistics -------------------------------
def hidden_statistics_by_loop(attn_weights: np.ndarray, tokens: list[str]) -> dict[str, np.ndarray]:
    """The statistics of the renormalised weights, one row at a time, written out."""
    n_layers, n_heads, n, _ = attn_weights.shape
    out = {name: np.zeros((n_layers, n_heads)) for name in ("entropy", "on_self", "on_next")}
    for layer in range(n_layers):
        for head in range(n_heads):
            entropies, selves, nexts = [], [], []
            for i in range(n):
                row = [
                    0.0 if tokens[j] in SPECIALS else float(attn_weights[layer, head, i, j])
                    for j in range(n)
                ]
                total = sum(row)
                row = [w / total if total > 0 else 0.0 for w in row]
                entropies.append(-sum(w * np.log2(w) for w in row if w > 0))
                if tokens[i] in SPECIALS:
                    continue  # a special row scores no role: only real word pieces ask
                selves.append(row[i])
                if i + 1 < n and tokens[i + 1] not in SPECIALS:
                    nexts.append(row[i + 1])
            out["entropy"][layer, head] = np.mean(entropies)
            out["on_self"][layer, head] = np.mean(selves)
            out["on_next"][layer, head] = np.mean(nexts)
    return out


def test_statistics_with_specials_hidden_describe_the_renormalised_weights(model):
    trace = model.run("The bank by the river.", "It flooded.")
    tokens = list(trace.tokens)
    weights = trace.attentions[:2]  # (2, H, n, n): two layers keep the loop quick
    shown = head_stats.head_statistics(weights, tokens, hide_specials=True)
    expected = hidden_statistics_by_loop(weights, tokens)
    for name, values in expected.items():
        np.testing.assert_allclose(shown.stat(name), values, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(shown.on_cls, 0.0)
    np.testing.assert_allclose(shown.on_sep, 0.0)
    as_computed = head_stats.head_statistics(weights, tokens)
    np.testing.assert_array_equal(shown.sink, as_computed.sink)  # sinks: the weights as computed
    assert not np.allclose(shown.entropy, as_computed.entropy)


def chart_spec(at, key: str) -> dict:
    for chart in at.get("plotly_chart"):
        if chart.proto.id.endswith(key):
            return json.loads(chart.proto.spec)
    raise AssertionError(f"no figure with key {key}")


def test_the_heatmaps_page_shows_statistics_of_what_it_shows(model):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    answer_every_question(at)  # the figures questions fold are drawn
    at.query_params.update({"text": "The bank by the river.", "hm_renorm": "true"})
    at.run()
    at.switch_page("views/heatmaps.py")
    at.run()
    assert_no_exception(at)
    drawn = decoded(chart_spec(at, "hm_stats")["data"][0]["z"])  # (L, H) mean row entropy
    trace = model.run("The bank by the river.")
    expected = head_stats.head_statistics(trace, hide_specials=True).entropy
    np.testing.assert_allclose(drawn, expected, atol=5e-4)  # the figure rounds to 3 decimals
    assert not np.allclose(drawn, head_stats.head_statistics(trace).entropy, atol=1e-2)


# ---- formulas follow the switches ---------------------------------------------------------
SWITCHED_PAGES = [
    "views/overview.py",
    "views/qkv.py",
    "views/multi_head.py",
    "views/heatmaps.py",
    "views/head_view.py",
]
# the tab that holds a page's attention formula, on pages drawn one tab at a time
FORMULA_TABS = {
    "views/qkv.py": {"qkv_section": "2 · Scores"},
    "views/multi_head.py": {"mh_section": "1 · All heads"},
}


@pytest.mark.parametrize("page", SWITCHED_PAGES)
def test_formulas_are_written_from_the_switches(page):
    from streamlit.testing.v1 import AppTest

    shown = {}
    for scale, causal in ((True, False), (False, True)):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        answer_every_question(at)  # the figures questions fold are drawn
        at.query_params.update({"scale": str(scale).lower(), "causal": str(causal).lower()})
        at.query_params.update(FORMULA_TABS.get(page, {}))
        at.run()
        if page != page_paths()[0]:
            at.switch_page(page)
            at.run()
        assert_no_exception(at)
        shown[scale, causal] = " ".join(latex.value for latex in at.latex)
    scaled, unscaled_causal = shown[True, False], shown[False, True]
    assert r"\sqrt{d_k}" in scaled
    assert r"\sqrt{d_k}" not in unscaled_causal, "√d_k shown while scaling is off"
    assert "+ M" not in scaled and r"m \le i" not in scaled, "a mask shown while it is off"
    assert any(mark in unscaled_causal for mark in ("+ M", r"m \le i", r"j \le i")), (
        "the causal mask is on but no formula shows it"
    )


# ---- the permutation experiment on a sentence pair ----------------------------------------
def test_shuffle_keeps_cls_and_every_sep_and_each_sentence_apart():
    segments = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])  # [CLS] a b c d [SEP] e f g [SEP]
    special = np.isin(np.arange(10), [0, 5, 9])
    for seed in range(20):
        order = positional.shuffle_order(len(segments), seed, segments, special)
        assert sorted(order) == list(range(len(segments)))
        assert order[0] == 0 and order[5] == 5 and order[9] == 9  # [CLS], middle [SEP], last
        np.testing.assert_array_equal(segments[order], segments)  # no token changes sentence
        assert not np.array_equal(order, np.arange(len(segments)))


def test_permutation_experiment_reads_a_pair_as_the_model_does(model):
    trace = model.run("The bank raised its rates again.", "Fruit flies like a banana.")
    tokens, ids, segments = trace.tokens, trace.input_ids, trace.segments
    result = positional.permutation_experiment(
        model, tokens, ids, trace.special, positions=True, seed=1, segments=segments
    )
    # The unshuffled run is the encoder's own forward pass of the pair, sentence ids included.
    np.testing.assert_allclose(result.original, trace.attentions, atol=1e-5)
    for i, token in enumerate(tokens):
        if token in SPECIALS:
            assert result.shuffled_tokens[i] == token, (i, result.shuffled_tokens)
    np.testing.assert_array_equal(segments[result.order], segments)
    off = positional.permutation_experiment(
        model, tokens, ids, trace.special, positions=False, seed=1, segments=segments
    )
    assert off.max_abs_diff < 1e-5, off.max_abs_diff_per_layer  # a bag of words per sentence


# ---- the experiments open on one change, drawn --------------------------
def test_scaling_and_multi_head_pages_open_on_one_change():
    from conftest import drawn_figures, run_page

    at = run_page("views/scaling_masking.py", query={"sm_section": "3 · Switches"})
    assert_no_exception(at)
    assert at.toggle(key="sm_scale").value is False  # one switch changed, not both
    assert at.toggle(key="sm_causal").value is False
    assert {"sm_a", "sm_b"} <= drawn_figures(at)
    at = run_page("views/multi_head.py", query={"mh_section": "4 · Remove heads"})
    assert_no_exception(at)
    assert at.toggle(key="mh_ablate_layer").value is False  # one head, not a whole layer
    assert at.multiselect(key="mh_ablate").value == []
    assert "mh_ablation_final" in drawn_figures(at)


# ---- the heavy derived results are cached --------------------------------------------------
def test_derived_results_are_cached_per_trace_and_switch(model):

    first = model.run("The bank by the river.")
    again = model.run("The bank by the river.")  # a new Trace object, the same run
    unscaled = model.run("The bank by the river.", scale=False)
    stats = heatmaps_runs.head_statistics(first, True)
    assert heatmaps_runs.head_statistics(again, True) is stats  # a cache hit, no recomputation
    assert heatmaps_runs.head_statistics(first, False) is not stats
    assert not np.allclose(heatmaps_runs.head_statistics(unscaled, True).entropy, stats.entropy)
    np.testing.assert_allclose(
        stats.entropy, head_stats.head_statistics(first, hide_specials=True).entropy
    )
    thumbs = heatmaps_runs.thumbnails(first, True)
    assert heatmaps_runs.thumbnails(again, True) is thumbs and not thumbs.flags.writeable
    permuted = positional_runs.permutation_experiment(model, first, True, 3, 64)
    assert positional_runs.permutation_experiment(model, again, True, 3, 64) is permuted
