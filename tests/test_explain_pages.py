"""The two explanation pages, run headless (AppTest), and their figures read as data."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import (
    BAD_INPUTS,
    ROOT,
    answer_open_questions,
    assert_each_tab_draws,
    assert_no_exception,
    drawn_figures,
    each_tab,
    open_tab,
    page_paths,
    run_page,
)
from shown import bar_series, html_figures, model_view_tiles, shown
from shown import sent_array as array
from test_html_heatmap import viridis

from core import explanations, information_flow, saliency, similarity, words
from ui import (
    explanations_charts,
    explanations_runs,
)

FLOW = "views/information_flow.py"
EXPLANATIONS = "views/explanations.py"
PAIR = ("Time flies like an arrow.", "Fruit flies like a banana.")


def chart_specs(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def titles(at) -> list[str]:
    """The titles of the page's figures: plotly's as sent, then the HTML figures' as read."""
    plotly_titles = [spec["layout"].get("title", {}).get("text", "") for spec in chart_specs(at)]
    return plotly_titles + [figure["title"] for figure in html_figures(at).values()]


def test_flow_page_shows_the_similarity_of_the_pair(model):
    at = run_page(FLOW, text=PAIR[0], pair=PAIR[1])
    assert_no_exception(at)
    expected = similarity.sentence_similarity(model.run(PAIR[0]), model.run(PAIR[1]))
    assert float(at.metric[0].value) == pytest.approx(expected, abs=1e-4)
    assert not at.metric[0].delta  # default switches: nothing to compare with
    flow_tab = titles(open_tab(at, "ex_section", "3 · Flow"))
    assert "Attention flow to the top layer, each row ÷ its sum" in flow_tab
    # one bar per hidden state, the last one the final embeddings' cosine (three decimals)
    layers = html_figures(at)["ex_pair_layers"]
    assert layers["title"] == "cos(A, B) of the mean-pooled states"
    assert layers["rows"] == ["embedding output"] + [f"after layer {k}" for k in range(6)]
    assert bar_series(layers)["cos(A, B)"][-1] == pytest.approx(expected, abs=5e-4)
    # scaling off: the similarity moves and the page says by how much
    at.toggle(key="scale").set_value(False).run()
    assert_no_exception(at)
    unscaled = similarity.sentence_similarity(
        model.run(PAIR[0], scale=False), model.run(PAIR[1], scale=False)
    )
    assert float(at.metric[0].value) == pytest.approx(unscaled, abs=1e-4)
    assert "against the model as trained" in at.metric[0].delta


# Every figure of the information-flow page, by the tab that draws it (views/information_flow.py,
# SECTIONS), with a pair in the sidebar: section 1's similarity by layer, above the tabs, on all.
FLOW_FIGURES = {
    "2 · Rollout": {"ex_pair_layers", "ex_rollout", "ex_bars"},
    "3 · Flow": {"ex_pair_layers", "ex_flow"},
    "4 · Norms": {"ex_pair_layers", "ex_norm"},
    "5 · Lens": {"ex_pair_layers", "ex_lens", "ex_settle"},
}


def test_flow_page_draws_one_tab_at_a_time():
    at = run_page(FLOW, text=PAIR[0], pair=PAIR[1])
    assert_no_exception(at)
    assert_each_tab_draws(at, FLOW, FLOW_FIGURES)
    # the sentence picked above the tabs reaches them: the second one, on tab 5's lens heatmap
    at.radio(key="ex_sentence").set_value("second").run()
    assert_no_exception(at)
    lens = next(chart.proto.spec for chart in at.get("plotly_chart") if chart.key == "ex_lens")
    assert "banana" in lens and "arrow" not in lens


