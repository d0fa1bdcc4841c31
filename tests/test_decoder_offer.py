"""A real decoder a visitor may choose: distilgpt2 is offered only where the server would take it,
no page invites a visitor to load a decoder the server refuses, and the hub path works with the
files distilgpt2's repository has (vocab.json, merges.txt, tokenizer.json, its config fields)."""

from __future__ import annotations

import json

import pytest
from conftest import assert_no_exception, page_paths, run_page
from test_models import REVISION, FakeHub, _as_the_hub_exports_it

import core
from core.models import files_to_fetch, policy_from_settings
from core.weights import held_bytes, read_config
from ui import door, models

# distilgpt2's config.json as its repository ships it (sizes included).
DISTILGPT2_CONFIG = {
    "_num_labels": 1,
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "id2label": {"0": "LABEL_0"},
    "initializer_range": 0.02,
    "label2id": {"LABEL_0": 0},
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 6,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}
# The files its repository lists (bytes as the hub lists them, of this order); the app fetches
# three of them.
DISTILGPT2_FILES = {
    "config.json": 762,
    "generation_config.json": 124,
    "merges.txt": 456_318,
    "model.safetensors": 352_824_413,
    "pytorch_model.bin": 352_833_716,
    "tf_model.h5": 327_745_472,
    "flax_model.msgpack": 327_657_808,
    "rust_model.ot": 352_851_012,
    "tokenizer.json": 1_355_256,
    "vocab.json": 1_042_301,
}


