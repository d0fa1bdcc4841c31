"""Five families, one forward path, each against transformers on a tiny random checkpoint.

Every checkpoint is built here with transformers (tests/tiny_families.py), saved in the hub
layout with its own tokenizer.json, and loaded through the app's loader (core.load_model with a
policy that allows folders, the path a local user takes). Every comparison asserts how many
layers, states and positions it compared: transformers' default sdpa attention returns no
attention weights, and an empty comparison must fail, not pass.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from tiny_families import load_reference, write_tiny_family
from torch.nn import functional as F

import core
from core import inside_layer, words
from core.models import policy_from_settings
from core.reference import compare, reference_logits, reference_outputs
from core.text import PieceTokenizer, readable_piece
from core.transformer import Transformer
from core.weights import load_weights, read_config

TOLERANCE = 1e-5
LOCAL = policy_from_settings({"ATTENTION_EXPLORER_LOCAL_FOLDERS": "1"})
TEXT, PAIR = "The river bank flows, unbelievable!", "money grows"
N_LAYERS = 3
# (family, extra sizes): Llama with grouped key/value heads, tied and untied heads, a head width
# that is not d_model / n_heads, and SmolLM2's byte-level tokenizer.
VARIANTS = {
    "bert": ("bert", {}),
    "roberta": ("roberta", {}),
    "distilbert": ("distilbert", {}),
    "gpt2": ("gpt2", {}),
    "llama": ("llama", {"n_kv_heads": 2}),
    "llama-untied-wide-heads": ("llama", {"n_kv_heads": 1, "tied": False, "d_head": 12}),
    "smollm2-like": ("llama", {"n_kv_heads": 2, "llama_tokenizer": "byte_level"}),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """name -> (family, folder), each built once per module, when a test first asks."""
    built: dict[str, tuple[str, object]] = {}

    def get(name: str):
        if name not in built:
            family, extra = VARIANTS[name]
            folder = tmp_path_factory.mktemp(name)
            write_tiny_family(folder, family, seed=len(built) + 1, n_layers=N_LAYERS, **extra)
            built[name] = (family, folder)
        return built[name]

    return get


def loaded(checkpoints, name: str) -> tuple[str, Transformer, object]:
    family, folder = checkpoints(name)
    return family, core.load_model(str(folder), LOCAL), folder


def assert_close(ours, expected, what: str) -> None:
    # 1e-5 absolute, and 1e-5 of the value itself: a pre-norm decoder's hidden states grow to
    # ~10 along the residual stream, where float32 sums in another order differ by ~1e-5
    # (seen once: 1.45e-5 at 7.3). A sign, an axis or a transpose wrong is off by the values.
    torch.testing.assert_close(
        torch.as_tensor(np.asarray(ours, dtype=np.float32)),
        torch.as_tensor(np.asarray(expected, dtype=np.float32)),
        atol=TOLERANCE,
        rtol=TOLERANCE,
        msg=lambda m: f"{what}: {m}",
    )


def assert_parity(model: Transformer, reference, trace: core.Trace) -> None:
    attentions, hidden_states = reference_outputs(reference, trace)
    assert len(attentions) == model.n_layers == N_LAYERS, "the reference returned no attention"
    assert len(hidden_states) == model.n_layers + 1
    for layer, expected in enumerate(attentions):
        assert_close(trace.attentions[layer], expected, f"attention of layer {layer}")
    for index, expected in enumerate(hidden_states):
        assert_close(trace.hidden_states[index], expected, f"hidden state {index}")
    if model.is_decoder:
        expected_logits = reference_logits(reference, trace)
        assert expected_logits is not None and expected_logits.shape == (
            trace.n_tokens,
            model.dims.vocab_size,
        )
        with torch.inference_mode():
            own = model.logits(torch.from_numpy(np.array(trace.hidden_states[-1])))
        assert_close(own, expected_logits, "next-piece logits")


# ---- 1. parity, every family ------------------------------------------------------------------
@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_family_matches_transformers(checkpoints, name):
    family, model, folder = loaded(checkpoints, name)
    assert model.family == family and model.n_layers == N_LAYERS
    reference = load_reference(folder, family)
    for text, pair in ((TEXT, None), (TEXT, PAIR), ("東京 ❤️ \u202e <script>", None)):
        trace = model.run(text, pair)
        assert trace.kind == model.kind == ("decoder" if family in ("gpt2", "llama") else "encoder")
        assert trace.options.causal is model.is_decoder  # a decoder is causal by nature
        assert_parity(model, reference, trace)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_long_input_is_cut_to_the_positions_and_still_matches(checkpoints, name):
    family, model, folder = loaded(checkpoints, name)
    trace = model.run("the bank of the river " * 40)
    assert trace.truncated and trace.n_tokens == model.max_positions == 64
    assert_parity(model, load_reference(folder, family), trace)


def test_the_llama_variants_are_what_they_claim(checkpoints):
    _, gqa, _ = loaded(checkpoints, "llama")
    assert (gqa.n_heads, gqa.n_kv_heads, gqa.d_head) == (4, 2, 8)
    assert gqa.layers[0].attention.key.weight.shape == (2 * 8, 32)  # fewer key heads
    assert gqa.head_weight is gqa.word_embeddings  # tied: the table is the head
    _, wide, _ = loaded(checkpoints, "llama-untied-wide-heads")
    assert (wide.n_heads, wide.n_kv_heads, wide.d_head) == (4, 1, 12)
    assert wide.layers[0].attention.query.weight.shape == (4 * 12, 32)
    assert wide.head_weight is not wide.word_embeddings
    trace = wide.run(TEXT)
    # one key/value head serves all four query heads: its keys and values repeat
    np.testing.assert_array_equal(trace.keys[:, 0], trace.keys[:, 3])
    np.testing.assert_array_equal(trace.values[:, 1], trace.values[:, 2])
    assert trace.queries.shape == (N_LAYERS, 4, trace.n_tokens, 12)


def test_parity_report_compares_every_layer_and_the_logits(checkpoints):
    family, model, folder = loaded(checkpoints, "gpt2")
    trace = model.run(TEXT)
    report = compare(load_reference(folder, family), trace, model)
    assert report.layers_compared == N_LAYERS and report.hidden_states_compared == N_LAYERS + 1
    assert report.logits_compared == trace.n_tokens
    assert max(report.max_abs_attention_diff, report.max_abs_hidden_diff) < TOLERANCE
    assert report.max_abs_logit_diff < TOLERANCE


def test_sdpa_reference_is_caught_by_the_layer_count(checkpoints):
    import transformers

    _, model, folder = loaded(checkpoints, "llama")
    sdpa = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="sdpa")
    report = compare(sdpa.eval(), model.run(TEXT), model)
    assert report.layers_compared == 0 and np.isnan(report.max_abs_attention_diff)
    with pytest.raises(AssertionError, match="no attention"):
        assert_parity(model, sdpa.eval(), model.run(TEXT))


# ---- 2. the switches, inside a decoder ---------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_removed_positions_equal_transformers_without_positions(checkpoints, name):
    """Llama: no rotation = every position at angle 0 (position_ids all 0). GPT-2: the input
    with wpe[0] taken off, fed at position 0 everywhere, adds no position at all."""
    family, model, folder = loaded(checkpoints, name)
    reference = load_reference(folder, family)
    trace = model.run(TEXT, positions=False)
    ids = torch.from_numpy(np.array(trace.input_ids))[None]  # (1, n)
    zeros = torch.zeros_like(ids)
    with torch.inference_mode():
        if family == "gpt2":
            embeds = reference.transformer.wte(ids) - reference.transformer.wpe(zeros)
            out = reference(inputs_embeds=embeds, position_ids=zeros, output_attentions=True)
        else:
            out = reference(input_ids=ids, position_ids=zeros, output_attentions=True)
    assert len(out.attentions) == N_LAYERS
    for layer, expected in enumerate(out.attentions):
        assert_close(trace.attentions[layer], expected[0], f"attention of layer {layer}")
    assert_close(model.logits(torch.tensor(trace.hidden_states[-1])), out.logits[0], "logits")
    assert not np.allclose(trace.attentions, model.run(TEXT).attentions, atol=1e-3)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_removed_head_equals_transformers_with_its_output_columns_zeroed(checkpoints, name):
    family, model, folder = loaded(checkpoints, name)
    reference = load_reference(folder, family)
    layer, head = 1, 2
    d_head = model.d_head
    columns = slice(head * d_head, (head + 1) * d_head)
    with torch.no_grad():  # W_O reads the concatenated heads: zero the columns of one head
        if family == "gpt2":
            reference.transformer.h[layer].attn.c_proj.weight[columns, :] = 0.0  # Conv1D (in, out)
        else:
            reference.model.layers[layer].self_attn.o_proj.weight[:, columns] = 0.0
    trace = model.run(TEXT, ablate={(layer, head)})
    assert_parity(model, reference, trace)
    assert not np.allclose(trace.hidden_states[-1], model.run(TEXT).hidden_states[-1], atol=1e-3)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_removing_a_decoders_causal_mask_and_its_scaling(checkpoints, name):
    _, model, _ = loaded(checkpoints, name)
    causal, open_ = model.run(TEXT), model.run(TEXT, causal=False)
    n = causal.n_tokens
    assert causal.options.causal and not open_.options.causal
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert (causal.attentions[..., future] == 0).all()  # masked: exactly zero weight
    assert (open_.attentions[..., future] > 0).all()  # unmasked: every token sees the future
    np.testing.assert_allclose(open_.attentions.sum(-1), 1.0, atol=1e-5)
    # layer 0 reads the same input either way: the last row saw everything already
    np.testing.assert_allclose(open_.attentions[0, :, -1], causal.attentions[0, :, -1], atol=1e-6)
    assert np.isneginf(causal.layer_scores(0)[:, future]).all()
    assert np.isfinite(open_.layer_scores(0)).all()
    unscaled = model.run(TEXT, scale=False)
    q, k = unscaled.queries[0, 1], unscaled.keys[0, 1]  # (n, d_head)
    expected = np.where(future, -np.inf, q.astype(np.float64) @ k.T.astype(np.float64))
    np.testing.assert_allclose(unscaled.head_scores(0, 1), expected, atol=1e-4)


def test_an_encoder_is_not_causal_unless_asked(checkpoints):
    _, model, _ = loaded(checkpoints, "roberta")
    assert not model.run(TEXT).options.causal and model.run(TEXT, causal=True).options.causal


# ---- 3. the next word piece --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt2", "llama", "smollm2-like"])
def test_next_pieces_are_transformers_top_k(checkpoints, name):
    family, model, folder = loaded(checkpoints, name)
    trace = model.run(TEXT)
    expected = torch.from_numpy(reference_logits(load_reference(folder, family), trace))
    log_probs = torch.log_softmax(expected.double(), dim=-1)  # (n, vocab)
    top = model.next_pieces(trace, k=5)
    assert top.positions == tuple(range(trace.n_tokens)) and top.ids.shape == (trace.n_tokens, 5)
    for position in range(trace.n_tokens):
        ranked = torch.argsort(log_probs[position], descending=True)[:5]
        assert set(top.ids[position].tolist()) == set(ranked.tolist()), position
        np.testing.assert_allclose(
            top.log_probabilities[position], log_probs[position, top.ids[position]], atol=1e-5
        )
    assert (np.diff(top.probabilities, axis=1) <= 0).all()  # most likely first
    assert top.tokens[0][0] == model.tokenizer.token_of(int(top.ids[0, 0]))
    last = model.next_pieces(trace, k=3, positions=[trace.n_tokens - 1])
    assert last.positions == (trace.n_tokens - 1,)
    np.testing.assert_array_equal(last.ids[0], top.ids[-1, :3])


def test_an_encoder_has_no_next_piece_head(checkpoints):
    _, model, _ = loaded(checkpoints, "bert")
    with pytest.raises(ValueError, match="encoder"):
        model.next_pieces(model.run(TEXT))


def test_the_readout_never_holds_every_positions_scores(checkpoints, monkeypatch):
    """Scores are read in chunks of LOGIT_CHUNK positions: (n, vocab) is never built."""
    import core.transformer as transformer

    _, model, _ = loaded(checkpoints, "gpt2")
    monkeypatch.setattr(transformer, "LOGIT_CHUNK", 4)
    widths = []
    real = Transformer.logits

    def spy(self, hidden):
        widths.append(hidden.shape[0])
        return real(self, hidden)

    monkeypatch.setattr(Transformer, "logits", spy)
    trace = model.run(TEXT)
    model.next_pieces(trace)
    assert max(widths) == 4 and sum(widths) == trace.n_tokens


# ---- 4. gradients through the one path ----------------------------------------------------------
def _float64_model(folder) -> Transformer:
    dims = read_config(folder)
    tensors = {name: t.double() for name, t in load_weights(folder, dims).items()}
    tokenizer = PieceTokenizer(folder, wordpiece_specials=dims.arch.wordpiece_specials)
    return Transformer("tiny64", folder, dims, tensors, tokenizer)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_gradients_equal_transformers_autograd(checkpoints, name):
    """d(target)/d(input word vectors): for a decoder the log-probability of a chosen next piece
    at the last position, for an encoder a fixed random projection of the last hidden state."""
    family, folder = checkpoints(name)
    ours = _float64_model(folder)
    reference = load_reference(folder, family, torch.float64)
    trace = core.load_folder(folder).run(TEXT, PAIR)
    ids = torch.from_numpy(np.array(trace.input_ids))
    segments = torch.from_numpy(np.array(trace.segments))
    target_piece = int(ids[3])
    projection = torch.randn(trace.n_tokens, ours.d_model, generator=torch.Generator().manual_seed(0),
                             dtype=torch.float64)  # fmt: skip

    def own_target(word_vectors: torch.Tensor, **switches) -> torch.Tensor:
        last = ours.forward_from_word_vectors(word_vectors, segments, **switches)  # (1, n, d)
        if ours.is_decoder:
            return torch.log_softmax(ours.logits(last[0, -1]), dim=-1)[target_piece]
        return (last[0] * projection).sum()

    def reference_target(word_vectors: torch.Tensor) -> torch.Tensor:
        inputs = {"inputs_embeds": word_vectors}
        if family == "bert":
            inputs["token_type_ids"] = segments[None]
        out = reference(**inputs)
        if ours.is_decoder:
            return torch.log_softmax(out.logits[0, -1], dim=-1)[target_piece]
        return (out.last_hidden_state[0] * projection).sum()

    start = ours.word_embeddings[ids][None].clone()  # (1, n, d): the rows of the pieces
    own_vectors = start.clone().requires_grad_(True)
    (own_grad,) = torch.autograd.grad(own_target(own_vectors), own_vectors)
    ref_vectors = start.clone().requires_grad_(True)
    (ref_grad,) = torch.autograd.grad(reference_target(ref_vectors), ref_vectors)
    scale = float(own_grad.abs().max())
    assert scale > 1e-6  # a gradient that is there
    if family != "llama":
        torch.testing.assert_close(own_grad, ref_grad, atol=1e-10 * scale, rtol=0)
    else:
        # transformers' Llama computes its RMSNorm, rotary angles and softmax in float32 even in
        # a float64 model (modeling_llama.py: .to(torch.float32), dtype=torch.float32), so the
        # reference holds float32's ~1e-7 relative error; finite differences check ours in full.
        torch.testing.assert_close(own_grad, ref_grad, atol=1e-5 * scale, rtol=0)
        step = 1e-6
        for row, col in ((1, 3), (trace.n_tokens // 2, 10), (trace.n_tokens - 1, 7)):
            moved = [start.clone(), start.clone()]
            moved[0][0, row, col] += step
            moved[1][0, row, col] -= step
            with torch.no_grad():
                numeric = (own_target(moved[0]) - own_target(moved[1])) / (2 * step)
            assert abs(float(numeric) - float(own_grad[0, row, col])) < 1e-7 * max(scale, 1.0)
    # checkpointing recomputes each layer in the backward pass: the very same gradient
    again = start.clone().requires_grad_(True)
    (checkpointed,) = torch.autograd.grad(own_target(again, checkpointed=True), again)
    torch.testing.assert_close(checkpointed, own_grad, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", ["gpt2", "llama", "roberta"])
def test_the_differentiable_pass_is_the_run(checkpoints, name):
    """forward_from_word_vectors and run() share one path: equal outputs under every switch,
    and no autograd record unless the input asks for one."""
    _, model, _ = loaded(checkpoints, name)
    for switches in ({}, {"scale": False}, {"causal": not model.is_decoder},
                     {"positions": False}, {"ablate": {(0, 1), (2, 3)}}):  # fmt: skip
        trace = model.run(TEXT, **switches)
        word_vectors = torch.tensor(trace.static)[None]  # (1, n, d)
        last = model.forward_from_word_vectors(
            word_vectors, torch.tensor(trace.segments), **switches
        )
        assert not last.requires_grad
        # the differentiable pass runs attention in torch's fused kernel (no weights kept), whose
        # summation order differs from run()'s: equal to 1e-5 of the largest value
        expected = trace.hidden_states[-1]
        size = float(np.abs(expected).max())
        np.testing.assert_allclose(last[0].numpy(), expected, rtol=0, atol=1e-5 * size)


# ---- 5. readable pieces and words --------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt2", "roberta", "llama", "smollm2-like"])
def test_bpe_pieces_are_readable_and_spell_the_text(checkpoints, name):
    """Readable pieces, marks turned back into whitespace and specials dropped, spell the text
    exactly as transformers' own tokenizer decodes the ids."""
    from transformers import AutoTokenizer

    _, model, folder = loaded(checkpoints, name)
    text = "The river bank\nflows, unbelievable! 東京 ❤️"
    trace = model.run(text)
    assert not any(mark in "".join(trace.tokens) for mark in ("Ġ", "Ċ", "▁"))
    spelled = "".join(t for t, s in zip(trace.tokens, trace.special, strict=True) if not s)
    spelled = spelled.replace("␣", " ").replace("↵", "\n")
    # pieces that are part of a character are shown as <0xNN>: put the bytes back together
    spelled = re.sub(
        r"(?:<0x[0-9A-F]{2}>)+",
        lambda m: bytes(int(b, 16) for b in re.findall(r"<0x([0-9A-F]{2})>", m.group())).decode(),
        spelled,
    )
    hf = AutoTokenizer.from_pretrained(str(folder))
    decoded = hf.decode(list(trace.input_ids), skip_special_tokens=True)
    assert spelled.strip() == decoded.strip() == text


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_bpe_pieces_merge_into_the_texts_words(checkpoints, name):
    _, model, _ = loaded(checkpoints, name)
    trace = model.run(TEXT, PAIR)
    groups = words.word_groups(trace.tokens, trace.piece_scheme, trace.special)
    labels = [
        label
        for label, group in zip(
            words.word_labels(trace.tokens, groups, trace.piece_scheme), groups, strict=True
        )
        if not trace.special[group[0]]
    ]
    assert labels == re.findall(r"\w+|[^\w\s]+", TEXT + " " + PAIR)
    assert trace.piece_scheme == "bpe"
    # the guess from the pieces alone agrees when a space mark is present
    assert words.word_groups(trace.tokens) == groups