def test_flow_page_example_pair_and_layer_slider(model):
    at = run_page(FLOW, text="A single sentence.")
    assert_no_exception(at)
    # without a pair, section 1 opens on the example pair chosen above it, computed live
    for index in (0, 1):
        at.selectbox(key="ex_pair").set_value(index).run()
        _, first, second = similarity.EXAMPLE_PAIRS[index]
        expected = similarity.sentence_similarity(model.run(first), model.run(second))
        assert at.metric[0].label == "Cosine similarity of the example pair"
        assert float(at.metric[0].value) == pytest.approx(expected, abs=1e-4)
        layers = bar_series(html_figures(at)["ex_pair_layers"])["cos(A, B)"]
        assert layers[-1] == pytest.approx(expected, abs=5e-4)
        captions = [c for c in at.caption if not c.value.startswith("Set in the sidebar")]
        assert any(first in shown(caption.value) for caption in captions[:1])
    at.button(key="ex_use_pair").click().run()
    assert_no_exception(at)
    assert at.session_state["pair"] == similarity.EXAMPLE_PAIRS[1][2]
    at.slider(key="ex_layer").set_value(2).run()  # inside tab 2, and tab 4 keeps its place
    # a new layer asks the rollout question anew: answered, its figure is drawn
    rollout_tab = answer_open_questions(open_tab(at, "ex_section", "2 · Rollout"))
    assert "Attention rollout after layer 2" in titles(rollout_tab)
    assert "Norm rollout after layer 2" in titles(open_tab(at, "ex_section", "4 · Norms"))


def test_word_level_switch_merges_pieces_and_off_changes_nothing():
    text = "Tokenization of embeddings."
    at = run_page(FLOW, text=text)  # no pair: the rollout tab's heatmap and bars, both HTML
    pieces_bars = html_figures(at)["ex_bars"]
    at.toggle(key="words").set_value(True).run()
    assert_no_exception(at)
    word_bars = html_figures(at)["ex_bars"]
    assert len(word_bars["rows"]) < len(pieces_bars["rows"])
    assert "embeddings" in word_bars["rows"] and "embeddings" not in pieces_bars["rows"]
    # the merged shares still sum to 1 per method (sums over a word's pieces, two decimals each)
    for values in bar_series(word_bars).values():
        assert values.sum() == pytest.approx(1.0, abs=0.005 * len(values))
    at.toggle(key="words").set_value(False).run()
    assert html_figures(at)["ex_bars"] == pieces_bars


def test_flow_page_draws_a_long_sentence_as_an_image_and_plotly_bars():
    """Past display_policy.NUMBERS_UP_TO the rollout is one image whose readout numbers are
    rollout's rows (each sums to 1); past display_policy.BARS_UP_TO the shares are plotly's
    grouped bars, whose arrays the shares sum to 1 in."""
    text = " ".join(["The river bank was quiet after the storm."] * 4)  # 38 word pieces
    at = run_page(FLOW, text=text)
    assert_no_exception(at)
    rollout = html_figures(at)["ex_rollout"]
    assert rollout["image"] and len(rollout["rows"]) == 38
    rows = np.asarray(rollout["numbers"]).reshape(38, 38)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=38 * 5e-5)  # 4 significant digits
    assert {chart.key for chart in at.get("plotly_chart")} == {"ex_bars"}
    bars = next(
        spec for spec in chart_specs(at) if spec["layout"]["title"]["text"].startswith("Each")
    )
    for bar in bars["data"]:
        assert array(bar["y"]).sum() == pytest.approx(1.0, abs=1e-3)


