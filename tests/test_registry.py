"""The model registry: the bundled model, local folders, and failures that are fast and clear."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import torch
from safetensors.torch import load_file, save_file

import core
from core.weights import hf_to_own_name


@pytest.fixture()
def minilm_copy(model, tmp_path):
    """A writable copy of the bundled model's files, to break on purpose."""
    target = tmp_path / "minilm"
    shutil.copytree(model.model_dir, target, ignore=shutil.ignore_patterns("1_Pooling"))
    return target


def test_bundled_model_dimensions(model):
    assert model.name == "minilm"
    assert (model.n_layers, model.n_heads, model.d_model, model.d_head, model.max_positions) == (
        6,
        12,
        384,
        32,
        512,
    )


@pytest.mark.parametrize("name", ["bert-base-uncased", "google-bert/bert-base-cased"])
def test_unreachable_hub_model_fails_fast(name, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.monotonic()
    with pytest.raises(core.ModelUnavailable, match="reach|cache|no model") as err:
        core.load_model(name)
    elapsed = time.monotonic() - start
    assert elapsed < 2.0, f"took {elapsed:.1f} s"
    assert "\n" not in str(err.value)


def test_offline_flag_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(core.ModelUnavailable, match="HF_HUB_OFFLINE"):
        core.load_model("bert-base-uncased")


@pytest.mark.parametrize("name", ["", "../../etc", "not a model id!", "x" * 200])
def test_nonsense_names_are_rejected(name):
    with pytest.raises(core.ModelUnavailable):
        core.load_model(name)


def test_local_directory_loads_and_matches_bundled(model, minilm_copy):
    local = core.load_model(str(minilm_copy))
    assert (local.run("the bank").hidden_states == model.run("the bank").hidden_states).all()


def test_missing_weights_is_a_clear_error(minilm_copy):
    (minilm_copy / "model.safetensors").unlink()
    with pytest.raises(core.CheckpointError, match="no model.safetensors or pytorch_model.bin"):
        core.load_model(str(minilm_copy))


def test_corrupt_weights_is_a_clear_error(minilm_copy):
    (minilm_copy / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(core.CheckpointError, match="cannot read the weights"):
        core.load_model(str(minilm_copy))


def test_missing_config_is_a_clear_error(minilm_copy):
    (minilm_copy / "config.json").unlink()
    with pytest.raises(core.CheckpointError, match="no config.json"):
        core.load_model(str(minilm_copy))


def test_wrong_shape_names_the_tensor(minilm_copy):
    config = json.loads((minilm_copy / "config.json").read_text())
    config["intermediate_size"] = 1000
    (minilm_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(core.CheckpointError, match="layers.0.ffn_in.weight"):
        core.load_model(str(minilm_copy))


def test_missing_tensor_is_named(minilm_copy):
    tensors = load_file(str(minilm_copy / "model.safetensors"))
    del tensors["encoder.layer.3.attention.self.key.weight"]
    save_file(tensors, str(minilm_copy / "model.safetensors"))
    with pytest.raises(core.CheckpointError, match="layers.3.key.weight"):
        core.load_model(str(minilm_copy))


def test_legacy_names_and_pytorch_bin(model, minilm_copy):
    """A `bert.`-prefixed pytorch_model.bin with LayerNorm.gamma/beta loads to the same model."""
    tensors = load_file(str(minilm_copy / "model.safetensors"))
    legacy = {
        "bert."
        + name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): t
        for name, t in tensors.items()
    }
    legacy["cls.predictions.bias"] = torch.zeros(3)  # a task head the encoder ignores
    (minilm_copy / "model.safetensors").unlink()
    torch.save(legacy, minilm_copy / "pytorch_model.bin")
    loaded = core.load_model(str(minilm_copy))
    assert (
        loaded.run("legacy names").hidden_states == model.run("legacy names").hidden_states
    ).all()


@pytest.mark.parametrize(
    "hf_name, own",
    [("bert.embeddings.LayerNorm.gamma", "embeddings.norm.weight"),
     ("encoder.layer.11.attention.output.dense.bias", "layers.11.attn_out.bias"),
     ("encoder.layer.2.output.LayerNorm.beta", "layers.2.ffn_norm.bias"),
     ("pooler.dense.weight", None), ("embeddings.position_ids", None)],
)  # fmt: skip
def test_name_map(hf_name, own):
    assert hf_to_own_name(hf_name) == own
