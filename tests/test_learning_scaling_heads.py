"""Pages 3 and 4 of the learning path: scaling, masking, cross-attention, heads and ablation."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
import torch
from conftest import (
    BAD_INPUTS,
    LONG_TEXT,
    answer_open_questions,
    assert_each_tab_draws,
    assert_no_exception,
    drawn_figures,
    each_tab,
    open_tab,
    run_page,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from shown import bar_series, html_figures, sent_array
from torch.nn import functional as F

from core import head_roles, head_stats, multi_head, scaling_masking
from core.transformer import ATTN_WRITE, hook_name
from ui import display_policy, multi_head_charts, scaling_masking_charts

SENTENCE = "The river bank flooded after the storm."
SCALING_PAGE = "views/scaling_masking.py"
HEADS_PAGE = "views/multi_head.py"


@pytest.fixture(scope="module")
def trace(model):
    return model.run(SENTENCE)


# ---- √d_k: variance of random dot products ---------------------------------------------------


@pytest.mark.parametrize("d_k", [4, 32, 256, 1024])
@pytest.mark.parametrize("seed", [0, 1])
def test_scaled_dot_products_have_variance_near_one(d_k, seed):
    products = scaling_masking.random_dot_products(d_k, seed=seed)
    assert products.raw.shape == products.scaled.shape == (256, 256)
    # The sample variance scatters by ~0.06 at d_k = 4 and ~0.01 at d_k = 256 (20 seeds).
    assert 0.8 < products.scaled_variance < 1.2, products.scaled_variance


@pytest.mark.parametrize("d_k", [4, 32, 256, 1024])
def test_unscaled_dot_products_have_variance_near_d_k(d_k):
    products = scaling_masking.random_dot_products(d_k)
    assert 0.8 < products.raw_variance / d_k < 1.2, products.raw_variance
    np.testing.assert_allclose(products.scaled, products.raw / np.sqrt(d_k), rtol=1e-12)


def test_unscaled_softmax_rows_lose_entropy_as_d_k_grows():
    entropy = {d: scaling_masking.random_dot_products(d).raw_entropy for d in (4, 32, 256)}
    assert entropy[4] > entropy[32] > entropy[256]
    assert entropy[256] < 1.0  # nearly one-hot: a 256-key row could hold 8 bits
    for d in (4, 32, 256):  # scaled rows keep most of the 8 bits at every width
        assert scaling_masking.random_dot_products(d).scaled_entropy > 7.0


# ---- softmax saturation and entropy ------------------------------------------------------------

distinct_scores = st.lists(
    st.integers(min_value=-30, max_value=30), min_size=2, max_size=16, unique=True
).map(lambda values: np.array(values, dtype=np.float64) / 10)  # gaps of at least 0.1


@given(distinct_scores)
@settings(max_examples=60, deadline=None)
def test_saturation_goes_one_hot_as_the_multiplier_grows(scores):
    weights = scaling_masking.saturation(scores, scaling_masking.MULTIPLIERS)  # (m, n)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-12)
    largest = weights.max(axis=1)
    assert np.all(np.diff(largest) >= -1e-12), "the top weight never shrinks as c grows"
    assert np.all(weights.argmax(axis=1) == scores.argmax()), "the ranking never changes"
    assert largest[-1] > 0.99  # c = 100 with a gap ≥ 0.1: at most 15·e^{-10} elsewhere
    entropy = head_stats.row_entropy(weights)
    assert entropy[-1] < 0.02 and entropy[0] > entropy[-1]


@given(
    st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=40).filter(
        lambda values: sum(values) > 1e-6
    )
)
@settings(max_examples=60, deadline=None)
def test_row_entropy_lies_between_zero_and_log_n(values):
    weights = np.array(values) / np.sum(values)
    entropy = float(head_stats.row_entropy(weights))
    assert -1e-12 <= entropy <= np.log2(len(values)) + 1e-9


def test_row_entropy_limits():
    assert head_stats.row_entropy(np.full(8, 1 / 8)) == pytest.approx(3.0)
    assert head_stats.row_entropy(np.eye(5)).tolist() == [0.0] * 5
    assert head_stats.row_entropy(np.zeros(4)) == 0.0  # a row that could see nothing


# ---- the causal mask on a real head -------------------------------------------------------------


def test_causal_view_masks_the_future_exactly(trace):
    masked_scores, attn_weights = scaling_masking.causal_view(trace, layer=2, head=5)
    n = trace.n_tokens
    above = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert np.isneginf(masked_scores[above]).all()
    assert np.isfinite(masked_scores[~above]).all()
    assert (attn_weights[above] == 0).all()
    np.testing.assert_allclose(attn_weights.sum(axis=1), 1.0, atol=1e-6)
    # On and below the diagonal: q_i · k_j / √d_head, summed term by term from the stored vectors.
    q, k = trace.queries[2, 5].astype(np.float64), trace.keys[2, 5].astype(np.float64)
    for i in range(n):
        for j in range(i + 1):
            dot = sum(q[i, c] * k[j, c] for c in range(q.shape[1]))
            assert masked_scores[i, j] == pytest.approx(dot / np.sqrt(q.shape[1]), abs=1e-4)
    assert attn_weights[0, 0] == pytest.approx(1.0)  # the first token can only see itself


def test_causal_corner_is_exact(trace):
    full_scores, full_weights = scaling_masking.causal_view(trace, 1, 3)
    corner_scores, corner_weights = scaling_masking.causal_view(trace, 1, 3, max_tokens=4)
    assert corner_weights.shape == (4, 4)
    np.testing.assert_array_equal(corner_scores, full_scores[:4, :4])
    np.testing.assert_allclose(corner_weights, full_weights[:4, :4], atol=1e-7)


def test_masked_scores_figure_sends_no_infinity(trace):
    masked_scores, _ = scaling_masking.causal_view(trace, 0, 0)
    fig = scaling_masking_charts.masked_scores_heatmap(masked_scores, trace.tokens, "masked")
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert np.isnan(z[np.isneginf(masked_scores)]).all()
    assert "Infinity" not in pio.to_json(fig)
    assert list(fig.data[0].text[0][1:]) == ["−∞"] * (trace.n_tokens - 1)


# ---- comparing runs -----------------------------------------------------------------------------


def test_compare_runs(model, trace):
    same = scaling_masking.compare_runs(trace, trace, 3, 1)
    np.testing.assert_allclose(same.final_cosine, 1.0, atol=1e-6)
    np.testing.assert_array_equal(same.default_entropy, same.variant_entropy)

    summary = scaling_masking.summarize_cosines(np.array([0.9, 0.2, 0.7]))
    assert (summary.most_moved, summary.lowest) == (1, 0.2)
    assert summary.mean == pytest.approx(0.6)

    unscaled = scaling_masking.compare_runs(trace, model.run(SENTENCE, scale=False), 3, 1)
    assert unscaled.final_cosine.shape == (trace.n_tokens,)
    assert unscaled.final_cosine.min() < 0.99  # removing √d_k in every layer moves the vectors
    # Larger scores give sharper rows: mean entropy drops in the unscaled run.
    assert unscaled.variant_entropy.mean() < unscaled.default_entropy.mean()

    causal = scaling_masking.compare_runs(trace, model.run(SENTENCE, causal=True), 0, 0)
    # Row i of a causal head spreads over at most i + 1 keys.
    bound = np.log2(np.arange(1, trace.n_tokens + 1))
    assert np.all(causal.variant_entropy <= bound + 1e-9)


def test_layer_cosines_and_token_check(model, trace):
    cosines = scaling_masking.layer_cosines(trace, model.run(SENTENCE, causal=True))
    assert cosines.shape == (model.n_layers + 1, trace.n_tokens)
    np.testing.assert_allclose(cosines[0], 1.0, atol=1e-6)  # the embeddings ignore the mask
    with pytest.raises(ValueError, match="different word pieces"):
        scaling_masking.final_cosine(trace, model.run("Something else entirely."))


# ---- cross-attention ----------------------------------------------------------------------------


def test_cross_attention_with_itself_is_self_attention(model, trace):
    cross = scaling_masking.cross_attention(model, trace, trace, layer=3)
    np.testing.assert_allclose(cross.attn_weights, trace.attentions[3], atol=1e-6)


def test_cross_attention_shapes_and_rows(model, trace):
    other = model.run("Fruit flies like a banana.")
    cross = scaling_masking.cross_attention(model, trace, other, layer=2)
    n_a, n_b = trace.n_tokens, other.n_tokens
    assert n_a != n_b
    assert cross.attn_weights.shape == (model.n_heads, n_a, n_b)
    assert cross.output.shape == (n_a, model.d_model)
    np.testing.assert_allclose(cross.attn_weights.sum(-1), 1.0, atol=1e-6)


# ---- heads, concatenation, W_O ------------------------------------------------------------------


def _layer_input(trace, layer: int) -> torch.Tensor:
    return torch.from_numpy(np.array(trace.hidden_states[layer]))  # (n, d_model)


def test_concatenation_through_w_o_is_the_attention_output(model, trace):
    layer = 4
    write = hook_name(ATTN_WRITE, layer)
    _, cache = model.run_with_cache(trace.input_ids, trace.segments, names=[write])
    w_o, b_o = multi_head.output_projection(model, layer)
    concatenated = multi_head.concatenated_heads(trace, layer)
    assert concatenated.shape == (trace.n_tokens, model.n_heads * model.d_head)
    # Column block h of the concatenation is head h's output.
    np.testing.assert_array_equal(concatenated[:, 32:64], multi_head.head_outputs(trace, layer)[1])
    np.testing.assert_allclose(concatenated @ w_o.T + b_o, cache[write].numpy(), atol=2e-5)


def test_ablating_every_head_leaves_only_the_bias(model, trace):
    layer = 2
    write = hook_name(ATTN_WRITE, layer)
    every_head = model.options(ablate={(layer, head) for head in range(model.n_heads)})
    _, cache = model.run_with_cache(
        trace.input_ids, trace.segments, names=[write], options=every_head
    )
    _, b_o = multi_head.output_projection(model, layer)
    np.testing.assert_allclose(
        cache[write].numpy(), np.broadcast_to(b_o, (trace.n_tokens, model.d_model)), atol=1e-7
    )


def test_ablating_every_head_of_a_layer_leaves_the_residual_path(model, trace):
    """Hidden states after the layer = the layer computed by hand with attention = b_O."""
    layer = 1
    ablated = model.run(SENTENCE, ablate={(layer, h) for h in range(model.n_heads)})
    np.testing.assert_array_equal(
        ablated.hidden_states[: layer + 1], trace.hidden_states[: layer + 1]
    )
    weights, eps = model.layers[layer], model.dims.layer_norm_eps
    x = _layer_input(trace, layer)  # (n, d_model), identical in both runs
    h = F.layer_norm(x + weights.attention.output.bias, (model.d_model,), *weights.attn_norm, eps)
    ffn = weights.ffn_out(F.gelu(weights.ffn_in(h)))
    expected = F.layer_norm(h + ffn, (model.d_model,), *weights.ffn_norm, eps)
    torch.testing.assert_close(
        torch.from_numpy(np.array(ablated.hidden_states[layer + 1])), expected, atol=1e-5, rtol=0
    )
    # ...and it differs from the full layer, so the check above is not vacuous.
    assert not np.allclose(ablated.hidden_states[layer + 1], trace.hidden_states[layer + 1])


def test_value_weighted_share_and_gap(model, trace):
    layer = 3
    attn_weights = trace.attentions[layer]
    share = multi_head.value_weighted_share(multi_head.value_weighted_norms(model, trace, layer))
    np.testing.assert_allclose(share.sum(-1), 1.0, atol=1e-5)
    # Rows summing to 1 holds by construction; the values must be Kobayashi et al.'s (2020)
    # ‖α_ij v_j W_Oʰ‖ / Σ_k ‖α_ik v_k W_Oʰ‖, with W_Oʰ = the columns of W_O that read head h.
    w_o = model.attention_weights(layer).output.weight.double().numpy()  # (d_model, H·d_head)
    for head in (0, 7):
        cols = slice(head * model.d_head, (head + 1) * model.d_head)
        moved = [np.linalg.norm(w_o[:, cols] @ v) for v in trace.values[layer, head]]  # (n,)
        for i in range(trace.n_tokens):
            norms = [attn_weights[head, i, j] * moved[j] for j in range(trace.n_tokens)]
            np.testing.assert_allclose(share[head, i], np.array(norms) / sum(norms), rtol=1e-4)
    gap = multi_head.raw_vs_weighted_gap(attn_weights, share)
    assert gap.shape == (model.n_heads,) and np.all((gap >= 0) & (gap <= 1))
    assert gap.max() > 0.05  # on real weights the two views do disagree somewhere
    top = multi_head.top_disagreements(attn_weights[0], share[0], k=4)
    sizes = [abs(d.attn_weight - d.weighted_share) for d in top]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] == pytest.approx(np.abs(attn_weights[0] - share[0]).max(), abs=1e-6)


def test_value_weighted_share_of_a_zero_row_is_zero():
    norms = np.array([[0.0, 0.0], [1.0, 3.0]])
    np.testing.assert_array_equal(multi_head.value_weighted_share(norms), [[0, 0], [0.25, 0.75]])


# ---- figures for long inputs --------------------------------------------------------------------


def test_block_average_keeps_the_mean():
    matrix = np.random.default_rng(0).random((300, 300))
    reduced, row_step, col_step = scaling_masking_charts.block_average(matrix, 128)
    assert (row_step, col_step) == (3, 3) and reduced.shape == (100, 100)
    assert reduced.mean() == pytest.approx(matrix.mean())
    same, one, also_one = scaling_masking_charts.block_average(matrix[:50, :50], 128)
    assert one == also_one == 1 and np.array_equal(same, matrix[:50, :50])
    uneven, *steps = scaling_masking_charts.block_average(
        matrix[:130, :130], 64
    )  # 130 = 3·43 + 1: short last block
    assert steps == [3, 3] and uneven.shape == (44, 44) and not np.isnan(uneven).any()
    # A long sentence against a short one: only the long axis is reduced.
    wide, row_step, col_step = scaling_masking_charts.block_average(matrix[:256, :9], 128)
    assert (row_step, col_step) == (2, 1) and wide.shape == (128, 9)
    np.testing.assert_allclose(wide[:, 4], matrix[:256, 4].reshape(128, 2).mean(axis=1))


def test_long_input_figures_stay_small(model):
    long_trace = model.run(LONG_TEXT)
    assert long_trace.n_tokens == 512
    fig = scaling_masking_charts.reduced_heatmap(
        long_trace.attentions[0, 0], long_trace.tokens, long_trace.tokens, "t"
    )
    assert np.asarray(fig.data[0].z).shape == (128, 128)
    assert "4×4 block means" in fig.layout.title.text and fig.data[0].zmax is None
    grid = multi_head_charts.heads_grid(long_trace.attentions[0], long_trace.tokens, 0)
    assert len(grid.data) == model.n_heads
    assert all(
        np.asarray(trace.z).shape[0] <= display_policy.HEADS_GRID_TOKENS for trace in grid.data
    )
    assert len(pio.to_json(grid)) < 400_000


# ---- the pages, headless ------------------------------------------------------------------------


def _texts(at) -> str:
    return json.dumps(
        [e.value for kind in ("markdown", "caption", "info", "warning") for e in at.get(kind)]
    )


# Every figure of the scaling page, by the tab that draws it (views/scaling_masking.py, SECTIONS);
# section 3 opens with √d_k scaling off, compared with the model as trained.
SCALING_COMPARED = {"sm_a", "sm_b", "sm_entropy_rows", "sm_final_cosine"}
SCALING_FIGURES = {
    "1 · Saturation": {
        "sm_saturation_scores",
        "sm_saturation",
        "sm_saturation_curve",
        "sm_saturation_entropy",
    },
    "2 · Why √d_k": {"sm_histograms", "sm_entropy_widths"},
    "3 · Switches": {"sm_score_spread", *SCALING_COMPARED},
    "4 · Causal mask": {"sm_masked_scores", "sm_masked_weights"},
    "5 · Cross-attention": {"sm_cross"},
    "6 · Padding mask": {"sm_pad_on", "sm_pad_off"},
}


def test_scaling_page_draws_one_tab_at_a_time(model):
    at = run_page(SCALING_PAGE, text=SENTENCE)
    assert_no_exception(at)
    assert_each_tab_draws(at, SCALING_PAGE, SCALING_FIGURES)
    open_tab(at, "sm_section", "3 · Switches")
    # the spread of the scaled scores, one HTML bar per layer: Q Kᵀ/√d_head from the encoder's
    # queries and keys, every head of a layer together
    trace = model.run(SENTENCE)
    queries, keys = (a.astype(np.float64) for a in (trace.queries, trace.keys))  # (L, H, n, d)
    scores = np.einsum("lhid,lhjd->lhij", queries, keys) / np.sqrt(model.d_head)  # (L, H, n, n)
    spread = scores.reshape(len(scores), -1).std(axis=1)  # (L,)
    bars = html_figures(at)["sm_score_spread"]
    assert bars["rows"] == [f"layer {layer}" for layer in range(len(spread))]
    np.testing.assert_allclose(bars["numbers"], spread, atol=0.005)
    # it opens on a comparison: scaling off against the model as trained, drawn as HTML (no
    # plotly.js for the tab), the unscaled run as the encoder computes it
    assert at.toggle(key="sm_scale").value is False  # scaling off
    assert drawn_figures(at) == {"sm_score_spread", *SCALING_COMPARED}
    assert not at.get("plotly_chart")
    runs = {"as trained": model.run(SENTENCE), "no scaling": model.run(SENTENCE, scale=False)}
    weights = {name: run.attentions[0, 0].astype(np.float64) for name, run in runs.items()}
    figures = html_figures(at)
    pieces = list(runs["as trained"].tokens)
    for key, name in (("sm_a", "as trained"), ("sm_b", "no scaling")):
        grid = figures[key]  # every weight written in its cell, 2 decimals
        assert grid["kind"] == "ae-heatmap" and grid["title"] == f"L0 H0: {name}"
        assert grid["rows"] == pieces and grid["columns"] == pieces
        np.testing.assert_allclose(grid["numbers"], weights[name].ravel(), atol=0.0051)
    entropy = {  # bits of each query's row, written out
        name: -(w * np.log2(np.where(w > 0, w, 1))).sum(axis=-1) for name, w in weights.items()
    }
    rows = bar_series(figures["sm_entropy_rows"])
    assert list(rows) == ["as trained", "no scaling"]
    assert len(figures["sm_entropy_rows"]["rows"]) == len(pieces)
    for name, bits in entropy.items():
        np.testing.assert_allclose(rows[name], bits, atol=0.005)
    final = {name: run.hidden_states[-1].astype(np.float64) for name, run in runs.items()}
    dots = (final["as trained"] * final["no scaling"]).sum(axis=-1)  # (n,)
    lengths = np.sqrt((final["as trained"] ** 2).sum(-1) * (final["no scaling"] ** 2).sum(-1))
    cosines = bar_series(figures["sm_final_cosine"])["cosine"]
    np.testing.assert_allclose(cosines, dots / lengths, atol=0.0005)
    at.toggle(key="sm_scale").set_value(True).run()  # both as trained: nothing to compare
    assert any("at least one switch" in info.value for info in at.info)
    assert drawn_figures(at) == {"sm_score_spread"}
    at.toggle(key="sm_causal").set_value(True).run()
    assert_no_exception(at)
    assert "causal" in _texts(at)
    open_tab(at, "sm_section", "1 · Saturation")
    at.radio(key="sm_source").set_value("sentence").run()
    assert_no_exception(at)
    at.select_slider(key="sm_multiplier").set_value(100).run()
    assert_no_exception(at)


def _softmax_rows(scaled: np.ndarray) -> np.ndarray:
    """(m, n) -> each row's softmax, written out: e^(x − max) over its sum."""
    exponentials = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    return exponentials / exponentials.sum(axis=-1, keepdims=True)