def test_explanations_page_every_method_agreement_and_deletion(model):
    at = run_page(EXPLANATIONS, text=PAIR[0], pair=PAIR[1])
    assert_no_exception(at)
    specs = chart_specs(at)  # the deletion curves; the two grids are HTML
    grids = html_figures(at)
    methods = grids["xp_methods"]["rows"]
    assert methods == [
        "last-layer attention",
        "attention rollout",
        "attention flow",
        "norm rollout",
        "gradient × input",
        "integrated gradients",
    ]
    # each method's row is scaled to its largest |score|: a ±1.00 in every row, none beyond
    scaled = np.asarray(grids["xp_methods"]["numbers"]).reshape(len(methods), -1)
    np.testing.assert_allclose(np.abs(scaled).max(axis=1), 1.0)
    rho = np.asarray(grids["xp_rho"]["numbers"]).reshape(len(methods), len(methods))
    np.testing.assert_allclose(np.diag(rho), 1.0)
    np.testing.assert_allclose(rho, rho.T)
    (deletion_spec,) = specs
    deletion = {trace["name"]: array(trace["y"]) for trace in deletion_spec["data"]}
    methods_drawn = {name: y for name, y in deletion.items() if "random" not in name}
    assert list(methods_drawn) == methods
    starts = {round(values[0], 4) for values in deletion.values()}
    assert len(starts) == 1, "k = 0 is the same sentence for every method and random order"
    # the grey band: the lowest and highest of ten seeded random orders, and their mean
    trace = model.run(PAIR[0])
    target = saliency.similarity_target(model.run(PAIR[1]))
    allowed = saliency.removable(trace.tokens)
    k_max = len(methods_drawn["integrated gradients"]) - 1
    randoms = {str(seed): saliency.random_ranking(allowed, seed) for seed in range(10)}
    chance = np.stack(list(saliency.deletion_curves(model, trace, target, randoms, k_max).values()))
    np.testing.assert_allclose(deletion["random highest"], chance.max(axis=0), atol=2e-5)
    np.testing.assert_allclose(
        deletion["10 random orders: lowest to highest"], chance.min(axis=0), atol=2e-5
    )
    np.testing.assert_allclose(
        deletion["mean of the 10 random orders"], chance.mean(axis=0), atol=2e-5
    )
    texts = " ".join(m.value for m in [*at.markdown, *at.caption])
    assert "Jain & Wallace (2019)" in texts and "Wiegreffe & Pinter (2019)" in texts
    assert "BiLSTM" in texts and "10 seeded random orders" in texts
    assert "DeYoung et al., 2020" in texts and "Hooker et al. (2019), evaluating image" in texts
    assert "gradient-based and leave-one-out importance" in texts
    assert "GlobEnc (Modarressi et al., 2022)" in texts and "ALTI (Ferrando et al., 2022)" in texts
    for wrong in ("which one is right", "should beat it", "the most faithful method"):
        assert wrong not in texts
    assert "Gradient × input is local" in texts and "f(input) − f(all zero)" in texts
    # the lesson's verdict follows the band: the fastest method against every random order
    methods_changes = {name: float(np.mean(y[1:] - y[0])) for name, y in methods_drawn.items()}
    random_changes = (chance[:, 1:] - chance[:, :1]).mean(axis=1)
    fastest = min(methods_changes, key=methods_changes.get)
    beaten = int(np.sum(methods_changes[fastest] < random_changes - 5e-4))
    if methods_changes[fastest] < 0 and beaten == 10:
        assert "faster than every one of the 10 random orders" in texts
    else:
        assert "faster than every one" not in texts
    at.radio(key="xp_target").set_value("embedding").run()
    assert_no_exception(at)
    (embedding_spec,) = chart_specs(at)
    assert "the full sentence" in embedding_spec["layout"]["title"]["text"]
    # the deletion test measures what the gradients explain: the projection h̄ · ê (the pooled
    # vector's length at k = 0), not a cosine of 1
    pooled = np.asarray(trace.hidden_states[-1], dtype=np.float64).mean(axis=0)
    start = array(embedding_spec["data"][-1]["y"])[0]
    assert start == pytest.approx(np.linalg.norm(pooled), abs=1e-3) and start > 1.5


def test_explanations_band_shrinks_to_the_budget_at_long_sentences():

    assert explanations_runs.random_orders_for(40, 6) == 10
    assert explanations_runs.random_orders_for(128, 6) == explanations_runs.MIN_RANDOM_ORDERS
    for n in range(8, explanations_runs.MAX_GRADIENT_PIECES + 1):
        orders = explanations_runs.random_orders_for(n, 6)
        assert orders == 10 or n * (6 + orders) <= explanations_runs.DELETION_WORK or orders == 3


