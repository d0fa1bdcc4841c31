"""The own encoder on the bundled model: the Trace contract, switches, input handling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import core
from core.text import MAX_CHARS, truncate_longest_first


def test_trace_contract(model):
    trace = model.run("The river bank flooded.", "Money grows.")
    n, L, H = trace.n_tokens, model.n_layers, model.n_heads
    assert (
        trace.tokens[0] == "[CLS]"
        and trace.tokens[-1] == "[SEP]"
        and trace.tokens.count("[SEP]") == 2
    )
    assert trace.segments.tolist() == [0] * trace.tokens.index("[SEP]", 1) + [0] + [1] * (
        n - trace.tokens.index("[SEP]", 1) - 1
    )
    assert trace.static.shape == (n, model.d_model)
    assert trace.hidden_states.shape == (L + 1, n, model.d_model)
    for name in ("queries", "keys", "values"):
        assert getattr(trace, name).shape == (L, H, n, model.d_head)
    assert trace.scores.shape == trace.attentions.shape == (L, H, n, n)
    for name in ("static", "hidden_states", "queries", "scores", "attentions"):
        array = getattr(trace, name)
        assert array.dtype == np.float32 and not array.flags.writeable, name
    np.testing.assert_allclose(trace.attentions.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(trace.static, model.word_vectors()[trace.input_ids])


@pytest.mark.parametrize("scale", [True, False])
def test_scores_are_q_dot_k_over_sqrt_d_head_written_out(model, scale):
    """Layer 0, head 3: the checkpoint's own W_Q and W_K rows of that head applied to the layer's
    input, q_i · k_j summed term by term in float64, divided by √d_head only when scaled."""
    import math

    from safetensors.numpy import load_file

    raw = load_file(str(model.model_dir / "model.safetensors"))

    def tensor(part: str) -> np.ndarray:
        name = next(k for k in raw if k.endswith(f"encoder.layer.0.attention.self.{part}"))
        return raw[name].astype(np.float64)

    trace = model.run("a bank by the river", scale=scale)
    head, d_head, n = 3, model.d_head, trace.n_tokens
    rows = slice(head * d_head, (head + 1) * d_head)  # head 3's output rows of (out, in) W
    x = trace.hidden_states[0].astype(np.float64)  # layer 0's input (= transformers', test_parity)
    q = x @ tensor("query.weight")[rows].T + tensor("query.bias")[rows]  # (n, d_head)
    k = x @ tensor("key.weight")[rows].T + tensor("key.bias")[rows]
    expected = np.array(
        [[sum(q[i, c] * k[j, c] for c in range(d_head)) for j in range(n)] for i in range(n)]
    )
    if scale:
        expected /= math.sqrt(d_head)
    np.testing.assert_allclose(trace.scores[0, head], expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(trace.head_scores(0, head), expected, rtol=1e-4, atol=1e-4)


def test_causal_run_masks_every_layer(model):
    trace = model.run("time flies like an arrow", causal=True)
    upper = np.triu(np.ones((trace.n_tokens,) * 2, dtype=bool), k=1)
    assert np.all(trace.attentions[:, :, upper] == 0)
    assert np.all(np.isneginf(trace.scores[:, :, upper]))


@pytest.mark.parametrize(
    "switch", [{"scale": False}, {"causal": True}, {"positions": False}, {"ablate": {(0, 0)}}]
)
def test_switches_change_the_final_hidden_states(model, switch):
    default = model.run("the bank of the river")
    switched = model.run("the bank of the river", **switch)
    assert np.abs(default.hidden_states[-1] - switched.hidden_states[-1]).max() > 1e-3


def test_causal_first_token_sees_only_itself(model):
    trace = model.run("time flies", causal=True)
    np.testing.assert_allclose(trace.attentions[:, :, 0, 0], 1.0, atol=1e-6)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", None])
def test_empty_text_raises_empty_input(model, text):
    with pytest.raises(core.EmptyInput):
        model.run(text)


def test_only_control_characters_is_empty(model):
    with pytest.raises(core.EmptyInput):
        model.run("\x00\x01\x07\u200b")


@pytest.mark.parametrize(
    "text",
    ["I ❤️ 東京 and 北京", "\u202eright to left\u202c", "</script><script>alert(1)</script>",
     "line\u2028separator", "👩‍👩‍👧 family", "a" * 1000, "{{7*7}}", "tab\tand\x07bell"],
)  # fmt: skip
def test_unusual_text_runs(model, text):
    trace = model.run(text)
    assert trace.tokens[0] == "[CLS]" and np.isfinite(trace.hidden_states).all()


def test_text_is_capped_on_the_server(model):
    encoded = model.encode("word " * (MAX_CHARS // 2) + "tail" * 10_000)
    assert encoded.truncated and len(encoded.tokens) == model.max_positions


@pytest.mark.parametrize("len_a, len_b", list(itertools.product([0, 1, 5, 300, 600], repeat=2)))
def test_pair_truncation_never_raises(model, len_a, len_b):
    text = "bank " * len_a or "x"
    pair = "river " * len_b
    trace = model.run(text, pair)
    assert trace.n_tokens <= model.max_positions
    assert trace.truncated == (trace.n_pieces > model.max_positions)


@pytest.mark.parametrize(
    "a, b, budget", [(10, 10, 5), (3, 100, 20), (100, 3, 20), (0, 0, 0), (5, 5, 0), (1, 1, 1)]
)
def test_truncate_longest_first_fits(a, b, budget):
    keep_a, keep_b = truncate_longest_first(list(range(a)), list(range(b)), budget)
    assert keep_a + keep_b == min(a + b, budget) and keep_a <= a and keep_b <= b


def test_positions_off_makes_attention_permutation_equivariant(model):
    """Without position vectors, reordering the words only reorders the attention matrix."""
    words = ["money", "bank", "grows", "river", "flows"]
    order = [3, 0, 4, 1, 2]
    base = model.run(" ".join(words), positions=False)
    shuffled = model.run(" ".join(words[i] for i in order), positions=False)
    perm = np.array([0, *[i + 1 for i in order], 6])  # [CLS] and [SEP] stay in place
    np.testing.assert_allclose(
        shuffled.attentions, base.attentions[:, :, perm][:, :, :, perm], atol=1e-5
    )
    with_positions = model.run(" ".join(words[i] for i in order))
    assert (
        np.abs(
            with_positions.attentions
            - model.run(" ".join(words)).attentions[:, :, perm][:, :, :, perm]
        ).max()
        > 1e-3
    )


def test_scores_are_recomputed_from_queries_and_keys_not_stored(model):
    """A cached Trace keeps no (L, H, n, n) score block (75 MB at 512 tokens): the scores follow
    from the stored queries and keys, and their softmax is the stored attention."""
    import dataclasses

    trace = model.run("the bank of the river flooded", causal=True)
    assert "scores" not in {field.name for field in dataclasses.fields(trace)}
    for layer, head in [(0, 0), (model.n_layers - 1, model.n_heads - 1)]:
        scores = trace.head_scores(layer, head)  # (n, n)
        np.testing.assert_array_equal(scores, trace.scores[layer, head])
        assert np.isneginf(scores[0, 1:]).all()  # causal: token 0 sees only itself
        # softmax written out: exp(s_ij − max_j s_ij) / Σ_j exp(…); exp(−inf) = 0 for masked keys
        shifted = np.exp(scores.astype(np.float64) - scores.max(axis=1, keepdims=True))
        weights = shifted / shifted.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(weights, trace.attentions[layer, head], rtol=1e-5, atol=1e-6)