def test_readable_piece_rules():
    assert readable_piece("Ġbank", "byte_level") == "␣bank"
    assert readable_piece("ĠĠĊ", "byte_level") == "␣␣↵"
    assert readable_piece("Ã©t", "byte_level") == "ét"  # é is two bytes: Ã ©
    assert readable_piece("âĿ", "byte_level") == "<0xE2><0x9D>"  # the start of ❤ alone
    assert (
        readable_piece("ĉ", "byte_level") == "⇥" and readable_piece("ć", "byte_level") == "<0x07>"
    )
    assert readable_piece("▁bank", "metaspace") == "␣bank"
    assert readable_piece("<0x0A>", "metaspace") == "↵"
    assert readable_piece("<0xE6>", "metaspace") == "<0xE6>"  # part of a character
    assert readable_piece("##bank", "wordpiece") == "##bank"  # WordPiece as it is


def test_word_groups_for_bpe_pieces():
    tokens = ["<s>", "␣The", "␣un", "believ", "able", ",", "␣(", "really", ")", "␣", "x", "↵"]
    groups = words.word_groups(tokens, "bpe")
    assert words.word_labels(tokens, groups, "bpe") == [
        "<s>", "The", "unbelievable", ",", "(", "really", ")", "x", "↵",
    ]  # fmt: skip
    # a WordPiece sentence is merged exactly as before
    assert words.word_groups(["[CLS]", "a", "##", "##b", "[SEP]"]) == ((0,), (1,), (2, 3), (4,))