def test_flow_page_sets_its_own_numbers_beside_abnar_and_zuidema(model):
    text = "The bank raised its interest rates again."
    at = open_tab(run_page(FLOW, text=text), "ex_section", "3 · Flow")
    assert_no_exception(at)
    (table,) = at.dataframe
    shown_rho = table.value.set_index("method")
    trace = model.run(text)
    flow = information_flow.information_flow(model, trace)
    target = saliency.embedding_target(trace)
    allowed = saliency.removable(trace.tokens)
    from scipy.stats import spearmanr

    removal = saliency.leave_one_out(model, trace, target)
    ig, _, _ = saliency.integrated_gradients(model, trace, target, saliency.IG_STEPS)
    wins = comparisons = 0
    for column, reference in (
        ("ρ, removal", removal),
        ("ρ, IG", ig),
    ):
        rho = {}
        for name in ("attention", "rollout", "flow"):
            values = flow.scores()[name]
            rho[name] = spearmanr(values[allowed], reference[allowed]).statistic
            label = explanations.METHOD_LABELS[name]
            assert shown_rho.loc[label, column] == pytest.approx(rho[name], abs=0.006), label
        for rolled in ("rollout", "flow"):
            comparisons += 1
            wins += rho[rolled] > rho["attention"]
    texts = " ".join(m.value for m in at.markdown)
    assert "Abnar & Zuidema (2020) found" in texts
    if wins == comparisons:
        assert "agrees with the paper" in texts
    elif wins == 0:
        assert "goes the other way from the paper" in texts
    else:
        assert f"in {wins} of {comparisons} comparisons" in texts
    bits, even = information_flow.share_entropy(flow.scores()["flow"])
    assert f"{bits:.2f} bits of the {even:.2f}" in texts


def test_lens_calls_the_nearest_rows_a_heuristic_and_counts_them(model):
    text = "Two bears crossed the road."
    at = open_tab(run_page(FLOW, text=text), "ex_section", "5 · Lens")
    assert_no_exception(at)
    captions = " ".join(c.value for c in at.caption)
    assert "heuristic" in captions and "has no such head" in captions
    assert "reuses the input word-piece table, so" not in captions
    (table,) = at.dataframe
    first = [row.split(", ")[0] for row in table.value["nearest word pieces"]]
    piece = model.run(text).tokens[1]  # the token picker starts at position 1
    stays = sum(nearest == piece for nearest in first)
    if stays == len(first):
        assert "its own nearest row at every state" in captions
    else:
        assert f"its own nearest row at {stays} of the {len(first)} states" in captions


@pytest.mark.parametrize("page", [FLOW, EXPLANATIONS, "views/embeddings.py"])
def test_switched_off_scale_or_causal_mask_is_called_off_distribution(page):
    at = run_page(page, text="The bank raised its rates.")
    assert_no_exception(at)
    assert not any("never saw this in training" in w.value for w in at.warning)
    for key, value in (("scale", False), ("causal", True)):
        at.toggle(key=key).set_value(value).run()
        assert_no_exception(at)
        warning = " ".join(w.value for w in at.warning)
        assert "never saw this in training" in warning, (page, key)
    assert "√d_k scaling is off and the causal mask is on" in warning


@pytest.mark.parametrize("page", [FLOW, EXPLANATIONS])
@pytest.mark.parametrize("bad", ["empty", "control", "html", "emoji_cjk_rtl"])
def test_pages_with_bad_input(page, bad):
    at = run_page(page, text=BAD_INPUTS[bad], pair=BAD_INPUTS[bad] if bad == "html" else None)
    assert_no_exception(at)
    specs, texts = [], []
    for opened in each_tab(at, page):  # a page in tabs: every tab's figures and prose
        assert_no_exception(opened)
        specs += chart_specs(opened)
        texts += [m.value for m in [*opened.markdown, *opened.caption]]
    spec_text = json.dumps(specs)
    assert "<script>" not in spec_text and "&#38;#" not in spec_text
    assert "<script>" not in " ".join(texts)
    if bad in ("empty", "control"):
        assert at.info, "an unreadable input gets a message"


