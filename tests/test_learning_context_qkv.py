"""Learning path pages 1 and 2: the math in core.context and core.qkv, their figures, and both pages running."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from conftest import (
    BAD_INPUTS,
    LONG_TEXT,
    ROOT,
    answer_every_question,
    answer_open_questions,
    assert_each_tab_draws,
    assert_no_exception,
    drawn_figures,
    open_tab,
    run_page,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from shown import html_figures, shown

import core
from core import context, positional, qkv
from ui import display_policy, matrix_charts, qkv_charts

CONTEXT, QKV = "views/context.py", "views/qkv.py"
DEFAULT_SENTENCE = "Time flies like an arrow."


# ---- page 1: static vectors and parameter-free attention ---------------------------------------
def test_static_rows_are_rows_of_the_word_piece_table(model):
    sentence = context.static_sentence(model, "money bank grows")
    assert sentence.tokens == ("money", "bank", "grows")
    ids = [model.tokenizer.id_of(t) for t in sentence.tokens]
    np.testing.assert_array_equal(sentence.vectors, model.word_vectors()[ids])
    assert sentence.vectors.shape == (3, model.d_model)
    assert not sentence.truncated


@pytest.mark.parametrize("text", ["", "   \n\t ", "\x00\x01\x07", None])
def test_static_sentence_rejects_text_without_words(model, text):
    with pytest.raises(core.EmptyInput):
        context.static_sentence(model, text)


def test_static_sentence_is_cut_to_the_model_positions(model):
    sentence = context.static_sentence(model, LONG_TEXT)
    assert sentence.truncated
    assert sentence.n_pieces == 2000  # the server keeps 20,000 characters: 2,000 words
    assert len(sentence.tokens) == sentence.vectors.shape[0] == model.max_positions


def test_shared_word_is_identical_before_and_different_after(model):
    """The page's payoff: cosine 1 between the static rows, clearly below 1 after mixing."""
    a = context.static_sentence(model, "money bank grows")
    b = context.static_sentence(model, "river bank flows")
    assert context.shared_tokens(a.tokens, b.tokens) == ["bank"]
    pair = context.compare_shared_word(
        "bank", a, context.parameter_free(a.vectors), b, context.parameter_free(b.vectors)
    )
    assert (pair.index_a, pair.index_b) == (1, 1)
    assert pair.cosine_before == pytest.approx(1.0, abs=1e-12)
    assert pair.cosine_after < 0.99  # measured 0.920 on MiniLM
    assert pair.weights_a.sum() == pytest.approx(1.0, abs=1e-6)
    # money sits closer to bank than river does, so bank takes more from it
    assert pair.weights_a[0] > pair.weights_b[0]


def test_parameter_free_is_softmax_of_x_xt_times_x():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 7)).astype(np.float32)
    result = context.parameter_free(x)
    x64 = x.astype(np.float64)
    similarity = x64 @ x64.T
    weights = np.exp(similarity - similarity.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(result.similarity, similarity, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.attn_weights, weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.output, weights @ x64, rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 6), st.integers(1, 8)),
        elements=st.floats(-3, 3, width=32),
    )
)
def test_parameter_free_rows_are_weighted_averages(x):
    """Every row of Y lies inside the box spanned by the rows of X; weights are a distribution."""
    result = context.parameter_free(x)
    np.testing.assert_allclose(result.attn_weights.sum(axis=1), 1.0, atol=1e-5)
    assert (result.attn_weights >= 0).all()
    np.testing.assert_allclose(result.similarity, result.similarity.T, atol=1e-4)
    assert (result.output <= x.max(axis=0) + 1e-4).all()
    assert (result.output >= x.min(axis=0) - 1e-4).all()


def test_shared_tokens_keep_first_appearance_order_once():
    assert context.shared_tokens(["a", "b", "a", "c"], ["c", "a", "x"]) == ["a", "c"]
    assert context.shared_tokens(["a"], ["b"]) == []


def test_cosine_of_a_zero_vector_is_zero_not_nan():
    assert positional.cosine(np.zeros(3), np.ones(3)) == 0.0
    assert positional.cosine(np.array([1.0, 0.0]), np.array([-2.0, 0.0])) == pytest.approx(-1.0)