def test_a_hostile_tokenizer_stays_text(checkpoints, tmp_path):
    """Pieces that look like markup or carry control bytes are strings in the Trace, nothing
    more: the escaping is the pages' (ui/escape.py), and nothing here interprets them."""
    import json
    import shutil

    _, folder = checkpoints("gpt2")
    hostile = tmp_path / "hostile"
    shutil.copytree(folder, hostile)
    config = json.loads((hostile / "tokenizer.json").read_text())
    markup = '<img src=x onerror="alert(1)"> é'  # an added piece is text, not byte-level
    config["added_tokens"].append({
        "id": len(config["model"]["vocab"]), "content": markup, "single_word": False,
        "lstrip": False, "rstrip": False, "normalized": False, "special": False,
    })  # fmt: skip
    config["model"]["vocab"][markup] = len(config["model"]["vocab"])
    (hostile / "tokenizer.json").write_text(json.dumps(config))
    tokenizer = PieceTokenizer(hostile, wordpiece_specials=False)
    encoded = tokenizer.encode(f"bank {markup}\x07 river", None, 64)
    assert markup.replace(" ", "␣") in encoded.tokens  # the same text, its spaces visible
    assert all(isinstance(t, str) and "\x07" not in t for t in encoded.tokens)


# ---- 6. what the loader refuses, in one line ----------------------------------------------------
def test_an_unknown_family_is_refused_in_one_line(checkpoints, tmp_path):
    import json
    import shutil

    _, folder = checkpoints("gpt2")
    other = tmp_path / "t5"
    shutil.copytree(folder, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))
    with pytest.raises(core.CheckpointError, match="model_type is 't5'") as err:
        core.load_model(str(other), LOCAL)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "name, change, message",
    [("gpt2", {"n_inner": 40}, "layers.0.ffn_in.weight"),
     ("llama", {"num_key_value_heads": 4}, "layers.0.key.weight"),
     ("llama", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "yarn"),
     ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, "inverse_layer_idx"),
     ("llama", {"num_key_value_heads": 3}, "cannot share")],
)  # fmt: skip
def test_a_config_that_disagrees_with_the_weights_names_the_tensor(
    checkpoints, tmp_path, name, change, message
):
    import json
    import shutil

    _, folder = checkpoints(name)
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(core.CheckpointError, match=re.escape(message)) as err:
        core.load_model(str(broken), LOCAL)
    assert "\n" not in str(err.value)


