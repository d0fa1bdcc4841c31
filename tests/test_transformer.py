"""Every Trace array of the own encoder against BERT's forward pass written out in float64 loops.

Tiny random weights (d_model 8, 2 heads, 2 layers) so the loops take milliseconds; each switch of
a run (√d_head, causal mask, positions, removed heads) and each activation is covered, and every
comparison counts the layers it compared.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tiny_bert import forward_loop, raw_tensors, write_tiny_bert

import core
from core import context, scaling_masking
from core.weights import hf_to_own_name, load_weights, read_config

TEXT, PAIR = "the river bank flows", "money grows"
ATOL = 1e-5
FIELDS = ("queries", "keys", "values", "scores", "attentions", "hidden_states")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("tiny"))


def compare_with_loops(model_dir, text=TEXT, pair=PAIR, **switches) -> int:
    """Run the own encoder and the loops; assert every field agrees; return layers compared."""
    model = core.load_folder(model_dir)
    trace = model.run(text, pair, **switches)
    config = json.loads((model_dir / "config.json").read_text())
    raw = raw_tensors(model_dir)
    switches["ablate"] = frozenset(switches.get("ablate", ()))
    expected = forward_loop(raw, config, list(trace.input_ids), list(trace.segments), **switches)
    for name in FIELDS:
        own = np.asarray(getattr(trace, name), dtype=np.float64)
        assert own.shape == expected[name].shape, name
        finite = np.isfinite(expected[name])
        np.testing.assert_array_equal(np.isfinite(own), finite, err_msg=f"{name}: -inf pattern")
        np.testing.assert_allclose(own[finite], expected[name][finite], atol=ATOL, err_msg=name)
    np.testing.assert_allclose(
        trace.static, raw["embeddings.word_embeddings.weight"][list(trace.input_ids)], atol=1e-7
    )
    for layer in range(model.n_layers):  # one head at a time, as the pages read it
        for head in range(model.n_heads):
            own = trace.head_scores(layer, head)
            ref = expected["scores"][layer, head]
            np.testing.assert_allclose(own[np.isfinite(ref)], ref[np.isfinite(ref)], atol=ATOL)
    return len(expected["attentions"])


@pytest.mark.parametrize(
    "switches",
    [{}, {"scale": False}, {"causal": True}, {"positions": False}, {"ablate": {(1, 0)}},
     {"ablate": {(0, 1), (1, 1)}, "causal": True, "scale": False}],
    ids=["default", "unscaled", "causal", "no-positions", "ablate-1-0", "mixed"],
)  # fmt: skip
def test_trace_equals_the_loops(tiny_dir, switches):
    assert compare_with_loops(tiny_dir, **switches) == 2


@pytest.mark.parametrize("activation", ["gelu", "gelu_new", "relu"])
def test_every_activation_equals_its_formula(tmp_path, activation):
    path = write_tiny_bert(tmp_path / activation, seed=3, hidden_act=activation)
    assert compare_with_loops(path, "time flies like an arrow", None) == 2


def test_three_heads_and_a_wider_head(tmp_path):
    path = write_tiny_bert(tmp_path / "wide", seed=5, d_model=12, n_heads=3, n_layers=1, d_ff=7)
    assert compare_with_loops(path, "a bank of the river", "time flies") == 1


def test_segments_and_tokens(tiny_dir):
    model = core.load_folder(tiny_dir)
    trace = model.run(TEXT, PAIR)
    assert trace.tokens == (
        "[CLS]",
        "the",
        "river",
        "bank",
        "flows",
        "[SEP]",
        "money",
        "grows",
        "[SEP]",
    )
    assert trace.segments.tolist() == [0] * 6 + [1] * 3
    assert trace.input_ids.tolist() == [2, 5, 7, 6, 9, 3, 8, 10, 3]  # rows of TINY_VOCAB


def test_the_tokenizer_says_whether_it_lowercases(model):
    """The bundled MiniLM's tokenizer.json lowercases (BertNormalizer); a normalizer without
    lowercasing, or none, does not."""
    from core.text import _lowercases

    assert model.tokenizer.lowercases
    assert model.tokenizer.encode("Bank", None, 8).tokens[1] == "bank"
    assert not _lowercases(None) and not _lowercases({"type": "NFC"})
    assert not _lowercases({"type": "BertNormalizer", "lowercase": False})
    assert _lowercases(
        {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}
    )


def test_positions_beyond_the_table_are_cut(tiny_dir):
    model = core.load_folder(tiny_dir)
    trace = model.run("the bank " * 20)
    assert trace.truncated and trace.n_tokens == 16 and trace.n_pieces == 42


def test_a_config_with_8192_positions_is_read_to_512_pieces_everywhere(tmp_path):
    """max_position_embeddings comes from the checkpoint: 8,192 would let a 20,000-character text
    through as 8,192 pieces, and the (L, H, n, n) block of a real model would need ~39 GB."""
    from core.text import MAX_PIECES

    model = core.load_folder(write_tiny_bert(tmp_path / "long", max_positions=8192))
    assert model.dims.max_positions == 8192 and model.max_positions == MAX_PIECES == 512
    text = "the bank " * 2000  # 4,000 pieces in 18,000 characters (under MAX_CHARS)
    trace = model.run(text, "money " * 100)
    assert trace.truncated and trace.n_pieces == 4103
    assert trace.n_tokens == 512 and trace.attentions.shape == (2, 2, 512, 512)
    assert model.encode(text, None).input_ids[-1] == model.tokenizer.sep_id
    assert model.position_vectors().shape == (512, 8)
    assert (
        scaling_masking.padded_run(model, "the bank", 10_000, masked=True).attentions.shape[-1]
        == 512
    )
    assert context.static_sentence(model, text).vectors.shape == (512, 8)
    short = core.load_folder(write_tiny_bert(tmp_path / "short", max_positions=40))
    assert short.max_positions == 40 and short.run(text).n_tokens == 40  # the table, if smaller


def test_exports_with_prefix_and_legacy_norm_names_load_identically(tmp_path, tiny_dir):
    legacy = write_tiny_bert(tmp_path / "legacy", prefix="bert.", legacy_norm_names=True)
    plain, old = core.load_folder(tiny_dir), core.load_folder(legacy)
    np.testing.assert_array_equal(plain.run(TEXT).hidden_states, old.run(TEXT).hidden_states)


def test_name_map_is_explicit():
    expected = {
        "bert.embeddings.word_embeddings.weight": "embeddings.word",
        "embeddings.position_embeddings.weight": "embeddings.position",
        "embeddings.token_type_embeddings.weight": "embeddings.segment",
        "embeddings.LayerNorm.gamma": "embeddings.norm.weight",
        "embeddings.LayerNorm.beta": "embeddings.norm.bias",
        "encoder.layer.3.attention.self.query.weight": "layers.3.query.weight",
        "encoder.layer.3.attention.self.key.bias": "layers.3.key.bias",
        "encoder.layer.3.attention.self.value.weight": "layers.3.value.weight",
        "encoder.layer.0.attention.output.dense.weight": "layers.0.attn_out.weight",
        "encoder.layer.0.attention.output.LayerNorm.bias": "layers.0.attn_norm.bias",
        "encoder.layer.11.intermediate.dense.weight": "layers.11.ffn_in.weight",
        "encoder.layer.11.output.dense.bias": "layers.11.ffn_out.bias",
        "encoder.layer.11.output.LayerNorm.weight": "layers.11.ffn_norm.weight",
        "pooler.dense.weight": None,
        "cls.predictions.bias": None,
    }
    assert {name: hf_to_own_name(name) for name in expected} == expected


def test_loaded_tensors_are_the_file_tensors(tiny_dir):
    dims = read_config(tiny_dir)
    assert (dims.d_model, dims.n_heads, dims.d_head, dims.n_layers, dims.d_ff) == (8, 2, 4, 2, 12)
    tensors = load_weights(tiny_dir, dims)
    raw = raw_tensors(tiny_dir)
    torch.testing.assert_close(
        tensors["layers.1.value.weight"].double(),
        torch.from_numpy(raw["encoder.layer.1.attention.self.value.weight"]),
    )
    assert tensors["layers.0.ffn_in.weight"].shape == (12, 8)
    assert tensors["layers.0.ffn_out.weight"].shape == (8, 12)


def test_weight_views_are_the_checkpoint_tables(tiny_dir):
    model, raw = core.load_folder(tiny_dir), raw_tensors(tiny_dir)
    np.testing.assert_array_equal(model.word_vectors(), raw["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(
        model.position_vectors(), raw["embeddings.position_embeddings.weight"]
    )
    projections = model.attention_weights(1)
    for name, projection in (("self.query", projections.query), ("self.key", projections.key),
                             ("self.value", projections.value), ("output.dense", projections.output)):  # fmt: skip
        weight = raw[f"encoder.layer.1.attention.{name}.weight"]
        np.testing.assert_array_equal(projection.weight.numpy(), weight.astype(np.float32))
        np.testing.assert_array_equal(
            projection.bias.numpy(),
            raw[f"encoder.layer.1.attention.{name}.bias"].astype(np.float32),
        )
    assert not model.word_vectors().flags.writeable