# ---- page 2: queries, keys and values ----------------------------------------------------------
def test_random_projections_have_the_chosen_width_and_follow_the_seed():
    first = qkv.random_projections(384, 16, seed=3)
    assert first.w_query.shape == first.w_key.shape == first.w_value.shape == (384, 16)
    assert first.d_k == 16
    np.testing.assert_array_equal(first.w_key, qkv.random_projections(384, 16, 3).w_key)
    assert not np.allclose(first.w_key, qkv.random_projections(384, 16, 4).w_key)
    assert not np.allclose(first.w_query, first.w_key)  # three different matrices


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("layer", "head"), [(0, 0), (3, 7), (5, 11)])
def test_a_head_recomputed_by_hand_equals_the_encoder(model, layer, head, scale, causal):
    """Q, K, V, scores and weights of the page's head equal those inside the model's run."""
    trace = model.run("The river bank flooded after the storm.", scale=scale, causal=causal)
    projections = qkv.head_projections(model, layer, head)
    assert projections.w_query.shape == (model.d_model, model.d_head)
    result = qkv.qkv_attention(trace.hidden_states[layer], projections, scale=scale, causal=causal)
    close = {"rtol": 1e-4, "atol": 1e-5}
    torch.testing.assert_close(result.query, np.array(trace.queries[layer, head]), **close)
    torch.testing.assert_close(result.key, np.array(trace.keys[layer, head]), **close)
    torch.testing.assert_close(result.value, np.array(trace.values[layer, head]), **close)
    torch.testing.assert_close(result.scores, np.array(trace.scores[layer, head]), **close)
    torch.testing.assert_close(
        result.attn_weights, np.array(trace.attentions[layer, head]), **close
    )


def test_qkv_shapes_scaling_and_causal_mask(model):
    trace = model.run(DEFAULT_SENTENCE)
    n = trace.n_tokens
    projections = qkv.random_projections(model.d_model, 5, seed=0)
    result = qkv.qkv_attention(trace.static, projections, scale=True, causal=True)
    assert result.query.shape == result.key.shape == result.value.shape == (n, 5)
    assert result.dot.shape == result.scores.shape == result.attn_weights.shape == (n, n)
    assert result.output.shape == (n, 5)
    below = np.tril(np.ones((n, n), dtype=bool))
    np.testing.assert_allclose(result.scores[below], result.dot[below] / np.sqrt(5), rtol=1e-5)
    assert np.isneginf(result.scores[~below]).all()
    assert (result.attn_weights[~below] == 0).all()
    np.testing.assert_allclose(result.attn_weights.sum(axis=1), 1.0, atol=1e-6)