def test_gpt2_conv1d_weights_are_transposed_and_split(checkpoints):
    from safetensors.torch import load_file

    _, model, folder = loaded(checkpoints, "gpt2")
    raw = load_file(str(folder / "model.safetensors"))
    fused = raw["transformer.h.1.attn.c_attn.weight"]  # (d_in, 3 d_out): Conv1D
    d = model.d_model
    attention = model.attention_weights(1)
    torch.testing.assert_close(attention.query.weight, fused[:, :d].T)
    torch.testing.assert_close(attention.key.weight, fused[:, d : 2 * d].T)
    torch.testing.assert_close(attention.value.weight, fused[:, 2 * d :].T)
    torch.testing.assert_close(
        model.layers[1].ffn_in.weight, raw["transformer.h.1.mlp.c_fc.weight"].T
    )
    x = torch.randn(5, d)
    torch.testing.assert_close(F.linear(x, attention.key.weight), (x @ fused)[:, d : 2 * d])


def test_roberta_reads_its_positions_after_the_padding_row(checkpoints):
    _, model, folder = loaded(checkpoints, "roberta")
    from safetensors.torch import load_file

    table = load_file(str(folder / "model.safetensors"))["embeddings.position_embeddings.weight"]
    assert model.arch.position_offset == 2 and model.max_positions == table.shape[0] - 2 == 64
    np.testing.assert_array_equal(model.position_vectors(), table[2:66].numpy())
    # a typed "<pad>" reads the padding row and does not move the others, as in transformers
    family, _ = checkpoints("roberta")
    trace = model.run("bank <pad> river")
    assert "<pad>" in trace.tokens
    assert_parity(model, load_reference(folder, family), trace)


