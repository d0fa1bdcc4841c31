"""The model registry: the bundled model, local folders, and failures that are fast and clear."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import UNREACHABLE_HUB
from safetensors.torch import load_file, save_file

import core
from core.models import (
    HubListing,
    HuggingFaceHub,
    ModelPolicy,
    files_to_fetch,
    policy_from_settings,
)
from core.weights import hf_to_own_name

DEFAULT = policy_from_settings({})  # a server whose deployer set nothing
LOCAL = policy_from_settings({"ATTENTION_EXPLORER_LOCAL_FOLDERS": "1"})  # a local user's opt-in
ANY_HUB = ModelPolicy(hub_ids=None)


# ---- a spy on the disk: what a call opened, listed or looked at --------------------------------
_disk_log: list[tuple[str, object]] | None = None


def _audit(event: str, args: tuple) -> None:
    if _disk_log is not None and event in ("open", "os.listdir", "os.scandir"):
        _disk_log.append((event, args[0]))


sys.addaudithook(_audit)  # hooks cannot be removed; this one records only while a test asks


@pytest.fixture()
def disk_reads(monkeypatch):
    """Every file opened, folder listed and path stat-ed (is_dir, is_file, exists) from here on."""
    global _disk_log
    reads: list[tuple[str, object]] = []
    for name in ("stat", "lstat"):
        real = getattr(os, name)
        monkeypatch.setattr(
            os,
            name,
            lambda path, *a, _real=real, _name=name, **k: (
                reads.append((_name, path)),
                _real(path, *a, **k),
            )[1],
        )
    _disk_log = reads
    yield reads
    _disk_log = None


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
    """The hub is a closed loopback port (conftest): the reachability check says so and nothing
    waits on the network: the cache is looked up offline, and neither the listing nor a download
    (the paths that retry for 23-47 s) is tried."""
    import huggingface_hub
    from huggingface_hub import constants

    assert constants.ENDPOINT == UNREACHABLE_HUB
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    cache_lookups, probes = [], []
    real_snapshot, real_reachable = huggingface_hub.snapshot_download, HuggingFaceHub.reachable

    def snapshot_download(*args, **kwargs):
        cache_lookups.append(kwargs.get("local_files_only"))
        return real_snapshot(*args, **kwargs)

    def reachable(self, *args, **kwargs):
        probes.append(real_reachable(self, *args, **kwargs))
        return probes[-1]

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(HuggingFaceHub, "reachable", reachable)
    monkeypatch.setattr(HuggingFaceHub, "listing", lambda *a: pytest.fail("listed the hub"))
    monkeypatch.setattr(HuggingFaceHub, "download", lambda *a: pytest.fail("downloaded"))
    with pytest.raises(core.ModelUnavailable, match="cannot reach the Hugging Face hub") as err:
        core.load_model(name, ANY_HUB)
    assert cache_lookups == [True], "the cache lookup must be offline"
    assert probes == [False], "one bounded reachability check, which failed"
    assert "\n" not in str(err.value)


def test_offline_flag_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(HuggingFaceHub, "reachable", lambda *a: pytest.fail("probed the hub"))
    with pytest.raises(core.ModelUnavailable, match="HF_HUB_OFFLINE"):
        core.load_model("bert-base-uncased", ANY_HUB)


NONSENSE = ["", "../../etc", "/etc", "/root", "/nonexistent-dir", "not a model id!", "x" * 200,
            "bert-base-uncased", "someone/huge-model", "~/.ssh", "bad\x00name"]  # fmt: skip


@pytest.mark.parametrize("name", NONSENSE)
def test_nonsense_names_are_rejected_without_reading_the_disk(name, disk_reads):
    """A server whose deployer set nothing refuses every one of them in the same words, and
    looks at nothing on its disk to decide (a subclass such as CheckpointError would mean a
    folder was read)."""
    with pytest.raises(core.ModelUnavailable) as err:
        core.load_model(name, DEFAULT)
    assert type(err.value) is core.ModelUnavailable
    assert str(err.value) == str(DEFAULT.unusable(name.strip()))
    assert disk_reads == [], f"read the disk for a refused name: {disk_reads[:3]}"


def test_the_disk_spy_sees_a_folder_being_read(minilm_copy, disk_reads):
    """The spy above can fail: loading a folder shows up in it."""
    core.load_model(str(minilm_copy), LOCAL)
    seen = {str(path) for _, path in disk_reads}
    assert str(minilm_copy / "config.json") in seen
    assert any(event == "open" for event, _ in disk_reads)


@pytest.mark.parametrize("name", ["../../etc", "/etc", "/root", "/nonexistent-dir", "/etc/passwd",
                                  "~", "bad\x00name", "."])  # fmt: skip
def test_with_folders_on_every_unusable_folder_gets_the_same_message(name, tmp_path):
    """Whether the folder exists or not, is a file or is unreadable: one message, so a visitor
    cannot map the server's disk (before: /etc said "no config.json", a missing one did not)."""
    with pytest.raises(core.ModelUnavailable) as err:
        core.load_model(name, LOCAL)
    assert type(err.value) is core.ModelUnavailable
    assert str(err.value) == str(LOCAL.unusable(name))
    assert "folders on this machine" in str(err.value)