def _check_saturation_bars(at, scores: np.ndarray, labels: list[str], multiplier: float):
    """Section 1's four HTML figures against softmax(c·s) and its entropy computed here."""
    figures = html_figures(at)
    choices = np.array([0.5, 1, 2, 5, 10, 20, 50, 100], dtype=np.float64)
    # both bar charts list the keys largest score first, so the takeaway's key opens them
    order = sorted(range(len(scores)), key=lambda k: -scores[k])
    assert figures["sm_saturation_scores"]["rows"] == [labels[k] for k in order]
    np.testing.assert_allclose(
        figures["sm_saturation_scores"]["numbers"], np.asarray(scores)[order], atol=0.005
    )
    assert figures["sm_saturation"]["rows"] == [labels[k] for k in order]
    weights = bar_series(figures["sm_saturation"])  # series: ×1 and ×c
    assert list(weights) == ["×1", f"×{multiplier:g}"]
    expected = _softmax_rows(np.outer([1.0, multiplier], scores))[:, order]  # (2, n)
    np.testing.assert_allclose(weights["×1"], expected[0], atol=0.005)
    np.testing.assert_allclose(weights[f"×{multiplier:g}"], expected[1], atol=0.005)
    curve = _softmax_rows(np.outer(choices, scores))  # (8, n)
    entropy = -(curve * np.log2(np.where(curve > 0, curve, 1))).sum(axis=-1)
    largest = figures["sm_saturation_curve"]
    assert largest["rows"] == [f"c = {c:g} ◀" if c == multiplier else f"c = {c:g}" for c in choices]
    np.testing.assert_allclose(largest["numbers"], curve.max(axis=1), atol=0.005)
    np.testing.assert_allclose(figures["sm_saturation_entropy"]["numbers"], entropy, atol=0.005)