def test_the_differentiable_pass_reads_the_traces_positions_past_a_typed_pad(checkpoints):
    from core import saliency

    _, model, _ = loaded(checkpoints, "roberta")
    trace = model.run("bank <pad> river flows")
    pad = trace.tokens.index("<pad>")
    # the Trace's rows, by RoBERTa's rule written here: the pad reads row 1, the rest count on
    padding_idx = model.arch.position_offset - 1
    real = np.array(trace.input_ids) != padding_idx
    assert not real[pad]
    word_vectors = torch.tensor(np.array(trace.static))[None]  # (1, n, d_model)
    segments = torch.tensor(np.array(trace.segments))
    last = model.forward_from_word_vectors(
        word_vectors, segments, input_ids=torch.tensor(np.array(trace.input_ids))
    )
    np.testing.assert_allclose(last[0].numpy(), trace.hidden_states[-1], atol=1e-5)
    # the saliency methods call it through one helper that passes the Trace's ids
    through = saliency._forward(model, trace, word_vectors, segments)
    np.testing.assert_allclose(through[0].numpy(), trace.hidden_states[-1], atol=1e-5)
    # without the ids the pieces after the pad read other rows: the trap this guards
    blind = model.forward_from_word_vectors(word_vectors, segments)
    assert not np.allclose(blind[0, pad + 1 :].numpy(), trace.hidden_states[-1, pad + 1 :])


