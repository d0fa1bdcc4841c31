"""core.scaling_masking, core.context and core.qkv against the formulas written out element by element.

A tiny random BERT (written by tests/tiny_bert.py) supplies traces and weights; the references
read its checkpoint file directly and never call the function they check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from tiny_bert import attention_loop, cosine_loop, raw_tensors, write_tiny_bert

import core
from core import context, qkv, scaling_masking
from core.errors import EmptyInput


def softmax_loop(row) -> list[float]:
    finite = [s for s in row if s != -math.inf]
    if not finite:
        return [0.0] * len(row)
    top = max(finite)
    exps = [math.exp(s - top) if s != -math.inf else 0.0 for s in row]
    return [e / sum(exps) for e in exps]


def entropy_loop(row) -> float:
    return -sum(p * math.log2(p) for p in row if p > 0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = write_tiny_bert(tmp_path_factory.mktemp("scaling"), seed=4, d_model=12, n_heads=3)
    return core.load_folder(path), raw_tensors(path)


# ---- core.scaling_masking ---------------------------------------------------------------------------


def test_softmax_and_saturation_by_loops():
    scores = np.array([[0.3, -1.2, 2.0, 0.0], [-np.inf, 1.0, -np.inf, 0.5]])
    got = scaling_masking.softmax(scores)
    for row, expected in zip(got, scores, strict=True):
        np.testing.assert_allclose(row, softmax_loop(expected), rtol=1e-12)
    assert scaling_masking.softmax(np.full((1, 3), -np.inf)).tolist() == [[0.0, 0.0, 0.0]]
    multipliers = [0.1, 1.0, 7.5]
    curve = scaling_masking.saturation(scores[0], multipliers)
    assert curve.shape == (3, 4)
    for m, c in enumerate(multipliers):
        np.testing.assert_allclose(curve[m], softmax_loop([c * s for s in scores[0]]), rtol=1e-12)
    assert (
        scaling_masking.MULTIPLIERS[0] == pytest.approx(0.1)
        and scaling_masking.MULTIPLIERS[-1] == 100.0
    )
    ratios = (
        scaling_masking.MULTIPLIERS[1:] / scaling_masking.MULTIPLIERS[:-1]
    )  # evenly spaced on a log axis
    np.testing.assert_allclose(ratios, 1000 ** (1 / 60))


@pytest.mark.parametrize("d_k", [2, 16, 64])
def test_random_dot_products_and_their_entropies(d_k):
    products = scaling_masking.random_dot_products(d_k, n_queries=40, n_keys=30, seed=3)
    assert products.raw.shape == (40, 30) and products.d_k == d_k
    assert (products.n_queries, products.n_keys) == (40, 30)
    np.testing.assert_allclose(products.scaled, products.raw / math.sqrt(d_k), rtol=1e-12)
    assert products.raw_variance == pytest.approx(float(np.var(products.raw)))
    assert products.scaled_variance == pytest.approx(products.raw_variance / d_k)
    raw_entropy = sum(entropy_loop(softmax_loop(row)) for row in products.raw) / 40
    scaled_entropy = sum(entropy_loop(softmax_loop(row)) for row in products.scaled) / 40
    assert products.raw_entropy == pytest.approx(raw_entropy, rel=1e-9)
    assert products.scaled_entropy == pytest.approx(scaled_entropy, rel=1e-9)
    table = scaling_masking.width_table([products])
    wider = scaling_masking.random_dot_products(4 * d_k, n_queries=40, n_keys=30, seed=3)
    assert scaling_masking.entropy_falls_with_width([products, wider]) == (
        wider.raw_entropy < products.raw_entropy
    )
    assert not scaling_masking.entropy_falls_with_width([products, products])  # no fall: equal
    assert table["d_k"] == [d_k]
    assert table["variance of q·k"] == [round(products.raw_variance, 2)]
    assert table["variance of q·k/√d_k"] == [round(products.scaled_variance, 3)]
    assert table["entropy unscaled (bits)"] == [round(raw_entropy, 2)]
    assert table["entropy scaled (bits)"] == [round(scaled_entropy, 2)]


@pytest.mark.parametrize("scale", [True, False])
def test_causal_view_by_loop(tiny, scale):
    model, _ = tiny
    trace = model.run("the river bank flows", "money grows", scale=scale)
    layer, head, k = 1, 2, 6
    masked, weights = scaling_masking.causal_view(trace, layer, head, max_tokens=k)
    assert masked.shape == weights.shape == (k, k)
    q, key = trace.queries[layer, head], trace.keys[layer, head]
    for i in range(k):
        expected_row = []
        for j in range(k):
            dot = sum(float(q[i, c]) * float(key[j, c]) for c in range(model.d_head))
            expected_row.append(
                -math.inf if j > i else dot / math.sqrt(model.d_head) if scale else dot
            )
        finite = [j for j in range(k) if j <= i]
        np.testing.assert_allclose(masked[i, finite], [expected_row[j] for j in finite], rtol=1e-5)
        assert np.isneginf(masked[i, i + 1 :]).all()
        np.testing.assert_allclose(weights[i], softmax_loop(expected_row), rtol=1e-5, atol=1e-7)


def test_cosines_and_run_comparison_by_loops(tiny):
    model, _ = tiny
    text = "the river bank flows"
    default, variant = model.run(text), model.run(text, scale=False)
    layers = scaling_masking.layer_cosines(default, variant)
    for s in range(model.n_layers + 1):
        for i in range(default.n_tokens):
            expected = cosine_loop(default.hidden_states[s, i], variant.hidden_states[s, i])
            assert layers[s, i] == pytest.approx(expected, abs=1e-6)
    np.testing.assert_array_equal(scaling_masking.final_cosine(default, variant), layers[-1])
    comparison = scaling_masking.compare_runs(default, variant, 1, 2)
    np.testing.assert_array_equal(comparison.default_weights, default.attentions[1, 2])
    np.testing.assert_array_equal(comparison.variant_weights, variant.attentions[1, 2])
    for i in range(default.n_tokens):
        assert comparison.default_entropy[i] == pytest.approx(
            entropy_loop(default.attentions[1, 2, i]), abs=1e-6
        )
        assert comparison.variant_entropy[i] == pytest.approx(
            entropy_loop(variant.attentions[1, 2, i]), abs=1e-6
        )
    np.testing.assert_array_equal(comparison.final_cosine, layers[-1])
    n = default.n_tokens
    assert comparison.mean_entropies == (
        pytest.approx(sum(entropy_loop(default.attentions[1, 2, i]) for i in range(n)) / n),
        pytest.approx(sum(entropy_loop(variant.attentions[1, 2, i]) for i in range(n)) / n),
    )
    np.testing.assert_allclose(
        scaling_masking.how_far_moved(np.array([1.0, 0.25, -1.0])), [0, 0.75, 2]
    )
    summary = scaling_masking.summarize_cosines(np.array([0.9, 0.2, 0.7, 0.4]))
    assert (summary.most_moved, summary.lowest, summary.mean) == (1, 0.2, pytest.approx(0.55))
    with pytest.raises(ValueError):
        scaling_masking.final_cosine(default, model.run("money grows"))


@pytest.mark.parametrize("scale", [True, False])
def test_cross_attention_by_loops(tiny, scale):
    model, raw = tiny
    a, b = model.run("the river bank flows"), model.run("money grows a bank")
    layer = 1
    cross = scaling_masking.cross_attention(model, a, b, layer, scale=scale)
    expected = attention_loop(
        np.asarray(a.hidden_states[layer], dtype=np.float64),
        np.asarray(b.hidden_states[layer], dtype=np.float64),
        raw,
        layer,
        model.n_heads,
        scale=scale,
    )
    np.testing.assert_allclose(cross.attn_weights, expected["attentions"], atol=1e-6)
    np.testing.assert_allclose(cross.output, expected["output"], atol=1e-5)


def test_the_one_cosine():
    from core.positional import cosine

    a = np.array([[1.0, 2.0, -1.0], [0.0, 0.0, 0.0], [3.0, -1.0, 2.0]])
    b = np.array([[2.0, 0.5, 1.0], [1.0, 1.0, 1.0], [-6.0, 2.0, -4.0]])
    got = cosine(a, b)
    for i in range(3):
        assert got[i] == pytest.approx(cosine_loop(a[i], b[i]))
    assert got[2] == pytest.approx(-1.0) and got[1] == 0.0
    assert float(cosine(a[0], b[0])) == pytest.approx(cosine_loop(a[0], b[0]))


# ---- core.context, core.qkv --------------------------------------------------------------------------


def test_static_sentence_reads_rows_of_the_table(tiny):
    model, raw = tiny
    sentence = context.static_sentence(model, "the bank of the river flows", max_pieces=4)
    assert sentence.tokens == ("the", "bank", "of", "the")
    assert sentence.n_pieces == 6 and sentence.truncated
    ids = [5, 6, 12, 5]  # rows of tests/tiny_bert.py's vocabulary
    np.testing.assert_array_equal(
        sentence.vectors, raw["embeddings.word_embeddings.weight"][ids].astype(np.float32)
    )
    assert not context.static_sentence(model, "money grows").truncated
    with pytest.raises(EmptyInput):
        context.static_sentence(model, "   ")


def test_parameter_free_by_loops():
    x = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
    result = context.parameter_free(x)
    n, d = x.shape
    for i in range(n):
        similarity = [sum(float(x[i, t]) * float(x[j, t]) for t in range(d)) for j in range(n)]
        np.testing.assert_allclose(result.similarity[i], similarity, rtol=1e-5)
        weights = softmax_loop(similarity)  # no 1/√d here: the bare first-principles form
        np.testing.assert_allclose(result.attn_weights[i], weights, rtol=1e-5, atol=1e-7)
        for t in range(d):
            expected = sum(weights[j] * float(x[j, t]) for j in range(n))
            assert result.output[i, t] == pytest.approx(expected, abs=1e-5)


def test_shared_word_before_and_after(tiny):
    model, _ = tiny
    a = context.static_sentence(model, "the bank flows")
    b = context.static_sentence(model, "money grows a bank")
    result_a, result_b = context.parameter_free(a.vectors), context.parameter_free(b.vectors)
    assert context.shared_tokens(a.tokens, b.tokens) == ["bank"]
    pair = context.compare_shared_word("bank", a, result_a, b, result_b)
    assert (pair.index_a, pair.index_b) == (1, 3)
    assert pair.cosine_before == pytest.approx(1.0)
    assert pair.cosine_after == pytest.approx(cosine_loop(result_a.output[1], result_b.output[3]))
    assert pair.cosine_change == pytest.approx(pair.cosine_after - 1.0)
    np.testing.assert_array_equal(pair.weights_b, result_b.attn_weights[3])


def test_random_projections_follow_the_seed_and_the_spread():
    first = qkv.random_projections(64, 48, seed=5, std=0.5)
    again = qkv.random_projections(64, 48, seed=5, std=0.5)
    np.testing.assert_array_equal(first.w_value, again.w_value)
    for w in (first.w_query, first.w_key, first.w_value):
        assert w.shape == (64, 48) and abs(w.std() - 0.5) < 0.02 and abs(w.mean()) < 0.02
    assert not np.allclose(first.w_query, first.w_key)
    assert first.d_k == 48 and not first.b_query.any()


def test_head_projections_are_slices_of_the_checkpoint(tiny):
    model, raw = tiny
    layer, head, d_head = 1, 2, model.d_head
    cut = qkv.head_projections(model, layer, head)
    prefix = f"encoder.layer.{layer}.attention.self"
    for name, w, b in (("query", cut.w_query, cut.b_query), ("key", cut.w_key, cut.b_key),
                       ("value", cut.w_value, cut.b_value)):  # fmt: skip
        weight, bias = raw[f"{prefix}.{name}.weight"], raw[f"{prefix}.{name}.bias"]
        for t in range(model.d_model):
            for c in range(d_head):  # output row head·d_head + c of the (out, in) matrix
                assert w[t, c] == pytest.approx(weight[head * d_head + c, t])
        np.testing.assert_allclose(b, bias[head * d_head : (head + 1) * d_head], rtol=1e-6)


@pytest.mark.parametrize(("scale", "causal"), [(True, False), (False, True), (True, True)])
def test_qkv_attention_and_follow_query_by_loops(scale, causal):
    rng = np.random.default_rng(11)
    n, d, d_k = 5, 6, 3
    x = rng.normal(size=(n, d)).astype(np.float32)
    projections = qkv.QKVProjections(
        *(rng.normal(size=(d, d_k)).astype(np.float32) for _ in range(3)),
        *(rng.normal(size=d_k).astype(np.float32) for _ in range(3)),
    )
    result = qkv.qkv_attention(x, projections, scale=scale, causal=causal)

    def project(w, b):  # q_ic = Σ_t x_it W_tc + b_c
        return [[sum(float(x[i, t]) * float(w[t, c]) for t in range(d)) + float(b[c])
                 for c in range(d_k)] for i in range(n)]  # fmt: skip

    q = project(projections.w_query, projections.b_query)
    k = project(projections.w_key, projections.b_key)
    v = project(projections.w_value, projections.b_value)
    np.testing.assert_allclose(result.query, q, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.key, k, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.value, v, rtol=1e-5, atol=1e-6)
    for i in range(n):
        dots = [sum(q[i][c] * k[j][c] for c in range(d_k)) for j in range(n)]
        scores = [
            -math.inf if causal and j > i else dots[j] / math.sqrt(d_k) if scale else dots[j]
            for j in range(n)
        ]
        weights = softmax_loop(scores)
        output = [sum(weights[j] * v[j][c] for j in range(n)) for c in range(d_k)]
        np.testing.assert_allclose(result.dot[i], dots, rtol=1e-4, atol=1e-5)
        finite = np.isfinite(scores)
        np.testing.assert_array_equal(np.isfinite(result.scores[i]), finite)
        np.testing.assert_allclose(
            result.scores[i][finite], np.array(scores)[finite], rtol=1e-4, atol=1e-5
        )
        np.testing.assert_allclose(result.attn_weights[i], weights, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(result.output[i], output, rtol=1e-4, atol=1e-5)
        row = qkv.follow_query(result, i)
        for j in range(n):
            np.testing.assert_allclose(
                row.products[j], [q[i][c] * k[j][c] for c in range(d_k)], rtol=1e-4, atol=1e-5
            )
            np.testing.assert_allclose(
                row.weighted_values[j],
                [weights[j] * v[j][c] for c in range(d_k)],
                rtol=1e-4,
                atol=1e-5,
            )
        np.testing.assert_allclose(row.dots, dots, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(row.weights, weights, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(row.output, output, rtol=1e-4, atol=1e-5)
        assert row.index == i
    assert (result.scale, result.causal) == (scale, causal)


def test_asymmetry_by_loop():
    weights = np.random.default_rng(3).random((4, 4))
    difference = qkv.asymmetry(weights)
    best, best_pair = -math.inf, None
    for i in range(4):
        for j in range(4):
            assert difference[i, j] == weights[i, j] - weights[j, i]
            if weights[i, j] - weights[j, i] > best:
                best, best_pair = weights[i, j] - weights[j, i], (i, j)
    assert qkv.most_asymmetric_pair(weights) == best_pair