def test_saturation_tab_draws_html_bars_with_the_softmax_numbers(model):
    at = run_page(SCALING_PAGE, text=SENTENCE)  # opens on section 1: 8 random scores, c = 10
    assert_no_exception(at)
    assert not at.get("plotly_chart"), "the default tab loads no plotly.js"
    scores = np.random.default_rng(0).standard_normal(8)  # as core.scaling_masking draws them
    assert (scores < 0).any()  # the score bars go left of zero too
    _check_saturation_bars(at, scores, [str(j) for j in range(8)], 10.0)
    # a row of a head's scores: layer 0, head 0, the first query, numbered word pieces
    at.radio(key="sm_source").set_value("sentence").run()
    at.select_slider(key="sm_multiplier").set_value(2).run()
    assert_no_exception(at)
    trace = model.run(SENTENCE)
    queries, keys = (a.astype(np.float64) for a in (trace.queries, trace.keys))  # (L, H, n, d)
    row = queries[0, 0, 0] @ keys[0, 0].T / np.sqrt(model.d_head)  # (n,)
    labels = [f"{j}:{token}" for j, token in enumerate(trace.tokens)]
    _check_saturation_bars(at, row, labels, 2.0)


def test_scaling_page_with_an_unreadable_second_sentence():
    at = run_page(SCALING_PAGE, text=SENTENCE, pair="\x00\x01\x07")
    open_tab(at, "sm_section", "5 · Cross-attention")
    assert_no_exception(at)
    assert any(info.value.startswith("Sentence B") for info in at.info)