@pytest.fixture()
def server(monkeypatch):
    """Set a server's settings (environment variables, as its secrets become) for one test."""

    def configure(**settings: str) -> None:
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        models.policy.clear()
        models.policy()  # read once: it sets the door's budget too

    yield configure
    for name in ("ATTENTION_EXPLORER_PUBLIC", "ATTENTION_EXPLORER_HUB_MODELS",
                 "ATTENTION_EXPLORER_MEMORY_MB", "ATTENTION_EXPLORER_LOCAL_FOLDERS",
                 "ATTENTION_EXPLORER_MAX_DOWNLOAD_MB"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    models.policy.clear()
    door.set_budget(door.budget_bytes())


def test_distilgpt2s_memory_is_its_parameters_in_float32(tmp_path):
    """82 M parameters (counted here from GPT-2's layer formula) at 4 bytes: what the picker says
    it costs, and what the door counts before reading it."""
    (tmp_path / "config.json").write_text(json.dumps(DISTILGPT2_CONFIG))
    d, vocab, positions, layers = 768, 50_257, 1_024, 6
    per_layer = (
        2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
    )
    parameters = (
        vocab * d + positions * d + layers * per_layer + 2 * d
    )  # the head is the word table
    assert parameters == 81_912_576
    assert held_bytes(read_config(tmp_path)) == 4 * parameters
    suggestion = core.SUGGESTED_MODELS["distilgpt2"]
    assert suggestion.kind == "decoder" and suggestion.held_mb == round(4 * parameters / 1e6)
    assert f"{suggestion.held_mb} MB of weights in memory" in suggestion.label
    assert f"{DISTILGPT2_FILES['model.safetensors'] / 1e6:.0f} MB download" in suggestion.label


def test_a_minilm_only_server_invites_no_decoder(server):
    server(ATTENTION_EXPLORER_PUBLIC="1")
    assert models.listed_models() == {core.BUNDLED: core.SUGGESTED_MODELS[core.BUNDLED].label}
    assert models.decoder_offer() is None
    at = run_page(page_paths()[0])
    assert_no_exception(at)
    captions = " ".join(str(c.value) for c in at.caption)
    assert "This server offers no decoder" in captions
    assert "Load a decoder" not in captions


def test_distilgpt2_is_offered_only_where_the_budget_holds_it(server):
    server(ATTENTION_EXPLORER_PUBLIC="1", ATTENTION_EXPLORER_HUB_MODELS="distilgpt2")
    held = core.SUGGESTED_MODELS["distilgpt2"].held_mb * door.MB
    assert 2 * held > door.cache_budget()  # the default 200 MB budget: the door would refuse it
    assert "distilgpt2" not in models.listed_models() and models.decoder_offer() is None
    server(ATTENTION_EXPLORER_MEMORY_MB="700")
    assert 2 * held <= door.cache_budget()
    assert "distilgpt2" in models.listed_models()
    assert models.decoder_offer() == "distilgpt2 in the Model menu"


def test_a_local_user_with_any_hub_id_is_told_how_to_load_one(server):
    server(ATTENTION_EXPLORER_HUB_MODELS="*", ATTENTION_EXPLORER_LOCAL_FOLDERS="1")
    assert "GPT-2 or Llama-family checkpoint" in models.decoder_offer()
    assert "a folder" in models.decoder_offer()


def test_distilgpt2s_repository_layout_loads_through_the_fake_hub(tmp_path):
    """Its files as the hub lists them, a tiny checkpoint in its tensor names, its config's
    fields (sizes made tiny), vocab.json and merges.txt beside tokenizer.json: the app fetches
    config.json, tokenizer.json and model.safetensors, and cuts text as GPT-2's own slow
    tokenizer does from vocab.json and merges.txt."""
    from tiny_families import write_tiny_family
    from transformers import GPT2Tokenizer

    # GPT-2 widens its feed-forward 4 times, as distilgpt2 does (its config names no n_inner)
    source = write_tiny_family(tmp_path / "source", "gpt2", seed=11, n_layers=2, d_ff=4 * 32)
    tiny = json.loads((source / "config.json").read_text())
    sizes = {k: tiny[k] for k in ("n_embd", "n_head", "n_layer", "n_positions", "vocab_size")}
    config = {**DISTILGPT2_CONFIG, **sizes, "n_ctx": tiny["n_positions"]}
    (source / "config.json").write_text(json.dumps(config))
    _as_the_hub_exports_it(source, "distilgpt2")
    bpe = json.loads((source / "tokenizer.json").read_text())["model"]
    (source / "vocab.json").write_text(json.dumps(bpe["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in bpe["merges"]]
    (source / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (source / "tokenizer_config.json").unlink(missing_ok=True)  # distilgpt2 ships none
    assert files_to_fetch(DISTILGPT2_FILES) == [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
    ]

    hub = FakeHub(source, DISTILGPT2_FILES)
    policy = policy_from_settings(
        {"ATTENTION_EXPLORER_PUBLIC": "1", "ATTENTION_EXPLORER_HUB_MODELS": "distilgpt2",
         "ATTENTION_EXPLORER_DOWNLOAD_DIR": str(tmp_path / "downloads")}
    )  # fmt: skip
    model = core.load_model("distilgpt2", policy, hub)
    assert hub.downloads == ["distilgpt2"] and hub.revisions == [REVISION]
    assert (model.family, model.kind, model.n_layers) == ("gpt2", "decoder", 2)
    text = "the river bank flows past the old mill"
    slow = GPT2Tokenizer(str(source / "vocab.json"), str(source / "merges.txt"))
    trace = model.run(text)
    assert trace.input_ids.tolist() == slow(text)["input_ids"]
    assert core.load_model("distilgpt2", policy, hub).family == "gpt2"
    assert hub.downloads == ["distilgpt2"]  # found in the server's folder the second time


def test_a_typed_hub_model_waits_for_load_beside_what_its_files_mean_for_memory(server):
    """The download cap counts file bytes: beside the Load button the page says what that
    means in memory, with this server's own numbers."""
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    server(ATTENTION_EXPLORER_HUB_MODELS="*", ATTENTION_EXPLORER_MAX_DOWNLOAD_MB="400")
    note = models.memory_note()
    assert "up to 400 MB" in note and "twice it for half-precision" in note
    assert f"at most {door.cache_budget() // 2 // door.MB} MB of weights" in note
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = "other"
    at.session_state["custom_model"] = "distilgpt2"
    at.run()
    assert_no_exception(at)
    assert any(b.label == "Load distilgpt2" for b in at.sidebar.button)
    assert note in " ".join(str(c.value) for c in at.sidebar.caption)