def test_following_one_query_rebuilds_its_output_row(model):
    trace = model.run(DEFAULT_SENTENCE)
    result = qkv.qkv_attention(trace.static, qkv.random_projections(model.d_model, 8, 1))
    for i in range(trace.n_tokens):
        row = qkv.follow_query(result, i)
        assert row.products.shape == (trace.n_tokens, 8)
        np.testing.assert_allclose(row.products.sum(axis=1), result.dot[i], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(row.dots / np.sqrt(8), row.scores, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(row.weighted_values.sum(axis=0), result.output[i], atol=1e-5)
        np.testing.assert_allclose(row.output, result.output[i], atol=1e-5)


@pytest.mark.parametrize("source", ["random", "trained"])
def test_attention_is_asymmetric_on_the_example(model, source):
    trace = model.run(DEFAULT_SENTENCE)
    if source == "random":
        result = qkv.qkv_attention(trace.static, qkv.random_projections(model.d_model, 8, 0))
    else:
        result = qkv.qkv_attention(trace.hidden_states[2], qkv.head_projections(model, 2, 3))
    difference = qkv.asymmetry(result.attn_weights)
    np.testing.assert_allclose(difference, -difference.T)
    i, j = qkv.most_asymmetric_pair(result.attn_weights)
    assert i != j
    assert result.attn_weights[i, j] - result.attn_weights[j, i] == pytest.approx(difference.max())
    assert difference.max() > 0.1  # measured 0.96 (random, seed 0) on this sentence


def test_symmetric_weights_have_no_asymmetry():
    weights = np.full((4, 4), 0.25, dtype=np.float32)
    assert not qkv.asymmetry(weights).any()


# ---- figures -----------------------------------------------------------------------------------
def test_long_inputs_are_cut_in_the_figure_not_in_the_title():
    n = 300
    tokens = [f"t{i}" for i in range(n)]
    weights = np.full((n, n), 1.0 / n, dtype=np.float32)
    fig = matrix_charts.pair_matrix(weights, tokens, "weights")
    assert np.asarray(fig.data[0].z).shape == (display_policy.DRAW_LIMIT,) * 2
    assert "(300 × 300)" in fig.layout.title.text
    assert "first 48" in matrix_charts.limit_note(n)
    assert matrix_charts.limit_note(10) is None
    wide = matrix_charts.token_matrix(np.zeros((n, 384), np.float32), tokens, "X", "dimension")
    assert np.asarray(wide.data[0].z).size <= display_policy.CELL_BUDGET
    assert wide.layout.title.text == "X (300 × 384) · first 16 rows drawn"


def test_masked_scores_become_gaps_and_small_matrices_show_their_numbers():
    scores = np.array([[0.5, -np.inf], [0.1, 0.2]], dtype=np.float32)
    fig = matrix_charts.pair_matrix(scores, ["a", "b"], "scores", zmax=None)
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert np.isnan(z[0, 1]) and z[1, 1] == pytest.approx(0.2)
    numbers = fig.data[1]  # a text layer: each finite cell's value, none on the masked gap
    assert numbers.mode == "text" and list(numbers.text) == ["0.50", "0.10", "0.20"]
    assert (list(numbers.x), list(numbers.y)) == ([0, 0, 1], [0, 1, 1])
    assert "-Infinity" not in fig.to_json()


def test_tokens_are_shown_as_text_not_markup():
    weights = np.array([0.5, 0.5], dtype=np.float32)
    fig = qkv_charts.query_steps(weights, weights, weights, ["<b>", "&"], 0, scaled=True)
    assert "“<b>”" in shown(fig.layout.title.text)
    assert [shown(label) for label in fig.data[0].customdata] == ["<b>", "&"]


def test_query_steps_draw_three_bar_rows_on_numeric_axes():
    tokens = ["[CLS]", "the", "the", "[SEP]"]  # a repeated token must keep its own bar
    values = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    fig = qkv_charts.query_steps(values, values, values, tokens, 1, scaled=True)
    assert [shown(t) for t in fig.layout.xaxis3.ticktext] == tokens
    assert list(fig.data[0].x) == [0, 1, 2, 3]


# ---- the pages, headless -----------------------------------------------------------------------
def run_context(text_a: str, text_b: str = "river bank flows"):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    answer_every_question(at)  # the figures questions fold are drawn
    at.run()
    at.switch_page(CONTEXT)
    at.session_state["ctx_a"] = text_a
    at.session_state["ctx_b"] = text_b
    at.run()
    return at


def test_context_page_shows_the_payoff_on_the_defaults():
    at = run_page(CONTEXT)
    assert_no_exception(at)
    assert at.text_input(key="ctx_a").value == "money bank grows"
    before, after = (float(metric.value) for metric in at.metric)
    assert before == 1.0 and after < 1.0
    # X, XXᵀ, softmax, Y and the bars for A and B, all HTML: the page loads no plotly.js
    steps = ("x", "xxt", "softmax", "y", "payoff")
    assert drawn_figures(at) == {f"ctx_{step}_{s}" for step in steps for s in "AB"} | {"ctx_length"}
    assert not at.get("plotly_chart")


def test_context_page_writes_the_numbers_of_its_matrices_and_bars(model):
    """Sentence A's X Xᵀ, its row softmax and the shared word's row, as the HTML figures write
    them, against the products worked out here from the word-piece table's rows."""
    at = run_page(CONTEXT)
    figures = html_figures(at)
    x = context.static_sentence(model, "money bank grows").vectors.astype(np.float64)  # (3, d)
    scores = x @ x.T  # (3, 3)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(figures["ctx_xxt_A"]["numbers"], scores.ravel(), atol=0.0051)
    np.testing.assert_allclose(figures["ctx_softmax_A"]["numbers"], weights.ravel(), atol=0.0051)
    assert figures["ctx_payoff_A"]["rows"] == ["money", "bank", "grows"]
    np.testing.assert_allclose(figures["ctx_payoff_A"]["numbers"], weights[1], atol=0.0051)


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_context_page_handles_bad_input(name):
    at = run_context(BAD_INPUTS[name])
    assert_no_exception(at)
    messages = " ".join(m.value for m in [*at.info, *at.warning, *at.caption])
    if not BAD_INPUTS[name].strip() or name == "control":
        assert "Sentence A" in messages and not drawn_figures(at)
    if name == "ten_thousand":
        assert "only the first 512" in messages and "first 48" in messages
        assert float(at.metric[1].value) < 1.0  # "bank" is shared with sentence B


def test_context_page_shows_a_markdown_character_as_typed():
    at = run_context("it costs $ 5", "pay $ now")
    assert_no_exception(at)
    label = at.metric[0].label
    assert "$" not in label and shown(label) == "cosine of “$”, A vs B, in X"  # $…$ would be math


def test_context_page_without_a_shared_word_says_so():
    at = run_context("hello world", "river bank flows")
    assert_no_exception(at)
    assert any("share no word" in w.value for w in at.warning)


def test_context_page_with_several_shared_words_lets_the_learner_choose():
    at = run_context("the bank of the river", "the river bank")
    assert_no_exception(at)
    assert at.selectbox(key="ctx_word").options == ["the", "bank", "river"]
    at.selectbox(key="ctx_word").set_value("river").run()
    assert "river" in at.metric[0].label
    at.text_input(key="ctx_b").set_value("a bank").run()  # "river" is no longer shared
    assert_no_exception(at)


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_qkv_page_handles_bad_sidebar_text(name):
    at = run_page(QKV, text=BAD_INPUTS[name])
    assert_no_exception(at)
    if not BAD_INPUTS[name].strip() or name == "control":
        assert at.info and not drawn_figures(at)
        return
    assert_each_tab_draws(at, QKV, QKV_FIGURES)


# Every figure of the Q, K, V page, by the tab that draws it (views/qkv.py, SECTIONS), beside the
# two maps above the tabs that every tab keeps: where each row's largest weight goes, with one
# vector and with the projections (the takeaway's counts).
ABOVE_THE_TABS = {"qkv_winners_one", "qkv_winners_projected"}
QKV_FIGURES = {
    label: ABOVE_THE_TABS | figures
    for label, figures in {
        "1 · Projections": {"qkv_q", "qkv_k", "qkv_v"},
        "2 · Scores": {"qkv_scores", "qkv_weights"},
        "3 · Output": {"qkv_output"},
        "4 · One query": {"qkv_steps", "qkv_products", "qkv_weighted"},
        "5 · Not symmetric": {"qkv_score_asymmetry", "qkv_asymmetry"},
        "6 · One matrix": set(),  # numbers in the prose: M's rank and how far the two ways agree
        "7 · Payoff": {"qkv_payoff"},
        "8 · All at once": set(),  # numbers: the two gaps, as metrics
    }.items()
}


def test_qkv_page_draws_one_step_at_a_time():
    at = run_page(QKV, text=DEFAULT_SENTENCE)
    assert_no_exception(at)
    assert_each_tab_draws(at, QKV, QKV_FIGURES)
    texts = " ".join(m.value for m in open_tab(at, "qkv_section", "7 · Payoff").markdown)
    assert "each trained head of layer 0" in texts  # Step 7's prose, in its own tab
    # the projections chosen above the tabs reach every step: d_k = 5 in Step 6's rank
    at.slider(key="qkv_dk").set_value(5).run()
    texts = " ".join(m.value for m in open_tab(at, "qkv_section", "6 · One matrix").markdown)
    assert "of rank at most d_k = 5 (here 5)" in texts


def test_qkv_page_writes_the_numbers_a_learner_can_check(model):
    """Step 1's Q and Step 2's weights of the default sentence, as the HTML grids write them,
    against X W_q and softmax(Q Kᵀ/√d_k) worked out here from the seeded random W (d_k = 8)."""
    at = run_page(QKV, text=DEFAULT_SENTENCE)
    x = model.run(DEFAULT_SENTENCE).static.astype(np.float64)  # (n, d) with [CLS] and [SEP]
    projections = qkv.random_projections(model.d_model, 8, seed=0)
    query = x @ projections.w_query.astype(np.float64)  # (n, 8)
    key = x @ projections.w_key.astype(np.float64)
    scores = query @ key.T / np.sqrt(8)  # (n, n)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    q_grid = html_figures(at)["qkv_q"]  # 8 columns: one decimal, "-0.0" never
    np.testing.assert_allclose(q_grid["numbers"], query.ravel(), atol=0.051)
    assert q_grid["rows"] == list(model.run(DEFAULT_SENTENCE).tokens)
    assert not any(
        text == "-0.0" for text in re.findall(r">([^<]*)</i>", _grid_markup(at, "qkv_q"))
    )
    alpha = html_figures(open_tab(at, "qkv_section", "2 · Scores"))["qkv_weights"]
    np.testing.assert_allclose(alpha["numbers"], weights.ravel(), atol=0.0051)  # written '.07'


def test_qkv_matrices_are_html_up_to_48_tokens_numbers_written_up_to_twelve(model):
    """matrix_charts' edges: a sentence of 12 word pieces gets HTML grids with every number
    written in; one of 13 a grid of one image, whose readout numbers are Q = X W_q worked out
    here; one of 49 plotly heatmaps of the first 48 (DRAW_LIMIT), as the page's note says."""
    projections = qkv.random_projections(model.d_model, 8, seed=0)
    for n_pieces, kind in ((12, "written"), (13, "image"), (49, "plotly")):
        text = " ".join(["bank"] * (n_pieces - 2))  # [CLS], n − 2 words, [SEP]
        assert model.run(text).n_tokens == n_pieces
        at = run_page(QKV, text=text)
        assert_no_exception(at)
        plotly_keys = {chart.key for chart in at.get("plotly_chart")}
        grids = html_figures(at)
        names = {"qkv_winners_one", "qkv_winners_projected", "qkv_q", "qkv_k", "qkv_v"}
        assert (set(grids), plotly_keys) == ((set(), names) if kind == "plotly" else (names, set()))
        drawn_note = any("the figures draw the first 48" in c.value for c in at.caption)
        assert drawn_note == (kind == "plotly"), n_pieces  # the note is true of what is drawn
        if kind != "plotly":
            assert grids["qkv_q"]["image"] == (kind == "image"), n_pieces
        if kind == "image":
            x = model.run(text).static.astype(np.float64)  # (13, d)
            query = x @ projections.w_query.astype(np.float64)  # (13, 8)
            np.testing.assert_allclose(
                grids["qkv_q"]["numbers"], query.ravel(), rtol=5e-4, atol=1e-4
            )


def _grid_markup(at, name: str) -> str:
    return next(e.proto.body for e in at.get("html") if f'data-figure="{name}"' in e.proto.body)


def test_qkv_page_on_a_trained_head_and_a_long_input():
    at = run_page(QKV, text=LONG_TEXT)
    at.radio(key="qkv_source").set_value("trained head").run()
    at.slider(key="layer").set_value(4).run()
    assert_no_exception(at)
    assert any("first 48" in c.value for c in at.caption)
    assert any("512" in w.value for w in at.warning)
    (query_chart,) = [c for c in at.get("plotly_chart") if c.key == "qkv_q"]
    spec = json.loads(query_chart.proto.spec)  # read the figure as data, not text
    assert "(512 × 32)" in spec["layout"]["title"]["text"]  # Q of a MiniLM head


def test_qkv_page_query_choice_follows_the_sentence():
    at = run_page(QKV, text=DEFAULT_SENTENCE, query={"qkv_section": "4 · One query"})
    at = answer_open_questions(at.slider(key="qkv_query").set_value(5).run())  # a new query
    assert "Query 5" in at.get("plotly_chart")[0].proto.spec
    assert "Position 5: **arrow**" in [c.value for c in at.caption]  # the token is named
    # A shared link made on a longer sentence: its query position does not exist here.
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    answer_every_question(at)  # the figures questions fold are drawn
    at.session_state["text"] = "short"
    at.query_params["qkv_query"] = "5"
    at.query_params["qkv_section"] = "4 · One query"
    at.run()
    at.switch_page(QKV)
    at.run()
    assert_no_exception(at)
    assert (at.slider(key="qkv_query").min, at.slider(key="qkv_query").max) == (0, 2)
    assert at.slider(key="qkv_query").value == 1  # the default, not an error


# ---- the pages in a real browser ---------------------------------------------------------------
@pytest.mark.browser
def test_both_pages_draw_in_chromium(server, browser):
    """Reach both pages through the sidebar, as a learner does, and wait for their plots."""
    from tests.support.browser import page_exceptions, wait_for_app

    # (plotly figures, HTML matrices): Context's X and Y of both sentences are HTML (its bars
    # too), its X Xᵀ and softmax wait for Step 2's question (ui/predict.py); the Q, K, V page
    # opens on its two maps of each row's largest weight and Step 1's three 8 × 8 matrices (the
    # default sentence's 8 word pieces, d_k = 8), all HTML grids
    expected = {"1 · Context from first principles": (0, 4), "2 · Queries, keys and values": (0, 5)}
    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    page.goto(url)
    wait_for_app(page)
    for title, (n_plots, n_grids) in expected.items():
        page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=title).click()
        page.get_by_role("heading", name=title).wait_for(timeout=60_000)
        wait_for_app(page)
        # plotly.js draws each chart after the script has finished: wait for all of them
        page.wait_for_function(
            f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= {n_plots}"
            f" && document.querySelectorAll('[data-testid=stMain] .ae-matrix').length == {n_grids}",
            timeout=90_000,
        )
        plots = page.evaluate(
            "document.querySelectorAll('[data-testid=stMain] .js-plotly-plot').length"
        )
        assert plots == n_plots, title  # the blank preload figure is gone by now
        assert page_exceptions(page) == [], title


@pytest.mark.browser
def test_a_tap_on_a_long_sentences_query_image_names_the_cell(server, browser, model):
    """Past 12 word pieces Q is one image: a tap on row 2, column 5 writes that token, that
    dimension and Q[2, 5] (X W_q worked out here from the seeded W) under the figure."""
    from urllib.parse import quote

    from tests.support.browser import page_exceptions, wait_for_app
    from ui import html_heatmap

    text = "the river bank flooded again after the long storm and the quiet night ended"
    tokens = model.run(text).tokens
    x = model.run(text).static.astype(np.float64)  # (n, d) with [CLS] and [SEP]
    query = x @ qkv.random_projections(model.d_model, 8, seed=0).w_query.astype(np.float64)
    n = len(tokens)
    assert n > display_policy.NUMBERS_UP_TO
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/qkv?text={quote(text)}")
        wait_for_app(page)
        figure = page.locator("[data-testid='stMain'] .ae-matrix[data-figure='qkv_q']")
        figure.locator("img.ae-cells").wait_for(timeout=60_000)
        assert figure.locator(".ae-readout").text_content() == html_heatmap.CELL_HINT
        box = figure.locator("img.ae-cells").bounding_box()
        figure.locator("img.ae-cells").tap(
            position={"x": 5.5 * box["width"] / 8, "y": 2.5 * box["height"] / n}
        )
        page.wait_for_function(
            "f => f.querySelector('.ae-readout').textContent.startsWith('token 2')",
            arg=figure.element_handle(),
        )
        readout = figure.locator(".ae-readout").text_content()
        start = f"token 2: {tokens[2]} · dimension 5 · value "
        assert readout.startswith(start), readout
        assert float(readout[len(start) :]) == pytest.approx(query[2, 5], rel=1e-3, abs=1e-4)
        # 2 px inside the far corner: the last cell, not one past it (at the very edge the
        # colour bar's column or the page takes the tap)
        image = figure.locator("img.ae-cells")
        image.tap(position={"x": box["width"] - 2, "y": box["height"] - 2})
        last = f"token {n - 1}: [SEP] · dimension 7 · value "
        page.wait_for_function(
            "([f, t]) => f.querySelector('.ae-readout').textContent.startsWith(t)",
            arg=[figure.element_handle(), last],
        )
        assert page_exceptions(page) == []
    finally:
        context.close()


def _formula_on_rows(rows: list[np.ndarray], indices: tuple[int, int]) -> tuple[float, float]:
    """Page 1's formula softmax(X Xᵀ) X on each sentence's rows: the cosine of the word's two
    input rows, then of its two mixed rows, in float64."""
    mixed = []
    for x, index in zip(rows, indices, strict=True):
        scores = x @ x.T
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        mixed.append((weights @ x)[index])
    inputs = [x[index] for x, index in zip(rows, indices, strict=True)]

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    return cosine(*inputs), cosine(*mixed)


def _assert_formula_paragraph(text: str, cosine_input: float, here: float) -> None:
    """The paragraph before the payoff's question: its cosine and its clause on the input rows
    follow numbers computed in the test."""
    page_one_after = re.search(r"took their cosine from [\d.]+ to ([\d.]+)\.", text).group(1)
    differs = f"{here:.3f}" != page_one_after
    said = f"page 1's formula gives {here:.3f} on them, where page 1's own rows gave"
    assert (said in text) == differs, text[-600:]
    if round(cosine_input, 3) >= 1.0:
        assert "rows enter as the same vector" in text, text[-600:]
    else:  # the drop comes before any mixing: the paragraph says so, with the input cosine
        assert f"already differ before any mixing (cosine {cosine_input:.3f};" in text, text[-600:]
        assert "enter as the same vector" not in text, text[-600:]


def test_the_payoff_says_before_its_question_why_page_ones_formula_gives_another_cosine(model):
    """Step 7 quotes page 1's 1.000 → 0.920, then mixes the model's own layer-0 rows by the same
    formula: where that gives another cosine, the paragraph above the question says so and why
    (the rows' length; whether the word's two rows already differ), with numbers recomputed here
    from those rows."""
    at = run_page("views/qkv.py", query={"qkv_section": "7 · Payoff"})
    assert_no_exception(at)
    text = " ".join(shown(m.value) for m in at.markdown)
    through = qkv.shared_word_through_heads(model, "money bank grows", "river bank flows", "bank")
    rows = [  # the word's row of X in each sentence, and softmax(X Xᵀ) X's row for it
        context.attention_input(model, trace.input_ids, trace.segments, 0).astype(np.float64)
        for trace in (model.run("money bank grows"), model.run("river bank flows"))
    ]
    cosine_input, here = _formula_on_rows(rows, (through.index_a, through.index_b))
    _assert_formula_paragraph(text, cosine_input, here)
    assert f"{here:.3f}" == "1.000", "on MiniLM the two differ (1.000 against 0.920)"


def test_the_payoffs_formula_paragraph_on_gpt2_blames_the_input_rows(local_folders):
    """On a GPT-2, "bank" sits at another piece in each sentence, so its two input rows get
    different position rows and differ before any mixing: the paragraph says so with their
    cosine, read here from transformers' own layer 0 (what its attention is handed)."""
    from family_pages import family_folder, run_on
    from tiny_families import load_reference

    from core.reference import _layer_modules

    folder = family_folder("gpt2")
    own = core.load_folder(folder)
    reference = load_reference(folder, "gpt2")
    pair = ("money bank grows", "river bank flows")
    word = context.shared_piece(*(own.run(text).tokens for text in pair), "bank")
    through = qkv.shared_word_through_heads(own, *pair, word)
    attention = _layer_modules(reference)[0].get_submodule("attn")
    seen: list[torch.Tensor] = []  # (1, n, d_model) per sentence: ln_1's output
    handle = attention.register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append(args[0] if args else kwargs["hidden_states"]),
        with_kwargs=True,
    )
    for text in pair:
        with torch.inference_mode():
            reference(input_ids=torch.tensor(np.array([own.run(text).input_ids])))
    handle.remove()
    rows = [x[0].double().numpy() for x in seen]
    cosine_input, here = _formula_on_rows(rows, (through.index_a, through.index_b))
    assert through.index_a != through.index_b  # the case this test reads
    at = run_on(folder, "views/qkv.py", state={"qkv_section": "7 · Payoff"})
    assert_no_exception(at)
    _assert_formula_paragraph(" ".join(shown(m.value) for m in at.markdown), cosine_input, here)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_trained_head_reads_what_its_layer_reads_in_a_pre_norm_model(
    tmp_path, family, local_folders
):
    """Page 2's "trained head" on a pre-norm decoder: X is the layer's input after its first
    norm, as transformers' own layer has it (GPT-2's ln_1, Llama's input RMSNorm), so on GPT-2
    (no rotary turn) the head's weights are the model's own, cell for cell; the page says which
    norm, and states biases and shared key/value heads only as the checkpoint has them."""
    from tiny_families import load_reference, write_tiny_family

    from ui import qkv_runs

    folder = write_tiny_family(tmp_path / family, family, seed=5)
    model = core.load_folder(folder)
    trace = model.run("the river bank flows past the old mill")
    layer, head = 1, 2
    reference = load_reference(folder, family)
    ids = torch.tensor([list(trace.input_ids)])
    with torch.no_grad():
        out = reference(ids, output_hidden_states=True, output_attentions=True)
        blocks = reference.transformer.h if family == "gpt2" else reference.model.layers
        first_norm = blocks[layer].ln_1 if family == "gpt2" else blocks[layer].input_layernorm
        read = first_norm(out.hidden_states[layer])[0].numpy()  # (n, d_model)
    one_head = qkv_runs.trained_head(model, trace, layer, head, scale=True, causal=True)
    np.testing.assert_allclose(one_head.x, read, atol=1e-5)
    if family == "gpt2":  # learned positions: nothing turns q and k inside attention
        np.testing.assert_allclose(
            one_head.result.attn_weights, out.attentions[layer][0, head].numpy(), atol=1e-5
        )
    at = run_page(QKV, text="the river bank flows past the old mill", folder=folder)
    at.radio(key="qkv_source").set_value("trained head").run()
    assert_no_exception(at)
    text = " ".join(m.value for m in [*at.markdown, *at.caption])
    norm = "LayerNorm" if family == "gpt2" else "RMSNorm"
    assert "causal mask on" in text  # the decoder is the model on the page
    # Step 1's one-vector count is taken under the same mask, and its formula says so
    open_tab(at, "qkv_section", "1 · Projections")
    assert "softmax(X Xᵀ + M), with the causal mask M of the head below," in " ".join(
        m.value for m in at.markdown
    )
    assert f"(the layer's input after its first {norm})" in text
    assert ("with their biases" in text) == (family == "gpt2")  # Llama's config: no bias
    # tiny Llama: 4 query heads share 2 key/value heads; GPT-2 has one per query head
    assert ("key/value head 0's, which query heads 0 and 1 share" in text) == (family == "llama")
    if family == "llama":  # rotary: the page's weights leave the turns out, and say how much
        page_layer, page_head = at.slider(key="layer").value, at.slider(key="head").value
        with torch.no_grad():
            attention = blocks[page_layer].self_attn
            x = first_norm_of(blocks[page_layer])(out.hidden_states[page_layer])[0].numpy()
        d_head = attention.head_dim
        group = model.n_heads // reference.config.num_key_value_heads
        w_query = attention.q_proj.weight.detach().numpy()[
            page_head * d_head : (page_head + 1) * d_head
        ]
        kv = page_head // group
        w_key = attention.k_proj.weight.detach().numpy()[kv * d_head : (kv + 1) * d_head]
        scores = (x @ w_query.T) @ (x @ w_key.T).T / np.sqrt(d_head)  # (n, n), no rotary turn
        n = len(x)
        scores[np.triu(np.ones((n, n), dtype=bool), k=1)] = -np.inf
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        own = out.attentions[page_layer][0, page_head].numpy()

        def tops(w: np.ndarray) -> np.ndarray:  # (n, n) the keys within 1e-6 of a row's largest
            return w >= w.max(axis=1, keepdims=True) - 1e-6

        moved = int((~(tops(weights) & tops(own)).any(axis=1)).sum())  # no top key in common
        assert 0 < moved < n  # this tiny Llama: some rows, not all, move their largest weight
        assert f"In {moved} of {n} rows the largest weight sits on another key" in text


def first_norm_of(block):
    """A Llama decoder layer's first norm (transformers' name for it)."""
    return block.input_layernorm