def test_scaling_page_long_input_says_what_it_draws():
    at = run_page(SCALING_PAGE, text=LONG_TEXT, query={"sm_section": "3 · Switches"})
    assert_no_exception(at)  # scaling off from the start: the comparison heatmaps average blocks
    assert "average blocks" in _texts(at)
    assert "first 40 of 512" in _texts(open_tab(at, "sm_section", "4 · Causal mask"))


# Every figure of the multi-head page, by the tab that draws it (views/multi_head.py, SECTIONS).
HEADS_FIGURES = {
    "Why several heads": {"mh_two_mixtures"},
    "1 · All heads": {
        "mh_grid",
        *(f"mh_role_{role}" for role in head_roles.possible_roles(causal=False)),  # MiniLM: no mask
    },
    "2 · Back to one vector": {"mh_head_output", "mh_concat", "mh_w_o"},
    "3 · Looking vs moving": {"mh_raw", "mh_share", "mh_disagreement", "mh_gap"},
    # nothing picked: the layer's head that writes the longest vectors is removed
    "4 · Remove heads": {"mh_ablation_final", "mh_ablation_layers"},
    "5 · Induction heads": {"mh_induction_grid"},
}


def test_two_heads_bars_are_html_for_a_sentence_and_plotly_past_html_bars_up_to():
    """A sentence's bars are HTML rows (no plotly.js to load for the first tab), each head's
    row of weights summing to 1; a long input's are plotly's grouped bars."""
    import html
    import re

    short = run_page(HEADS_PAGE, text=SENTENCE)
    assert_no_exception(short)
    assert not short.get("plotly_chart")
    (bars,) = [
        e.proto.body for e in short.get("html") if 'data-figure="mh_two_mixtures"' in e.proto.body
    ]
    legend = re.search(r'class="ae-legend">(.*?)</span></figcaption>', bars).group(1)
    names = [html.unescape(name) for name in re.findall(r"</span>([^<]+)", legend)]
    assert len(names) == 2 and "previous-token head" in names[0]
    numbers = [float(v) for v in re.findall(r"></span>(\d\.\d\d)</span>", bars)]
    n = len(numbers) // 2  # label by label: the previous-token head's weight, then the other's
    assert n <= display_policy.BARS_UP_TO
    for series in (numbers[0::2], numbers[1::2]):  # one softmax row each
        assert sum(series) == pytest.approx(1.0, abs=0.005 * n)
    long = run_page(HEADS_PAGE, text=LONG_TEXT)
    assert_no_exception(long)
    assert {chart.key for chart in long.get("plotly_chart")} == {"mh_two_mixtures"}
    assert not any('class="ae-bars"' in e.proto.body for e in long.get("html"))