def test_a_model_folder_without_config_gets_the_same_message(minilm_copy):
    (minilm_copy / "config.json").unlink()
    with pytest.raises(core.ModelUnavailable) as err:
        core.load_model(str(minilm_copy), LOCAL)
    assert str(err.value) == str(LOCAL.unusable(str(minilm_copy)))


def test_the_default_server_refuses_a_real_model_folder(minilm_copy, disk_reads):
    with pytest.raises(core.ModelUnavailable) as err:
        core.load_model(str(minilm_copy), DEFAULT)
    assert str(err.value) == str(DEFAULT.unusable(str(minilm_copy)))
    assert "no hub id and no folders" in str(err.value)
    assert disk_reads == []


def test_local_directory_loads_and_matches_bundled(model, minilm_copy):
    local = core.load_model(str(minilm_copy), LOCAL)
    assert (local.run("the bank").hidden_states == model.run("the bank").hidden_states).all()


def test_missing_weights_is_a_clear_error(minilm_copy):
    (minilm_copy / "model.safetensors").unlink()
    with pytest.raises(core.CheckpointError, match="no model.safetensors or pytorch_model.bin"):
        core.load_model(str(minilm_copy), LOCAL)


def test_corrupt_weights_is_a_clear_error(minilm_copy):
    (minilm_copy / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(core.CheckpointError, match="cannot read the weights"):
        core.load_model(str(minilm_copy), LOCAL)


def test_missing_config_is_a_clear_error_for_a_folder_the_program_chose(minilm_copy):
    (minilm_copy / "config.json").unlink()
    with pytest.raises(core.CheckpointError, match="no config.json"):
        core.load_folder(minilm_copy)


def test_wrong_shape_names_the_tensor(minilm_copy):
    config = json.loads((minilm_copy / "config.json").read_text())
    config["intermediate_size"] = 1000
    (minilm_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(core.CheckpointError, match="layers.0.ffn_in.weight"):
        core.load_model(str(minilm_copy), LOCAL)


def test_missing_tensor_is_named(minilm_copy):
    tensors = load_file(str(minilm_copy / "model.safetensors"))
    del tensors["encoder.layer.3.attention.self.key.weight"]
    save_file(tensors, str(minilm_copy / "model.safetensors"))
    with pytest.raises(core.CheckpointError, match="layers.3.key.weight"):
        core.load_model(str(minilm_copy), LOCAL)


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
    loaded = core.load_model(str(minilm_copy), LOCAL)
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
PUBLIC = policy_from_settings({"ATTENTION_EXPLORER_PUBLIC": "1"})
REVISION = "c0ffee" * 6 + "c0ff"  # the commit the fake hub lists


class FakeHub:
    """A hub in memory: lists sizes at one commit, and 'downloads' by copying a model folder."""

    def __init__(self, source, sizes: dict[str, int | None], reachable: bool = True):
        self.source, self.sizes, self._reachable = source, sizes, reachable
        self.downloads: list[str] = []
        self.revisions: list[str] = []

    def cached(self, repo_id, cache_dir):
        folder = self._folder(repo_id, cache_dir)
        return folder if folder and folder.is_dir() else None

    def reachable(self):
        return self._reachable

    def listing(self, repo_id):
        return HubListing(REVISION, dict(self.sizes))

    def download(self, repo_id, revision, files, cache_dir):
        self.downloads.append(repo_id)
        self.revisions.append(revision)
        folder = self._folder(repo_id, cache_dir)
        shutil.copytree(self.source, folder, ignore=shutil.ignore_patterns("1_Pooling"))
        return folder

    @staticmethod
    def _folder(repo_id, cache_dir):
        if cache_dir is None:
            return None
        return cache_dir / ("models--" + repo_id.replace("/", "--")) / "snapshots" / "main"


SMALL = {"config.json": 600, "model.safetensors": 90_000_000, "vocab.txt": 230_000}


def test_policy_defaults_are_safe_and_opt_ins_are_explicit():
    assert DEFAULT.local_folders is False and DEFAULT.hub_ids == frozenset()
    assert ModelPolicy() == DEFAULT  # a caller of core.load_model gets the safe policy too
    assert LOCAL.local_folders and LOCAL.hub_ids == frozenset()
    assert policy_from_settings({"ATTENTION_EXPLORER_HUB_MODELS": "*"}).hub_ids is None
    assert PUBLIC.local_folders is False and PUBLIC.hub_ids == frozenset()
    assert PUBLIC.max_download_bytes == 600_000_000
    # every server keeps its downloads in its own folder, capped in bytes: none keeps them forever
    for policy in (DEFAULT, LOCAL, PUBLIC):
        assert policy.folder_cap == 1_200_000_000
        assert policy.download_dir == Path("~/.cache/attention-explorer/hub").expanduser()
    public_opt_ins = policy_from_settings(
        {
            "ATTENTION_EXPLORER_PUBLIC": "1",
            "ATTENTION_EXPLORER_LOCAL_FOLDERS": "1",
            "ATTENTION_EXPLORER_HUB_MODELS": "*, bert-base-uncased",
        }
    )  # a public server takes only the named ids, and no folders whatever else is set
    assert not public_opt_ins.local_folders
    assert public_opt_ins.hub_ids == frozenset({"bert-base-uncased"})


def test_policy_settings_are_parsed_and_bad_numbers_fall_back():
    policy = policy_from_settings(
        {
            "ATTENTION_EXPLORER_PUBLIC": "true",
            "ATTENTION_EXPLORER_HUB_MODELS": " a/b ,c,, ",
            "ATTENTION_EXPLORER_MAX_DOWNLOAD_MB": "-5",
            "ATTENTION_EXPLORER_DOWNLOADS_MB": "three",
        }
    )
    assert policy.hub_ids == frozenset({"a/b", "c"})
    assert policy.max_download_bytes == 600_000_000 and policy.folder_cap == 1_200_000_000
    folder = policy_from_settings(
        {"ATTENTION_EXPLORER_DOWNLOADS_MB": "900", "ATTENTION_EXPLORER_DOWNLOAD_DIR": "/srv/m"}
    )
    assert folder.folder_cap == 900_000_000 and folder.download_dir == Path("/srv/m")
    capped = policy_from_settings(
        {"ATTENTION_EXPLORER_MAX_DOWNLOAD_MB": "50", "ATTENTION_EXPLORER_LOCAL_FOLDERS": "no"}
    )
    assert capped.max_download_bytes == 50_000_000 and not capped.local_folders


@pytest.mark.parametrize(
    "name", ["../../etc", "/etc", "~/.ssh", "C:\\\\Windows", "./models/x", "%2e%2e/etc"]
)
def test_public_server_refuses_folders_without_touching_the_disk(name, disk_reads):
    with pytest.raises(core.ModelUnavailable) as err:
        core.load_model(name, PUBLIC)
    assert str(err.value) == str(PUBLIC.unusable(name))
    assert "\n" not in str(err.value)
    assert disk_reads == []


def test_public_server_refuses_hub_ids_off_its_list_without_asking_the_hub(model):
    hub = FakeHub(model.model_dir, SMALL)
    hub.reachable = lambda: pytest.fail("the hub was asked about a refused id")
    with pytest.raises(core.ModelUnavailable, match="not a model this server can load"):
        core.load_model("someone/huge-model", PUBLIC, hub)
    assert hub.downloads == []


def test_a_download_over_the_cap_is_refused_before_any_byte(model, tmp_path):
    policy = ModelPolicy(hub_ids=None, max_download_bytes=100_000_000, download_dir=tmp_path)
    hub = FakeHub(model.model_dir, {**SMALL, "model.safetensors": 1_300_000_000})
    with pytest.raises(core.ModelUnavailable, match=r"1,300 MB.*at most 100 MB"):
        core.load_model("big/model", policy, hub)
    assert hub.downloads == []


def test_a_file_of_unknown_size_is_refused_not_counted_as_zero(model, tmp_path):
    policy = ModelPolicy(hub_ids=None, download_dir=tmp_path)
    hub = FakeHub(model.model_dir, {**SMALL, "model.safetensors": None})
    with pytest.raises(core.ModelUnavailable, match="how large model.safetensors"):
        core.load_model("secret/size", policy, hub)
    assert hub.downloads == []
    # a file the app would not fetch may have no size: it does not count
    hub = FakeHub(model.model_dir, {**SMALL, "flax_model.msgpack": None})
    core.load_model("other/size", policy, hub)
    assert hub.downloads == ["other/size"]


def test_the_download_asks_for_the_commit_whose_sizes_were_checked(model, tmp_path):
    hub = FakeHub(model.model_dir, SMALL)
    core.load_model(
        "a/model", ModelPolicy(hub_ids=frozenset({"a/model"}), download_dir=tmp_path), hub
    )
    assert hub.revisions == [REVISION]


def test_a_download_pinned_to_a_commit_is_found_in_the_cache_offline(tmp_path, monkeypatch):
    """huggingface_hub writes no refs/main for a download by commit hash, so its own offline
    lookup misses it; the cache lookup then takes the newest complete snapshot."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = tmp_path / "models--a--model" / "snapshots"
    partial, complete = repo / ("1" * 40), repo / REVISION
    for folder in (partial, complete):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    (complete / "model.safetensors").write_bytes(b"")
    assert HuggingFaceHub().cached("a/model", tmp_path) == complete
    assert HuggingFaceHub().cached("a/other", tmp_path) is None


def test_the_hugging_face_hub_pins_the_listed_commit_and_keeps_unknown_sizes(monkeypatch, tmp_path):
    """HuggingFaceHub itself, with huggingface_hub's two calls replaced: the listing keeps a
    missing size as None, and snapshot_download is asked for the listed commit."""
    import huggingface_hub
    from huggingface_hub import HfApi

    class Sibling:
        def __init__(self, rfilename, size):
            self.rfilename, self.size = rfilename, size

    class Info:
        sha = REVISION
        siblings = [Sibling("config.json", 600), Sibling("model.safetensors", None)]

    monkeypatch.setattr(HfApi, "model_info", lambda self, repo_id, **kwargs: Info())
    asked: list[dict] = []
    monkeypatch.setattr(
        huggingface_hub,
        "snapshot_download",
        lambda repo_id, **kwargs: asked.append(kwargs) or str(tmp_path),
    )
    listing = HuggingFaceHub().listing("a/model")
    assert listing == HubListing(REVISION, {"config.json": 600, "model.safetensors": None})
    HuggingFaceHub().download("a/model", listing.revision, ["config.json"], None)
    assert asked[0]["revision"] == REVISION and asked[0]["allow_patterns"] == ["config.json"]


def test_only_the_needed_files_are_fetched():
    sizes = {"config.json": 1, "pytorch_model.bin": 5, "model.safetensors": 4, "flax.msgpack": 9}
    assert files_to_fetch(sizes) == ["config.json", "model.safetensors"]
    assert files_to_fetch({"config.json": 1, "pytorch_model.bin": 5})[-1] == "pytorch_model.bin"
    with pytest.raises(core.ModelUnavailable, match="no model.safetensors"):
        files_to_fetch({"config.json": 1})
    # a sentence encoder's pooling files come along: they say what it was trained for
    sentence_encoder = {**sizes, "modules.json": 1, "1_Pooling/config.json": 1, "2_Dense/x": 9}
    assert files_to_fetch(sentence_encoder) == [
        "config.json", "modules.json", "1_Pooling/config.json", "model.safetensors",
    ]  # fmt: skip


def test_a_full_download_folder_deletes_the_least_recently_used_checkpoints(model, tmp_path):
    """The folder's cap counts bytes: to fit a third checkpoint, the one used least recently
    goes, and the loaded models keep working from memory."""
    checkpoint = sum(f.stat().st_size for f in model.model_dir.iterdir() if f.is_file())
    policy = ModelPolicy(
        hub_ids=frozenset({"a/one", "b/two", "c/three"}),
        max_folder_bytes=int(2.5 * checkpoint),  # room for two checkpoints, not three
        download_dir=tmp_path,
    )
    hub = FakeHub(model.model_dir, {**SMALL, "model.safetensors": checkpoint})
    first = core.load_model("a/one", policy, hub)
    core.load_model("b/two", policy, hub)
    os.utime(tmp_path / "models--a--one", (1, 1))  # a/one is the least recently used
    third = core.load_model("c/three", policy, hub)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["models--b--two", "models--c--three"]
    assert hub.downloads == ["a/one", "b/two", "c/three"]
    # Loaded models keep working: their tensors live in memory, not in the deleted files.
    assert (first.run("bank").hidden_states == third.run("bank").hidden_states).all()


def test_eviction_counts_only_model_folders_and_their_bytes(tmp_path):
    from core import downloads

    for i, name in enumerate(["models--a--x", "models--b--y", "notes", "models--c--z"]):
        (tmp_path / name).mkdir()
        (tmp_path / name / "blob").write_bytes(b"x" * 100)
        os.utime(tmp_path / name, (i, i))
    (tmp_path / "models--c--z" / "link").symlink_to(tmp_path / "models--c--z" / "blob")
    assert downloads.folder_bytes(tmp_path / "models--c--z") == 100  # a link is not a copy
    with downloads.using(tmp_path, "d/new"):
        # 300 bytes of checkpoints + 150 new, under a cap of 260: a/x and b/y go, oldest first
        assert downloads.make_room(tmp_path, "d/new", 150, 260) == ["a/x", "b/y"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models--c--z", "notes"]
    with pytest.raises(core.ModelUnavailable, match="more than this server keeps"):
        downloads.make_room(tmp_path, "e/huge", 300, 260)


def test_messages_quote_the_name_as_typed_never_a_server_path(minilm_copy, monkeypatch):
    home = minilm_copy.parent
    monkeypatch.setenv("HOME", str(home))
    (minilm_copy / "model.safetensors").unlink()
    with pytest.raises(core.CheckpointError) as err:
        core.load_model("~/minilm", LOCAL)
    message = str(err.value)
    assert message.startswith("'~/minilm': no model.safetensors")
    assert str(home) not in message and "/" not in message.replace("~/minilm", "")


def test_a_broken_tokenizer_is_named_without_its_path(minilm_copy):
    (minilm_copy / "tokenizer.json").write_text("{not json")
    (minilm_copy / "vocab.txt").unlink()
    with pytest.raises(core.CheckpointError, match="cannot read its tokenizer") as err:
        core.load_model(str(minilm_copy), LOCAL)
    message = str(err.value)
    assert message.startswith("'/") and message.endswith("…': cannot read its tokenizer")
    assert "tokenizer.json" not in message  # the library's own message quotes file paths


# ---- the real names of the other families, through a fake hub ----------------------------------
# Each repository is served as a tiny random checkpoint of its family (tests/tiny_families.py),
# rewritten into the layout that repository's files have: GPT-2's names without "transformer."
# and with its causal-mask buffers, RoBERTa's and DistilBERT's task-head exports, SmolLM2's
# rope_theta at the top of its config. The sizes are of the order the hub lists for these files;
# what the test checks is the path: allowed, listed, under the cap, fetched, read, run.
REAL_REPOS = {
    "gpt2": ("gpt2", 548_105_171, "decoder"),
    "distilgpt2": ("gpt2", 352_824_413, "decoder"),
    "roberta-base": ("roberta", 498_818_054, "encoder"),
    "distilbert-base-uncased": ("distilbert", 267_954_768, "encoder"),
    "HuggingFaceTB/SmolLM2-135M": ("llama", 269_060_552, "decoder"),
}


def _as_the_hub_exports_it(folder, repo_id: str) -> None:
    """Rename the tiny checkpoint's tensors (and config) the way the real repository has them."""
    tensors = load_file(str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    if repo_id in ("gpt2", "distilgpt2"):
        tensors = {k.removeprefix("transformer."): v for k, v in tensors.items()}
        n = config["n_positions"]
        for layer in range(config["n_layer"]):  # the causal-mask buffer old exports carry
            tensors[f"h.{layer}.attn.bias"] = torch.ones(1, 1, n, n).tril()
    elif repo_id == "roberta-base":
        tensors = {"roberta." + k: v for k, v in tensors.items()}
        tensors["lm_head.dense.weight"] = torch.zeros(config["hidden_size"], config["hidden_size"])
        tensors["roberta.embeddings.position_ids"] = torch.arange(8)[None]
    elif repo_id == "distilbert-base-uncased":
        tensors = {"distilbert." + k: v for k, v in tensors.items()}
        tensors["vocab_projector.bias"] = torch.zeros(config["vocab_size"])
    else:  # SmolLM2's config.json writes the rotary base at the top, as older Llamas did
        theta = config.pop("rope_parameters")["rope_theta"]
        config.update({"rope_theta": theta, "rope_scaling": None})
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("repo_id", list(REAL_REPOS))
def test_the_real_names_of_every_family_load_through_a_fake_hub(repo_id, tmp_path):
    from tiny_families import write_tiny_family

    from core.reference import compare, load_reference

    family, weight_bytes, kind = REAL_REPOS[repo_id]
    source = write_tiny_family(tmp_path / "source", family, seed=7, n_layers=2)
    _as_the_hub_exports_it(source, repo_id)
    sizes = {
        "config.json": 700,
        "model.safetensors": weight_bytes,
        "pytorch_model.bin": weight_bytes,
        "tokenizer.json": 1_355_256,
        "tokenizer_config.json": 3_000,
        "vocab.json": 1_042_301,
        "merges.txt": 456_318,
        "generation_config.json": 124,
    }
    hub = FakeHub(source, sizes)
    policy = policy_from_settings(
        {"ATTENTION_EXPLORER_PUBLIC": "1", "ATTENTION_EXPLORER_HUB_MODELS": repo_id,
         "ATTENTION_EXPLORER_DOWNLOAD_DIR": str(tmp_path / "downloads")}
    )  # fmt: skip
    assert files_to_fetch(sizes) == [
        "config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors",
    ]  # fmt: skip
    assert weight_bytes < policy.max_download_bytes  # every one fits the default cap
    model = core.load_model(repo_id, policy, hub)
    assert hub.downloads == [repo_id] and hub.revisions == [REVISION]
    assert (model.name, model.family, model.kind, model.n_layers) == (repo_id, family, kind, 2)
    trace = model.run("The river bank flows.")
    report = compare(load_reference(model.model_dir), trace, model)
    assert report.layers_compared == 2 and report.hidden_states_compared == 3
    assert report.max_abs_attention_diff < 1e-5
    # float32 rounding grows with the states' size: a tiny random GPT-2's states reach ~21
    # (its hidden difference was 1.1e-5 in one run, 0.7e-5 in another); relative to that, 1e-6
    scale = float(np.abs(np.asarray(trace.hidden_states)).max())
    assert report.max_abs_hidden_diff < 1e-6 * max(scale, 10.0), (report, scale)
    if kind == "decoder":
        assert report.logits_compared == trace.n_tokens and report.max_abs_logit_diff < 1e-5
        assert model.next_pieces(trace, k=3).ids.shape == (trace.n_tokens, 3)
    # a second visitor asking for it finds it in the server's folder: no second download
    assert core.load_model(repo_id, policy, hub).family == family
    assert hub.downloads == [repo_id]
    # a server that did not list it refuses it before asking the hub
    with pytest.raises(core.ModelUnavailable, match="not a model this server can load"):
        core.load_model(repo_id, PUBLIC, hub)