@pytest.mark.parametrize("page", [FLOW, EXPLANATIONS])
def test_an_unreadable_pair_is_left_out_and_an_unreadable_sentence_stops(page):
    at = run_page(page, text="A readable sentence.", pair=BAD_INPUTS["control"])
    assert_no_exception(at)
    assert drawn_figures(at)
    at = run_page(page, text=BAD_INPUTS["control"], pair="A readable sentence.")
    assert_no_exception(at)
    assert at.info and not drawn_figures(at)


def test_pages_at_512_word_pieces_say_what_they_leave_out():
    """Flow and Explanations at the 512-piece cap run without an exception and say what they
    leave out (this is also test_app.py's very-long-text run of Explanations: RUN_ELSEWHERE)."""
    text = " ".join(["The river bank was quiet after the storm."] * 80)
    flow = run_page(FLOW, text=text, query={"ex_section": "3 · Flow"})
    assert_no_exception(flow)
    assert any("Flow is computed up to 40 word pieces" in i.value for i in flow.info)
    assert "Attention rollout after layer 5" in titles(open_tab(flow, "ex_section", "2 · Rollout"))
    explanations = run_page(EXPLANATIONS, text=text)
    assert_no_exception(explanations)
    assert any("Left out at 512 word pieces" in i.value for i in explanations.info)
    # 512 pieces x 8 steps is the request's budget of 4,096 (explanations_runs.GRADIENT_WORK)
    assert any(
        "integrated gradients runs 8 of the 32 steps asked" in c.value for c in explanations.caption
    )
    for at in (flow, explanations):
        payload = sum(len(chart.proto.spec) for chart in at.get("plotly_chart"))
        assert payload < 20e6, f"{payload / 1e6:.1f} MB of figures"


def test_methods_heatmap_scales_each_row_and_escapes_tokens():
    matrix = np.array([[0.5, 0.25, 0.25], [-2.0, 1.0, 0.0]])
    fig = explanations_charts.methods_heatmap(
        matrix, ["a", "b"], ["[CLS]", "<b>x</b>", "[SEP]"], "t"
    )
    z = np.array(fig.data[0].z)
    np.testing.assert_allclose(z, [[1.0, 0.5, 0.5], [-1.0, 0.5, 0.0]])
    assert [shown(t) for t in fig.layout.xaxis.ticktext] == ["[CLS]", "<b>x</b>", "[SEP]"]


def test_methods_grid_scales_each_row_and_writes_tokens_as_text():
    """The HTML picture of the same matrix: the same numbers, hostile tokens as text; an image
    past 12 pieces, whose readout holds the scaled scores."""
    from shown import html_figures_of

    tokens = ["[CLS]", "<b>x</b>", "[SEP]"]
    matrix = np.array([[0.5, 0.25, 0.25], [-2.0, 1.0, 0.0]])
    grid = html_figures_of(
        explanations_charts.methods_grid(matrix, ["a", "b"], tokens, "t", "w", "m")
    )
    assert grid["m"]["columns"] == tokens and grid["m"]["rows"] == ["a", "b"]
    np.testing.assert_allclose(grid["m"]["numbers"], [1.0, 0.5, 0.5, -1.0, 0.5, 0.0])
    wide = np.tile(matrix, 7)  # (2, 21): one image
    image = html_figures_of(
        explanations_charts.methods_grid(wide, ["a", "b"], tokens * 7, "t", "w", "m")
    )
    assert image["m"]["image"]
    np.testing.assert_allclose(
        image["m"]["numbers"], np.tile([[1, 0.5, 0.5], [-1, 0.5, 0]], 7).ravel()
    )


def test_agreement_grid_writes_every_rho_and_says_why_one_is_missing():
    rho = np.array([[1.0, -0.25, np.nan], [-0.25, 1.0, np.nan], [np.nan, np.nan, np.nan]])
    html = explanations_charts.agreement_grid(rho, ["a", "b", "flat"], "ρ", "r")
    from shown import html_figures_of

    numbers = html_figures_of(html)["r"]["numbers"]
    np.testing.assert_allclose(numbers[:2], [1.0, -0.25])
    assert np.isnan(numbers[2])
    assert 'title="a · flat: no ranking: every score alike"' in html