# ---- 7. what each sublayer writes, read from transformers' own modules --------------------------
# module paths inside one layer: (what attention writes after W_O, the stream between the
# sublayers, what the feed-forward writes); "<" reads a module's input instead of its output.
SUBLAYER_MODULES = {
    "bert": ("attention.output.dense", "attention.output", "output.dense"),
    "gpt2": ("attn", "<ln_2", "mlp"),
    "llama": ("self_attn", "<post_attention_layernorm", "mlp"),
}


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_sublayer_sizes_equal_transformers_own_intermediates(checkpoints, name):
    from core.reference import _layer_modules

    family, model, folder = loaded(checkpoints, name)
    reference = load_reference(folder, family)
    trace = model.run(TEXT)
    seen: dict[tuple[int, str], torch.Tensor] = {}

    def keeper(key: tuple[int, str], read_input: bool):  # noqa: ANN202
        def keep(_module, inputs, output=None) -> None:
            value = inputs[0] if read_input else output
            seen[key] = (value[0] if isinstance(value, tuple) else value)[0]  # (n, d_model)

        return keep

    handles = []
    for layer, module in enumerate(_layer_modules(reference)):
        for role, path in zip("ahf", SUBLAYER_MODULES[family], strict=True):
            target = module.get_submodule(path.lstrip("<"))
            if path.startswith("<"):
                handles.append(target.register_forward_pre_hook(keeper((layer, role), True)))
            else:
                handles.append(target.register_forward_hook(keeper((layer, role), False)))
    ids = torch.from_numpy(np.array(trace.input_ids))[None]
    with torch.inference_mode():
        reference(input_ids=ids)
    for handle in handles:
        handle.remove()
    sizes = inside_layer.sublayer_sizes(model, trace)
    assert sizes.max_rebuild_error < 1e-5 and len(seen) == 3 * N_LAYERS
    for layer in range(N_LAYERS):
        for role, ours in (("a", sizes.attention_update), ("h", sizes.mid_stream),
                           ("f", sizes.ffn_update)):  # fmt: skip
            expected = seen[(layer, role)].norm(dim=-1)  # (n,)
            assert_close(ours[layer], expected, f"‖{role}‖ of layer {layer}")


