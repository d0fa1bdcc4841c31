"""The runs the views hand to ui/<page>_runs.py: each goes through the door with a cost that
covers what it keeps, and gives the numbers a plain numpy computation gives."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from ui import (
    context_runs,
    door,
    head_view_runs,
    inside_layer_runs,
    multi_head_runs,
    positional_runs,
    qkv_runs,
    traces,
)

TEXT = "the river bank was quiet after the storm"


@pytest.fixture
def admitted(monkeypatch):
    """(what, cost) of every run the door admits, with nothing cached before."""
    seen: list[tuple[str, int]] = []
    original = door.run_slot

    @contextlib.contextmanager
    def recording(cost_bytes: int, what: str):
        seen.append((what, cost_bytes))
        with original(cost_bytes, what):
            yield

    monkeypatch.setattr(door, "run_slot", recording)
    door.forget_all()
    yield seen
    door.forget_all()


def _costed(admitted, call, what: str):
    """call() through the door: its result, after checking the door admitted it as `what` with
    a cost at least the bytes the result keeps (door.nbytes counts each array buffer once)."""
    result = call()
    costs = [cost for name, cost in admitted if name == what]
    assert costs, f"{what!r} did not go through the door"
    assert costs[-1] >= door.nbytes(result) > 0, (what, costs[-1], door.nbytes(result))
    return result


def test_the_views_runs_go_through_the_door_with_a_cost(model, admitted):
    trace = traces.trace(model, TEXT)
    layer = 1
    sentence = _costed(
        admitted,
        lambda: context_runs.static_sentence(model, TEXT),
        "the sentence's static vectors",
    )
    np.testing.assert_array_equal(sentence.vectors, model.word_vectors()[trace.input_ids[1:-1]])
    head = _costed(
        admitted,
        lambda: qkv_runs.trained_head(model, trace, layer, 2, scale=True, causal=False),
        "a trained head",
    )
    # the head's own weights, from its projections in float64: softmax(Q Kᵀ / √d_k)
    x = trace.hidden_states[layer].astype(np.float64)
    p = head.projections
    query, key = x @ p.w_query + p.b_query, x @ p.w_key + p.b_key
    scores = query @ key.T / np.sqrt(p.d_k)
    expected = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(head.result.attn_weights, expected, atol=1e-5)
    np.testing.assert_allclose(head.result.attn_weights, trace.attentions[layer, 2], atol=1e-5)
    _costed(
        admitted,
        lambda: qkv_runs.random_head(model, trace, 8, 0, scale=True, causal=False),
        "a random head",
    )
    w_o = _costed(
        admitted,
        lambda: multi_head_runs.output_projection(model, layer),
        "the output projection",
    )
    n_heads, d_head = model.n_heads, model.d_head
    # head h's slice of W_O is columns h·d_head … of the (d_model, H·d_head) weight
    np.testing.assert_array_equal(w_o.per_head[1], w_o.weight[:, d_head : 2 * d_head].T)
    # stacked, W_Oᵀ's rows are the heads' slices one after the other
    np.testing.assert_array_equal(w_o.stacked, np.concatenate(list(w_o.per_head), axis=0))
    share = _costed(
        admitted,
        lambda: multi_head_runs.value_weighted_share(model, trace, layer),
        "the value-weighted shares",
    )
    # ‖α_ij v_j W_Oʰ‖ in numpy, each row divided by its sum
    values = trace.values[layer].astype(np.float64)  # (H, n, d_head)
    lengths = np.linalg.norm(np.einsum("hnd,hdm->hnm", values, w_o.per_head), axis=-1)
    norms = trace.attentions[layer] * lengths[:, None, :]
    np.testing.assert_allclose(share, norms / norms.sum(axis=-1, keepdims=True), atol=1e-5)
    lines = _costed(
        admitted,
        lambda: head_view_runs.layer_weights(model, trace, layer, value_weighted=True),
        "the value-weighted lines",
    )
    np.testing.assert_allclose(lines, share, atol=1e-6)
    every = _costed(
        admitted,
        lambda: head_view_runs.every_layer_weights(model, trace, value_weighted=True),
        "every head's value-weighted lines",
    )
    assert every.shape == (model.n_layers, n_heads, trace.n_tokens, trace.n_tokens)
    np.testing.assert_allclose(every[layer], share, atol=1e-6)
    # α needs no run: the Trace's own array, not a copy
    assert head_view_runs.every_layer_weights(model, trace, False) is trace.attentions
    _costed(admitted, lambda: inside_layer_runs.layer_stages(model), "the layer's stages")
    floor = inside_layer_runs.activation_floor(model)
    assert floor == pytest.approx(-0.17, abs=0.01)  # GELU's lowest output, about -0.17


def test_the_positional_tables_runs(model, admitted):
    trace = traces.trace(model, TEXT)
    recovery = _costed(
        admitted,
        lambda: positional_runs.recovery(model, trace, 5),
        "reading word and position back",
    )
    words, positions = model.word_vectors(), model.position_vectors()
    ids = trace.input_ids[:5]
    summed = words[ids].astype(np.float64) + positions[:5]
    unit = summed / np.linalg.norm(summed, axis=1, keepdims=True)
    table = words / np.linalg.norm(words, axis=1, keepdims=True)
    own = np.einsum("nd,nd->n", unit, table[ids])
    np.testing.assert_allclose(recovery.cos_token, own, atol=1e-5)
    ranks = 1 + (unit @ table.T > own[:, None] + 1e-9).sum(axis=1)
    np.testing.assert_array_equal(recovery.token_rank, ranks)
    geometry = _costed(
        admitted,
        lambda: positional_runs.table_geometry(model),
        "the embedding tables' geometry",
    )
    # the centred rows' mean cosine between neighbours, in numpy
    centred = positions - positions.mean(axis=0)
    centred = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    neighbours = np.einsum("nd,nd->n", centred[:-1], centred[1:]).mean()
    assert geometry.centred_by_distance[1] == pytest.approx(neighbours, abs=1e-6)
    assert geometry.centred_by_distance[0] == pytest.approx(1.0)
    assert geometry.word_position.shape == (positional_runs.PAIRS,)