def test_word_view_off_is_the_identity():
    tokens = ("[CLS]", "token", "##ization", "[SEP]")
    groups = words.word_groups(tokens)
    assert len(groups) == 3
    from ui.word_level import WordView

    matrix = np.arange(16.0).reshape(4, 4)
    off = WordView(tokens, False)
    assert off.matrix(matrix) is matrix and off.labels == list(tokens)
    on = WordView(tokens, True)
    assert on.labels == ["[CLS]", "tokenization", "[SEP]"] and on.matrix(matrix).shape == (3, 3)


def up_close(at) -> dict:
    """The heatmaps page's one-head heatmap (HTML, the Overview's figure) as read."""
    return html_figures(at)["hm_heatmap"]


def test_heatmaps_word_level_merges_and_off_is_unchanged(model):
    text = "Tokenization of embeddings."
    at = run_page("views/heatmaps.py", text=text)
    before = up_close(at)
    at.toggle(key="words").set_value(True).run()
    assert_no_exception(at)
    merged = up_close(at)
    assert merged["note"] == "between words"
    trace = model.run(text)
    groups = words.word_groups(trace.tokens)
    assert len(merged["rows"]) == len(groups) < trace.n_tokens
    assert merged["rows"] == [
        "".join(trace.tokens[k].removeprefix("##") for k in group) for group in groups
    ]
    drawn = np.reshape(merged["numbers"], (len(groups), len(groups)))
    expected = words.merge_attention(np.asarray(trace.attentions[0, 0], dtype=float), groups)
    np.testing.assert_allclose(drawn, expected, atol=0.0051)  # the cells print 2 decimals
    at.toggle(key="words").set_value(False).run()
    assert up_close(at) == before


def merged_by_loops(matrix: np.ndarray, groups) -> np.ndarray:
    """(n, n) -> (w, w) written out: a word's column sums its pieces, its row averages them."""
    merged = np.zeros((len(groups), len(groups)))
    for a, rows in enumerate(groups):
        for b, cols in enumerate(groups):
            merged[a, b] = sum(matrix[q, k] for q in rows for k in cols) / len(rows)
    return merged


def test_heatmaps_word_level_reaches_the_grid_and_the_statistics(model):
    """One sidebar switch: the model-view grid and the per-head statistics merge words too."""
    text = "Tokenization of embeddings."
    at = run_page("views/heatmaps.py", text=text)
    at.toggle(key="words").set_value(True).run()
    assert_no_exception(at)
    trace = model.run(text)
    groups = words.word_groups(trace.tokens)
    w = len(groups)
    attentions = np.asarray(trace.attentions, dtype=float)
    grid = next(e.proto.body for e in at.get("html") if 'data-figure="hm_grid"' in e.proto.body)
    assert "between words" in grid
    tiles = model_view_tiles(grid)  # each head's image, painted on one scale
    merged = np.array(
        [[merged_by_loops(attentions[lyr, hd], groups) for hd in range(12)] for lyr in range(6)]
    )
    zmax = float(np.round(merged, 3).max())
    for layer, head in [(0, 0), (2, 7), (5, 11)]:
        assert tiles[layer, head]["pixels"].shape == (w, w, 3)
        expected = viridis(np.round(merged[layer, head], 3), zmax)
        np.testing.assert_allclose(tiles[layer, head]["pixels"], expected, atol=2)
    # entropy per head: the mean over word rows of -Σ p log2 p, computed here from the merge
    stats = next(
        s for s in chart_specs(at) if s["layout"]["title"]["text"].startswith("Mean row entropy")
    )
    shown_entropy = array(stats["data"][0]["z"])
    for layer, head in [(0, 0), (3, 4)]:
        rows = merged_by_loops(attentions[layer, head], groups)
        bits = [-sum(p * np.log2(p) for p in row if p > 0) for row in rows]
        assert shown_entropy[layer, head] == pytest.approx(np.mean(bits), abs=2e-3)
    at.toggle(key="words").set_value(False).run()
    pieces = next(e.proto.body for e in at.get("html") if 'data-figure="hm_grid"' in e.proto.body)
    n = trace.n_tokens
    assert model_view_tiles(pieces)[0, 0]["pixels"].shape == (n, n, 3)  # pieces again