def test_heads_page_draws_one_tab_at_a_time_and_ablates(model):
    at = run_page(HEADS_PAGE, text=SENTENCE)
    assert_no_exception(at)
    assert_each_tab_draws(at, HEADS_PAGE, HEADS_FIGURES)
    at = open_tab(at, "mh_section", "4 · Remove heads")
    # the tab opens on a head removed: layer 0's longest writer, measured independently
    # as the mean length of α V W_Oʰ over the tokens, with W_O read from the model's weights
    trace = model.run(SENTENCE)
    w_o = model.attention_weights(0).output.weight.detach().numpy().astype(np.float64)
    per_head = w_o.T.reshape(model.n_heads, model.d_head, model.d_model)  # (H, d_head, d)
    outputs = trace.attentions[0].astype(np.float64) @ trace.values[0]  # (H, n, d_head)
    lengths = np.linalg.norm(outputs @ per_head, axis=-1).mean(axis=-1)  # (H,)
    strongest = int(lengths.argmax())
    assert f"layer 0's head {strongest} removed" in _texts(at)
    specs = json.dumps([c.proto.spec for c in at.get("plotly_chart")], ensure_ascii=False)
    assert f"Final vectors with L0 H{strongest} removed" in specs
    ablated = model.run(SENTENCE, ablate=frozenset({(0, strongest)})).hidden_states[-1]
    final = trace.hidden_states[-1].astype(np.float64)
    cosine = (final * ablated).sum(-1) / np.linalg.norm(final, axis=-1)
    cosine /= np.linalg.norm(ablated.astype(np.float64), axis=-1)
    (bars,) = [c for c in at.get("plotly_chart") if c.key == "mh_ablation_final"]
    drawn = sent_array(json.loads(bars.proto.spec)["data"][0]["y"])
    np.testing.assert_allclose(drawn, 1 - cosine, atol=1e-4)
    at.toggle(key="mh_ablate_layer").set_value(True).run()
    at = answer_open_questions(at)  # other heads removed: the tab's question is asked anew
    assert_no_exception(at)
    assert "Mean final cosine" in _texts(at)
    at.toggle(key="mh_ablate_layer").set_value(False).run()
    at.multiselect(key="mh_ablate").set_value(["layer 5 · head 11", "layer 0 · head 3"]).run()
    at = answer_open_questions(at)
    assert_no_exception(at)
    assert "2 heads removed" in json.dumps(
        [c.proto.spec for c in at.get("plotly_chart")], ensure_ascii=False
    )
    # each tab draws its own Layer and Head sliders, and they keep their place from tab to tab:
    # set in tab 2, head 3 of layer 2 in tab 3; tab 4's Layer slider alone, on layer 2 too
    open_tab(at, "mh_section", "2 · Back to one vector")
    at.slider(key="layer").set_value(2).run()
    at.slider(key="head").set_value(3).run()
    open_tab(at, "mh_section", "3 · Looking vs moving")
    titles = json.dumps([c.proto.spec for c in at.get("plotly_chart")], ensure_ascii=False)
    assert "L2 H3: α" in titles
    open_tab(at, "mh_section", "4 · Remove heads")
    assert at.slider(key="layer").value == 2
    assert "head" not in {slider.key for slider in at.slider}  # a layer's heads, not one