# ---- 8. the Q, K, V payoff's heads are the model's own heads ------------------------------------
# the module whose input is every head's output side by side, (n, H * d_head), just before W_O
HEADS_BEFORE_W_O = {
    "bert": "attention.output.dense",
    "gpt2": "attn.c_proj",
    "llama": "self_attn.o_proj",
}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_the_qkv_payoffs_heads_are_transformers_own(checkpoints, name):
    """Each head's cosine of the two banks is read from what transformers' own layer 0 hands
    W_O: a rotary model's turn, a decoder's mask and shared key/value heads all included."""
    from core import context, qkv
    from core.reference import _layer_modules

    family, model, folder = loaded(checkpoints, name)
    reference = load_reference(folder, family)
    pair = ("money bank grows", "river bank flows")
    word = context.shared_piece(*(model.run(text).tokens for text in pair), "bank")
    through = qkv.shared_word_through_heads(model, *pair, word)
    before_w_o = _layer_modules(reference)[0].get_submodule(HEADS_BEFORE_W_O[family])
    seen: list[torch.Tensor] = []  # (1, n, H * d_head) per sentence, in order
    handle = before_w_o.register_forward_pre_hook(lambda _m, inputs: seen.append(inputs[0]))
    for text in pair:
        with torch.inference_mode():
            reference(input_ids=torch.tensor(np.array([model.run(text).input_ids])))
    handle.remove()
    word_rows = []  # per sentence: the word's row of every head's output, (H, d_head)
    for side_by_side, index in zip(seen, (through.index_a, through.index_b), strict=True):
        heads_side_by_side = side_by_side[0, index].double().numpy()  # (H * d_head,)
        word_rows.append(heads_side_by_side.reshape(model.n_heads, -1))  # (H, d_head)
    expected = [_cosine(a, b) for a, b in zip(*word_rows, strict=True)]
    assert_close(through.cosine_by_head, expected, f"{family}: each head's cosine of the banks")
