"""The Trace and the per-head quantities against transformers' own intermediates.

Forward hooks on BertModel's query, key and value Linear modules and on the attention output
projection capture what transformers computed inside every layer (eager attention, so the
weights come back). Scores are then the formula written out on those captured tensors, and the
value-weighted norms ‖α_ij v_j W_Oʰ‖ are built per head and per key from W_O's columns.
Every test asserts how many layers it compared.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tiny_bert import write_tiny_bert

import core
from core import multi_head, scaling_masking

ATOL = 2e-5


def captured_run(reference, trace) -> dict[str, list[np.ndarray]]:
    """Run BertModel on the Trace's ids; return per-layer hook captures and its outputs."""
    captured: dict[str, list[np.ndarray]] = {"query": [], "key": [], "value": [], "concat": []}
    handles = []
    for layer in reference.encoder.layer:
        for name in ("query", "key", "value"):
            module = getattr(layer.attention.self, name)
            handles.append(
                module.register_forward_hook(
                    lambda _m, _inp, out, name=name: captured[name].append(
                        out[0].detach().double().numpy()  # (n, d_model), batch of one
                    )
                )
            )
        handles.append(  # the input of W_O is the concatenation of the heads' outputs
            layer.attention.output.dense.register_forward_hook(
                lambda _m, inp, _out: captured["concat"].append(inp[0][0].detach().double().numpy())
            )
        )
    try:
        with torch.inference_mode():
            out = reference(
                input_ids=torch.tensor([list(trace.input_ids)]),
                token_type_ids=torch.tensor([list(trace.segments)]),
                output_attentions=True,
                output_hidden_states=True,
            )
    finally:
        for handle in handles:
            handle.remove()
    captured["attentions"] = [a[0].double().numpy() for a in out.attentions or ()]
    captured["hidden_states"] = [h[0].double().numpy() for h in out.hidden_states or ()]
    return captured


def per_head(x: np.ndarray, n_heads: int) -> np.ndarray:
    """(n, H·d_head) -> (H, n, d_head): head h = columns h·d_head … (h+1)·d_head − 1."""
    n, d_model = x.shape
    d_head = d_model // n_heads
    return np.stack([x[:, h * d_head : (h + 1) * d_head] for h in range(n_heads)])


def assert_trace_matches_hooks(model, reference, text, pair=None) -> int:
    trace = model.run(text, pair)
    got = captured_run(reference, trace)
    n_layers = model.n_layers
    assert len(got["query"]) == len(got["attentions"]) == n_layers, "hooks saw every layer"
    assert len(got["hidden_states"]) == n_layers + 1
    compared = 0
    for layer in range(n_layers):
        query = per_head(got["query"][layer], model.n_heads)  # (H, n, d_head)
        key = per_head(got["key"][layer], model.n_heads)
        value = per_head(got["value"][layer], model.n_heads)
        for name, ref in (("queries", query), ("keys", key), ("values", value)):
            np.testing.assert_allclose(getattr(trace, name)[layer], ref, atol=ATOL, err_msg=name)
        # Scores: q_i · k_j / √d_head, the formula written out on transformers' q and k.
        scores = np.einsum("hid,hjd->hij", query, key) / math.sqrt(model.d_head)
        np.testing.assert_allclose(trace.scores[layer], scores, atol=1e-4, rtol=1e-5)
        np.testing.assert_allclose(trace.attentions[layer], got["attentions"][layer], atol=ATOL)
        # The heads' outputs side by side: what W_O reads in transformers.
        np.testing.assert_allclose(
            multi_head.concatenated_heads(trace, layer), got["concat"][layer], atol=ATOL
        )
        compared += 1
    for index, ref in enumerate(got["hidden_states"]):
        np.testing.assert_allclose(trace.hidden_states[index], ref, atol=ATOL)
    return compared


def value_weighted_norms_by_hand(reference, got, layer: int, n_heads: int) -> np.ndarray:
    """(H, n, n): ‖α_ij v_j W_Oʰ‖ with W_Oʰ = the columns of W_O that read head h (Kobayashi
    et al., 2020), every (h, i, j) computed on its own from transformers' tensors."""
    w_o = reference.encoder.layer[layer].attention.output.dense.weight.detach().double().numpy()
    attn, value = got["attentions"][layer], got["value"][layer]  # (H, n, n), (n, d_model)
    n, d_model = value.shape
    d_head = d_model // n_heads
    norms = np.zeros((n_heads, n, n))
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        for j in range(n):
            moved = w_o[:, cols] @ value[j, cols]  # (d_model,) what head h writes for key j
            for i in range(n):
                norms[h, i, j] = np.linalg.norm(attn[h, i, j] * moved)
    return norms