def test_heads_page_long_input_says_what_it_draws():
    at = run_page(HEADS_PAGE, text=LONG_TEXT)
    assert_no_exception(at)
    texts = _texts(open_tab(at, "mh_section", "1 · All heads"))
    assert "each small map averages blocks of 11 tokens" in texts
    texts = _texts(open_tab(at, "mh_section", "2 · Back to one vector"))
    assert "first 64 of 512 tokens" in texts


@pytest.mark.parametrize("page", [SCALING_PAGE, HEADS_PAGE])
@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_pages_survive_bad_input(page, name):
    at = run_page(page, text=BAD_INPUTS[name])
    assert_no_exception(at)
    if name in ("empty", "whitespace", "control"):
        assert at.info, "an unreadable text must get a message"
        assert not drawn_figures(at)
        return
    drawn = 0
    for opened in each_tab(at, page):  # every section meets the text
        assert_no_exception(opened)
        drawn += len(drawn_figures(opened))
    assert drawn


# ---- a real browser -----------------------------------------------------------------------------


@pytest.mark.browser
def test_scaling_page_draws_its_bars_in_chromium(server, browser):
    from tests.support.browser import page_exceptions, wait_for_app

    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 2400})
    for path, title, selector, min_drawn in (
        # section 1: the saturation bars and their table over c, HTML (Multi-head's tab 1 in
        # the browser: test_browser_devices.py's keyboard test opens it from a link)
        ("scaling_masking", "3 · Scaling and masking", ".ae-bars[data-figure]", 4),
    ):
        page.goto(f"{url}/{path}")
        wait_for_app(page)
        page.get_by_role("heading", name=title).wait_for(timeout=60_000)
        page.wait_for_function(
            f"document.querySelectorAll('{selector}').length >= {min_drawn}",
            timeout=60_000,
        )
        assert page_exceptions(page) == [], path


