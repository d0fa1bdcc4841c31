"""The model registry: the bundled model, local folders, and failures that are fast and clear."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
import torch
from conftest import UNREACHABLE_HUB
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
    """The hub is a closed loopback port (conftest): refused at once, never the machine's luck."""
    from huggingface_hub import constants

    assert constants.ENDPOINT == UNREACHABLE_HUB
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


# ---- what a link can make the server do --------------------------------------------------------
from core.models import (  # noqa: E402  (the tests above need none of these)
    ModelPolicy,
    evict_old_downloads,
    files_to_fetch,
    policy_from_settings,
)

PUBLIC = policy_from_settings({"ATTENTION_EXPLORER_PUBLIC": "1"})


class FakeHub:
    """A hub in memory: lists sizes, and 'downloads' by copying a real model folder."""

    def __init__(self, source, sizes: dict[str, int], reachable: bool = True):
        self.source, self.sizes, self._reachable = source, sizes, reachable
        self.downloads: list[str] = []

    def cached(self, repo_id, cache_dir):
        folder = self._folder(repo_id, cache_dir)
        return folder if folder and folder.is_dir() else None

    def reachable(self):
        return self._reachable

    def file_sizes(self, repo_id):
        return dict(self.sizes)

    def download(self, repo_id, files, cache_dir):
        self.downloads.append(repo_id)
        folder = self._folder(repo_id, cache_dir)
        shutil.copytree(self.source, folder, ignore=shutil.ignore_patterns("1_Pooling"))
        return folder

    @staticmethod
    def _folder(repo_id, cache_dir):
        if cache_dir is None:
            return None
        return cache_dir / ("models--" + repo_id.replace("/", "--")) / "snapshots" / "main"


SMALL = {"config.json": 600, "model.safetensors": 90_000_000, "vocab.txt": 230_000}


def test_public_policy_defaults():
    assert PUBLIC.local_folders is False
    assert PUBLIC.hub_ids == frozenset({"bert-base-uncased"})  # the suggested hub models
    assert PUBLIC.keep_downloads == 2 and PUBLIC.max_download_bytes == 600_000_000
    local = policy_from_settings({})
    assert local.local_folders and local.hub_ids is None and local.keep_downloads is None


def test_policy_settings_are_parsed_and_bad_numbers_fall_back():
    policy = policy_from_settings(
        {
            "ATTENTION_EXPLORER_PUBLIC": "true",
            "ATTENTION_EXPLORER_HUB_MODELS": " a/b ,c,, ",
            "ATTENTION_EXPLORER_MAX_DOWNLOAD_MB": "-5",
            "ATTENTION_EXPLORER_KEEP_DOWNLOADS": "three",
        }
    )
    assert policy.hub_ids == frozenset({"a/b", "c"})
    assert policy.max_download_bytes == 600_000_000 and policy.keep_downloads == 2
    capped = policy_from_settings({"ATTENTION_EXPLORER_MAX_DOWNLOAD_MB": "50"})
    assert capped.max_download_bytes == 50_000_000 and capped.local_folders


@pytest.mark.parametrize(
    "name", ["../../etc", "/etc", "~/.ssh", "C:\\\\Windows", "./models/x", "%2e%2e/etc"]
)
def test_public_server_refuses_folders_without_touching_the_disk(name, monkeypatch):
    def no_disk(*args, **kwargs):
        raise AssertionError("the disk was probed for a refused name")

    monkeypatch.setattr("pathlib.Path.is_dir", no_disk)
    monkeypatch.setattr("pathlib.Path.exists", no_disk)
    with pytest.raises(core.ModelUnavailable, match="loads no folders") as err:
        core.load_model(name, PUBLIC)
    assert "\n" not in str(err.value)


def test_public_server_refuses_hub_ids_off_its_list_without_asking_the_hub(model):
    hub = FakeHub(model.model_dir, SMALL)
    hub.reachable = lambda: pytest.fail("the hub was asked about a refused id")
    with pytest.raises(core.ModelUnavailable, match="not among the hub models"):
        core.load_model("someone/huge-model", PUBLIC, hub)
    assert hub.downloads == []


def test_a_download_over_the_cap_is_refused_before_any_byte(model, tmp_path):
    policy = ModelPolicy(max_download_bytes=100_000_000, download_dir=tmp_path)
    hub = FakeHub(model.model_dir, {**SMALL, "model.safetensors": 1_300_000_000})
    with pytest.raises(core.ModelUnavailable, match=r"1,300 MB.*at most 100 MB"):
        core.load_model("big/model", policy, hub)
    assert hub.downloads == []


def test_only_the_needed_files_are_fetched():
    sizes = {"config.json": 1, "pytorch_model.bin": 5, "model.safetensors": 4, "flax.msgpack": 9}
    assert files_to_fetch(sizes) == ["config.json", "model.safetensors"]
    assert files_to_fetch({"config.json": 1, "pytorch_model.bin": 5})[-1] == "pytorch_model.bin"
    with pytest.raises(core.ModelUnavailable, match="no model.safetensors"):
        files_to_fetch({"config.json": 1})


def test_a_public_server_keeps_at_most_a_few_checkpoints(model, tmp_path):
    policy = ModelPolicy(
        local_folders=False,
        hub_ids=frozenset({"a/one", "b/two", "c/three"}),
        keep_downloads=2,
        download_dir=tmp_path,
    )
    hub = FakeHub(model.model_dir, SMALL)
    first = core.load_model("a/one", policy, hub)
    core.load_model("b/two", policy, hub)
    os.utime(tmp_path / "models--a--one", (1, 1))  # a/one is the least recently used
    third = core.load_model("c/three", policy, hub)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["models--b--two", "models--c--three"]
    assert hub.downloads == ["a/one", "b/two", "c/three"]
    # Loaded models keep working: their tensors live in memory, not in the deleted files.
    assert (first.run("bank").hidden_states == third.run("bank").hidden_states).all()


def test_eviction_counts_only_model_folders(tmp_path):
    for i, name in enumerate(["models--a--x", "models--b--y", "notes", "models--c--z"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (i, i))
    assert evict_old_downloads(tmp_path, keep=2) == ["a/x", "b/y"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models--c--z", "notes"]


def test_messages_quote_the_name_as_typed_never_a_server_path(minilm_copy, monkeypatch):
    home = minilm_copy.parent
    monkeypatch.setenv("HOME", str(home))
    (minilm_copy / "config.json").unlink()
    with pytest.raises(core.CheckpointError) as err:
        core.load_model("~/minilm")
    message = str(err.value)
    assert message.startswith("'~/minilm': no config.json")
    assert str(home) not in message and "/" not in message.replace("~/minilm", "")


def test_a_broken_tokenizer_is_named_without_its_path(minilm_copy):
    (minilm_copy / "tokenizer.json").write_text("{not json")
    (minilm_copy / "vocab.txt").unlink()
    with pytest.raises(core.CheckpointError, match="cannot read its tokenizer") as err:
        core.load_model(str(minilm_copy))
    message = str(err.value)
    assert message.startswith("'/") and message.endswith("…': cannot read its tokenizer")
    assert "tokenizer.json" not in message  # the library's own message quotes file paths
