"""The own encoder against transformers' BertModel (eager attention), layer by layer, to 1e-5.

Every comparison asserts how many layers it compared: with the default `sdpa` attention
transformers returns no attention weights at all, and an empty comparison must fail loudly.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tiny_bert import write_tiny_bert

import core
from core.reference import compare, load_reference, reference_outputs

TOLERANCE = 1e-5


def assert_parity(model: core.Transformer, reference, text: str, pair: str | None = None) -> None:
    trace = model.run(text, pair)
    attentions, hidden_states = reference_outputs(reference, trace)
    assert len(attentions) == model.n_layers, "the reference returned no attention weights"
    assert len(hidden_states) == model.n_layers + 1
    for layer, ref in enumerate(attentions):
        torch.testing.assert_close(torch.from_numpy(np.array(trace.attentions[layer])),
                                   torch.from_numpy(ref), atol=TOLERANCE, rtol=0,
                                   msg=lambda m, layer=layer: f"attention of layer {layer}: {m}")  # fmt: skip
    for index, ref in enumerate(hidden_states):
        torch.testing.assert_close(torch.from_numpy(np.array(trace.hidden_states[index])),
                                   torch.from_numpy(ref), atol=TOLERANCE, rtol=0,
                                   msg=lambda m, index=index: f"hidden state {index}: {m}")  # fmt: skip


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A seeded random 3-layer BERT (tests/tiny_bert.py), with a vocab.txt-only tokenizer."""
    return write_tiny_bert(
        tmp_path_factory.mktemp("tiny-bert"),
        d_model=48, n_heads=4, n_layers=3, d_ff=96, max_positions=64,
    )  # fmt: skip


@pytest.fixture(scope="module")
def reference(model):
    return load_reference(model.model_dir)


def test_tiny_random_bert_matches(tiny_model_dir):
    model = core.load_folder(tiny_model_dir)
    reference = load_reference(tiny_model_dir)
    assert model.n_layers == 3
    assert_parity(model, reference, "the river bank flows", "money grows")


def test_tiny_random_bert_long_input_is_cut_to_its_positions(tiny_model_dir):
    model = core.load_folder(tiny_model_dir)
    trace = model.run("the bank " * 100)
    assert trace.truncated and trace.n_tokens == 64
    assert_parity(model, load_reference(tiny_model_dir), "the bank " * 100)


def test_bundled_minilm_single_sentence(model, reference):
    assert_parity(model, reference, "The river bank flooded after the storm.")


def test_bundled_minilm_sentence_pair(model, reference):
    assert_parity(model, reference, "Time flies like an arrow.", "Fruit flies like a banana.")


def test_bundled_minilm_512_tokens(model, reference):
    text = " ".join(f"word{i} bank" for i in range(400))
    trace = model.run(text)
    assert trace.truncated and trace.n_tokens == 512
    assert_parity(model, reference, text)


def test_parity_report_counts_layers(model, reference):
    report = compare(reference, model.run("a short check"))
    assert report.layers_compared == model.n_layers == 6
    assert report.hidden_states_compared == 7
    assert report.max_abs_attention_diff < TOLERANCE and report.max_abs_hidden_diff < TOLERANCE


def test_sdpa_reference_is_caught_by_the_layer_count(model):
    """Guard the guard: transformers' default sdpa backend returns no attention weights at all.
    The report must say so (0 layers) and the parity check must fail rather than pass on nothing.
    (If a future transformers falls back to eager here, this test says so by failing.)"""
    from transformers import BertModel

    sdpa = BertModel.from_pretrained(str(model.model_dir), attn_implementation="sdpa").eval()
    report = compare(sdpa, model.run("hello"))
    assert report.layers_compared == 0 and np.isnan(report.max_abs_attention_diff)
    assert report.hidden_states_compared == model.n_layers + 1
    with pytest.raises(AssertionError, match="no attention weights"):
        assert_parity(model, sdpa, "hello")


@pytest.mark.parametrize(
    "text, pair",
    [("The bank.", None), ("Time flies like an arrow.", "Fruit flies like a banana."),
     ("bank " * 600, "short"), ("short", "bank " * 600), ("bank " * 300, "river " * 300),
     ("I ❤️ 東京 \u202e <script>", None)],
)  # fmt: skip
def test_tokenization_matches_transformers(model, text, pair):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(model.model_dir))
    expected = hf(text, pair, truncation=True, max_length=512)
    encoded = model.encode(text, pair)
    assert list(encoded.input_ids) == expected["input_ids"]
    assert list(encoded.segments) == expected["token_type_ids"]


def test_tokenizer_json_padding_is_not_applied(model):
    config = json.loads((model.model_dir / "tokenizer.json").read_text())
    assert config["padding"] is not None, "the bundled tokenizer ships fixed padding"
    assert model.run("two words").n_tokens == 4  # [CLS] two words [SEP], no [PAD]