def test_remove_heads_bars_keep_a_short_axis_title_and_say_it_in_the_caption():
    """On a 390 px phone the long y-axis title was cut; the axis says "1 − cosine" and the
    caption says between what."""
    at = run_page("views/multi_head.py", text="Time flies like an arrow.")
    at.session_state["mh_section"] = "4 · Remove heads"
    at.run()
    assert_no_exception(at)
    (bars,) = [c for c in at.get("plotly_chart") if "mh_ablation_final" in c.proto.id]
    assert json.loads(bars.proto.spec)["layout"]["yaxis"]["title"]["text"] == "1 − cosine"
    captions = " ".join(c.value for c in at.caption)
    assert "Bars: 1 − cosine between each token's final vector here and in the full model" in (
        captions
    )


def test_the_plotly_saturation_figure_lists_keys_largest_score_first_too():
    """Past the HTML form's size the plotly figure draws the same order: the takeaway's key
    first, its weights under c = 1 and c recomputed here."""
    from ui import scaling_masking_charts

    scores = np.array([0.2, 1.5, -0.3, 0.9])
    labels = ["a", "b", "c", "d"]
    base, sharp = _softmax_rows(np.outer([1.0, 10.0], scores))
    fig = scaling_masking_charts.saturation_figure(scores, base, sharp, 10, labels)
    order = [1, 3, 0, 2]  # b 1.5, d 0.9, a 0.2, c −0.3
    score_bars, base_bars, sharp_bars = fig.data
    np.testing.assert_allclose(score_bars.y, scores[order], atol=1e-4)
    np.testing.assert_allclose(base_bars.y, base[order], atol=1e-4)
    np.testing.assert_allclose(sharp_bars.y, sharp[order], atol=1e-4)
    assert list(fig.layout.xaxis.ticktext) == [labels[k] for k in order]