def test_word_level_switch_is_shared_and_greyed_out_where_unused():
    """app.py greys the sidebar switch out on pages that draw no word pieces; it keeps its value."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["words"] = "true"
    at.run()
    assert_no_exception(at)
    switch = at.toggle(key="words")
    assert switch.value is True and switch.disabled  # the Overview draws no word-level figure
    at.switch_page("views/heatmaps.py").run()
    assert_no_exception(at)
    switch = at.toggle(key="words")
    assert switch.value is True and not switch.disabled


def test_layer_switches_are_greyed_out_where_a_page_has_its_own():
    """The Lab has its own √d and causal-mask toggles: the sidebar's two are greyed out there,
    with their values kept for the next page."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["causal"] = "true"
    at.run()
    assert not at.toggle(key="causal").disabled and at.toggle(key="causal").value is True
    for page in ("views/lab.py", "views/scaling_masking.py", "views/by_hand.py"):
        at.switch_page(page).run()
        assert_no_exception(at)
        for key in ("scale", "causal"):
            assert at.toggle(key=key).disabled, (page, key)
        assert at.toggle(key="causal").value is True
        assert any("Not used on this page" in c.value for c in at.sidebar.caption), page
    at.switch_page("views/heatmaps.py").run()
    assert not at.toggle(key="causal").disabled and at.toggle(key="causal").value is True


def test_sentence_boxes_are_greyed_out_exactly_where_a_page_has_its_own():
    """A page that never reads the sidebar's sentences (no trace_or_stop, no inputs.text or
    inputs.pair in its source) greys both boxes out with a line saying why; they keep the text
    for the next page, and every other page leaves them open and repeats the sentence box in
    the page for phones."""
    from streamlit.testing.v1 import AppTest

    text = "The river bank was muddy."
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["text"] = text
    at.run()
    for page in page_paths():
        source = (ROOT / page).read_text()
        reads = any(word in source for word in ("trace_or_stop(", "inputs.text", "inputs.pair"))
        at.switch_page(page).run()
        assert_no_exception(at)
        boxes = (at.sidebar.text_area(key="text"), at.sidebar.text_input(key="pair"))
        assert [box.disabled for box in boxes] == [not reads] * 2, page
        assert boxes[0].value == text, page
        note = any("it has its own sentences" in c.value for c in at.sidebar.caption)
        assert note == (not reads), page
        # the phone's copy of the box, at the top of the page, exactly where the sidebar's is read
        in_page = [box for box in at.main.text_area if box.key.startswith("text_in_page")]
        assert [box.value for box in in_page] == ([text] if reads else []), page


def test_head_view_word_level_draws_words_and_off_is_unchanged():
    at = run_page("views/head_view.py", text="Tokenization of embeddings.", pair="Fine tuning.")
    before = chart_specs(at)[0]
    at.toggle(key="words").set_value(True).run()
    assert_no_exception(at)
    labels = next(s for s in chart_specs(at)[0]["data"] if s.get("mode") == "markers+text")
    drawn = [shown(t) for t in labels["text"]]
    assert "tokenization" in drawn and "embeddings" in drawn and "##ization" not in drawn
    at.toggle(key="words").set_value(False).run()
    assert chart_specs(at)[0] == before


def test_with_no_second_sentence_the_greyed_target_shows_the_sentences_own_vector():
    """The gradients can only explain the sentence's own vector then: the greyed choice says so."""
    at = run_page(EXPLANATIONS)
    assert_no_exception(at)
    target = at.radio(key="xp_target")
    assert target.disabled and target.value == "embedding"