# ---- a seeded tiny BertConfig -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import BertModel

    path = write_tiny_bert(tmp_path_factory.mktemp("hooks"), seed=11, d_model=12, n_heads=3)
    reference = BertModel.from_pretrained(str(path), attn_implementation="eager").eval()
    return core.load_folder(path), reference


def test_tiny_trace_equals_transformers_intermediates(tiny):
    model, reference = tiny
    assert assert_trace_matches_hooks(model, reference, "the river bank flows", "money grows") == 2


def test_tiny_value_weighted_norms_and_w_o_slices(tiny):
    model, reference = tiny
    trace = model.run("time flies like an arrow", "the bank")
    got = captured_run(reference, trace)
    assert len(got["attentions"]) == model.n_layers
    for layer in range(model.n_layers):
        expected = value_weighted_norms_by_hand(reference, got, layer, model.n_heads)
        np.testing.assert_allclose(
            multi_head.value_weighted_norms(model, trace, layer), expected, rtol=1e-5, atol=1e-6
        )
        dense = reference.encoder.layer[layer].attention.output.dense
        w_o, b_o = multi_head.output_projection(model, layer)
        np.testing.assert_array_equal(w_o, dense.weight.detach().numpy())
        np.testing.assert_array_equal(b_o, dense.bias.detach().numpy())
        per_head_w_o = multi_head.head_output_projection(model, layer)  # (H, d_head, d_model)
        for h in range(model.n_heads):
            for c in range(model.d_head):
                np.testing.assert_array_equal(
                    per_head_w_o[h, c], w_o[:, h * model.d_head + c]
                )  # row c of W_Oʰ = the column of W_O that reads component c of head h


def test_tiny_cross_attention_of_two_sentences(tiny):
    """Queries from A, keys and values from B, by transformers' own layer modules."""
    model, reference = tiny
    a, b = model.run("the river bank flows"), model.run("money grows a bank of time")
    layer = 1
    cross = scaling_masking.cross_attention(model, a, b, layer)
    self_attention = reference.encoder.layer[layer].attention.self
    x_a = torch.from_numpy(np.array(a.hidden_states[layer]))
    x_b = torch.from_numpy(np.array(b.hidden_states[layer]))
    with torch.inference_mode():
        query = per_head(self_attention.query(x_a).double().numpy(), model.n_heads)
        key = per_head(self_attention.key(x_b).double().numpy(), model.n_heads)
        value = per_head(self_attention.value(x_b).double().numpy(), model.n_heads)
    scores = np.einsum("hid,hjd->hij", query, key) / math.sqrt(model.d_head)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(cross.attn_weights, weights, atol=1e-5)
    concatenated = np.concatenate(list(weights @ value), axis=-1)  # (n_a, H·d_head)
    dense = reference.encoder.layer[layer].attention.output.dense
    expected = concatenated @ dense.weight.detach().double().numpy().T + dense.bias.detach().numpy()
    np.testing.assert_allclose(cross.output, expected, atol=1e-5)


# ---- the bundled MiniLM -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_reference(model):
    from transformers import BertModel

    return BertModel.from_pretrained(str(model.model_dir), attn_implementation="eager").eval()


def test_minilm_trace_equals_transformers_intermediates(model, minilm_reference):
    compared = assert_trace_matches_hooks(
        model, minilm_reference, "The bank raised rates.", "She sat by the river."
    )
    assert compared == model.n_layers == 6


def test_minilm_value_weighted_norms(model, minilm_reference):
    trace = model.run("The river bank flooded.")
    got = captured_run(minilm_reference, trace)
    layers = (0, 5)
    for layer in layers:
        expected = value_weighted_norms_by_hand(minilm_reference, got, layer, model.n_heads)
        np.testing.assert_allclose(
            multi_head.value_weighted_norms(model, trace, layer), expected, rtol=1e-4, atol=1e-5
        )
    assert len(got["attentions"]) == 6
