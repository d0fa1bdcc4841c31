"""The one forward path's hook points, and every experiment that runs through them, for each of
the five families on tiny random checkpoints (tests/tiny_families.py).

Each check compares with a computation written here: numpy formulas of the layer (norms,
residual sums, the feed-forward's input), transformers' own model given an attention mask, an
explicit permutation of the input, finite differences for gradients.

The word-order invariant, decided here: with no positions at all (no learned rows, no rotary
turns), every step treats tokens alike, so a run of a shuffled input, read back in the original
order, equals the run of the original (to 1e-5), in every family. A decoder's causal mask is an
order signal of its own: the shuffled run under its causal mask, read back, equals the original
run under the causal mask permuted the same way (token i may see token j when j came before i
in the shuffled order), not under its own.
"""

from __future__ import annotations

import html

import numpy as np
import pytest
import torch
from conftest import run_page
from streamlit.testing.v1 import AppTest
from tiny_families import FAMILIES, load_reference, write_tiny_family

import core
from core import context, inside_layer, positional, qkv, saliency, scaling_masking
from core.attention import padding_mask
from core.errors import EmptyInput
from core.models import policy_from_settings
from core.transformer import (
    ATTN_INPUT,
    ATTN_WEIGHTS,
    ATTN_WRITE,
    EMBED,
    FFN_ACT_INPUT,
    FFN_WRITE,
    KEY,
    LAYER_POINTS,
    QUERY,
    STREAM_IN,
    STREAM_MID,
    STREAM_OUT,
    VALUE,
    hook_name,
)

LOCAL = policy_from_settings({"ATTENTION_EXPLORER_LOCAL_FOLDERS": "1"})
TEXT = "The river bank flows past the old mill"
ATOL = 1e-5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """family -> (model, folder), built once per module when a test first asks."""
    built: dict[str, tuple[core.Transformer, object]] = {}

    def get(family: str) -> tuple[core.Transformer, object]:
        if family not in built:
            folder = write_tiny_family(tmp_path_factory.mktemp(family), family, seed=11)
            built[family] = (core.load_model(str(folder), LOCAL), folder)
        return built[family]

    return get


def every_name(model: core.Transformer) -> list[str]:
    return [EMBED] + [
        hook_name(point, layer) for layer in range(model.n_layers) for point in LAYER_POINTS
    ]


def as64(tensor: torch.Tensor | np.ndarray) -> np.ndarray:
    return np.asarray(tensor, dtype=np.float64)


def norm_np(x: np.ndarray, weight, bias, kind: str, eps: float) -> np.ndarray:
    """LayerNorm or RMSNorm over the last axis, written out in numpy."""
    gamma = as64(weight)
    if kind == "rms":
        return gamma * x / np.sqrt((x**2).mean(-1, keepdims=True) + eps)
    centred = x - x.mean(-1, keepdims=True)
    out = gamma * centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps)
    return out + (0.0 if bias is None else as64(bias))


def assert_close(ours, expected, what: str, atol: float = ATOL) -> None:
    np.testing.assert_allclose(as64(ours), as64(expected), atol=atol, rtol=ATOL, err_msg=what)


# ---- names ----------------------------------------------------------------------------------------
def test_every_point_has_one_name_and_a_wrong_name_fails(tiny):
    model, _ = tiny("bert")
    names = every_name(model)
    assert len(set(names)) == len(names) == 1 + model.n_layers * len(LAYER_POINTS)
    assert hook_name(ATTN_WEIGHTS, 2) == "layers.2.attn_weights" and hook_name(EMBED) == "embed"
    with pytest.raises(ValueError):
        hook_name("attention", 0)
    with pytest.raises(ValueError):
        hook_name(QUERY)  # a layer's point without its layer
    for wrong in ("layers.9.query", "layers.0.queries", "query", "layers.x.query"):
        with pytest.raises(ValueError):
            model.run_with_hooks([1, 2, 3], hooks=[(wrong, lambda value, point: None)])


# ---- the cache is the Trace, and the layer's own formula -----------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_the_cache_holds_the_trace_and_each_layer_is_its_formula(tiny, family):
    model, _ = tiny(family)
    trace = model.run(TEXT)
    _, cache = model.run_with_cache(trace.input_ids, trace.segments, names=every_name(model))
    assert_close(cache[EMBED], trace.hidden_states[0], "embedding output")
    kind, eps = model.arch.norm_kind, model.dims.layer_norm_eps
    compared = 0
    for layer in range(model.n_layers):

        def at(point: str, layer: int = layer) -> np.ndarray:
            return as64(cache[hook_name(point, layer)])

        weights = model.layers[layer]
        assert_close(at(STREAM_IN), trace.hidden_states[layer], f"stream into {layer}")
        assert_close(at(STREAM_OUT), trace.hidden_states[layer + 1], f"output of {layer}")
        for point, stored in ((QUERY, trace.queries), (KEY, trace.keys), (VALUE, trace.values)):
            assert_close(at(point), stored[layer], f"{point} of {layer}")
        assert_close(at(ATTN_WEIGHTS), trace.attentions[layer], f"weights of {layer}")
        # attention's write from the Trace's weights and values: concat_h(α V) W_Oᵀ + b_O
        mixed = as64(trace.attentions[layer]) @ as64(trace.values[layer])  # (H, n, d_head)
        concat = mixed.transpose(1, 0, 2).reshape(trace.n_tokens, -1)  # (n, H · d_head)
        w_o = weights.attention.output
        write = concat @ as64(w_o.weight).T + (0 if w_o.bias is None else as64(w_o.bias))
        assert_close(at(ATTN_WRITE), write, f"attention write of {layer}")
        x, a, h, f = at(STREAM_IN), at(ATTN_WRITE), at(STREAM_MID), at(FFN_WRITE)
        if model.arch.norm_position == "pre":
            attn_input = norm_np(x, *weights.attn_norm, kind, eps)
            assert_close(at(ATTN_INPUT), attn_input, f"attention reads Norm(x) in {layer}")
            assert_close(h, x + a, f"h = x + a in {layer}")
            assert_close(at(STREAM_OUT), h + f, f"y = h + f in {layer}")
            ffn_input = norm_np(h, *weights.ffn_norm, kind, eps)
        else:
            assert_close(at(ATTN_INPUT), x, f"attention reads x in {layer}")
            assert_close(h, norm_np(x + a, *weights.attn_norm, kind, eps), f"h of {layer}")
            y = norm_np(h + f, *weights.ffn_norm, kind, eps)
            assert_close(at(STREAM_OUT), y, f"y = Norm(h + f) in {layer}")
            ffn_input = h
        reads = weights.ffn_gate if weights.ffn_gate is not None else weights.ffn_in
        act_input = ffn_input @ as64(reads.weight).T + (
            0 if reads.bias is None else as64(reads.bias)
        )
        assert_close(at(FFN_ACT_INPUT), act_input, f"activation input of {layer}", atol=1e-4)
        compared += 1
    assert compared == model.n_layers == 3


@pytest.mark.parametrize("family", FAMILIES)
def test_every_switch_acts_alike_in_the_trace_and_the_hooked_run(tiny, family):
    model, _ = tiny(family)
    names = [hook_name(ATTN_WEIGHTS, 2), hook_name(STREAM_OUT, 2)]
    for switches in ({}, {"scale": False}, {"causal": not model.is_decoder},
                     {"positions": False}, {"ablate": {(0, 1), (2, 3)}}):  # fmt: skip
        trace = model.run(TEXT, **switches)
        _, cache = model.run_with_cache(
            trace.input_ids, trace.segments, names=names, options=model.options(**switches)
        )
        assert_close(cache[names[0]], trace.attentions[2], f"{family} {switches} weights")
        assert_close(cache[names[1]], trace.hidden_states[3], f"{family} {switches} output")
    if not model.is_decoder:  # the word-order experiment's run with positions is the plain run
        attentions = positional.attention_from_ids(model, trace.input_ids, True)
        assert_close(attentions, model.run(TEXT).attentions, f"{family} word-order run")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_hook_reads_or_replaces_a_value(tiny, family):
    model, _ = tiny(family)
    trace = model.run(TEXT)
    seen = []
    plain = model.run_with_hooks(
        trace.input_ids, hooks=[(hook_name(STREAM_MID, 1), lambda v, p: seen.append(p.layer))]
    )
    assert seen == [1]  # a hook that returns None only reads
    assert_close(plain, trace.hidden_states[-1], "a reading hook changes nothing")
    # attention's write in layer 0 removed: the stream between the sublayers is x (pre-norm)
    # or Norm(x) (post-norm), the rest of the model runs on from there
    silenced = [(hook_name(ATTN_WRITE, 0), lambda value, point: torch.zeros_like(value))]
    last, cache = model.run_with_cache(
        trace.input_ids, names=[hook_name(STREAM_MID, 0)], hooks=silenced, stop_at_layer=3
    )
    x = as64(trace.hidden_states[0])
    if model.arch.norm_position == "post":
        x = norm_np(x, *model.layers[0].attn_norm, model.arch.norm_kind, model.dims.layer_norm_eps)
    assert_close(cache[hook_name(STREAM_MID, 0)], x, "h without attention's write")
    assert np.abs(as64(last) - as64(trace.hidden_states[-1])).max() > 1e-3


def test_a_replaced_weight_is_what_the_layer_uses(tiny):
    """Uniform weights over the keys a query may see: each head's output is the mean value."""
    model, _ = tiny("gpt2")
    trace = model.run(TEXT)
    n = trace.n_tokens
    uniform = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]  # (n, n) causal

    def flatten(value: torch.Tensor, point) -> torch.Tensor:
        return uniform.expand_as(value).clone()

    name = hook_name(ATTN_WEIGHTS, 1)
    _, cache = model.run_with_cache(
        trace.input_ids, names=[name, hook_name(VALUE, 1), hook_name(ATTN_WRITE, 1)],
        hooks=[(name, flatten)],
    )  # fmt: skip
    values = as64(cache[hook_name(VALUE, 1)])  # (H, n, d_head)
    means = np.cumsum(values, axis=1) / np.arange(1, n + 1)[None, :, None]  # running means
    concat = means.transpose(1, 0, 2).reshape(n, -1)
    w_o = model.layers[1].attention.output
    assert_close(cache[name], uniform.expand(model.n_heads, n, n), "the kept weights")
    write = concat @ as64(w_o.weight).T + as64(w_o.bias)
    assert_close(cache[hook_name(ATTN_WRITE, 1)], write, "the write from the replaced weights")


# ---- word order ----------------------------------------------------------------------------------
def shuffled(model: core.Transformer, n_pieces: int) -> np.ndarray:
    order = np.arange(n_pieces)
    order[1:-1] = np.random.default_rng(3).permutation(order[1:-1])
    assert not np.array_equal(order, np.arange(n_pieces))
    return order


def read_back(attentions: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(L, H, n, n) of a run of ids[order] -> rows and columns in the original order."""
    back = np.empty_like(attentions)
    back[:, :, order[:, None], order[None, :]] = attentions  # B[order[i], order[j]] = A'[i, j]
    return back


@pytest.mark.parametrize("family", FAMILIES)
def test_without_positions_a_shuffle_read_back_is_the_original(tiny, family):
    model, _ = tiny(family)
    trace = model.run(TEXT)
    ids = np.asarray(trace.input_ids)
    order = shuffled(model, len(ids))
    gaps = {}
    for positions in (False, True):
        original = positional.attention_from_ids(model, ids, positions)
        moved = read_back(positional.attention_from_ids(model, ids[order], positions), order)
        gaps[positions] = float(np.abs(original - moved).max())
    assert gaps[False] < ATOL, f"{family}: without positions the shuffle changed {gaps[False]}"
    assert gaps[True] > 1e-3, f"{family}: with positions the shuffle changed nothing"
    for positions in (False, True):  # the page's experiment: rotary turns removed too
        result = positional.permutation_experiment(
            model, trace.tokens, ids, trace.special, positions, seed=1
        )
        assert (result.max_abs_diff < ATOL) is not positions


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_decoders_mask_is_an_order_signal_of_its_own(tiny, family):
    model, _ = tiny(family)
    ids = np.asarray(model.run(TEXT).input_ids)
    order = shuffled(model, len(ids))
    n = len(ids)
    names = [hook_name(ATTN_WEIGHTS, layer) for layer in range(model.n_layers)]
    no_positions = model.options(positions=False)  # causal, as the decoder was trained

    def attentions(pieces, mask=None, options=no_positions) -> np.ndarray:
        _, cache = model.run_with_cache(pieces, names=names, options=options, attention_mask=mask)
        return np.stack([cache[name].numpy() for name in names])  # (L, H, n, n)

    moved = read_back(attentions(ids[order]), order)
    # where each original token stood in the shuffle: i may see j when j stood before i
    stood = np.argsort(order)
    permuted_causal = torch.from_numpy(stood[:, None] >= stood[None, :])  # (n, n) bool
    unmasked = model.options(causal=False, positions=False)
    assert_close(moved, attentions(ids, permuted_causal, unmasked), "under the permuted mask")
    assert np.abs(moved - attentions(ids)).max() > 1e-3  # under its own mask: not the same
    assert permuted_causal.sum() == n * (n + 1) // 2


@pytest.mark.parametrize("family", FAMILIES)
def test_one_heads_order_test_sees_the_models_positions(tiny, family):
    """Step 8 of page 2: without positions the gap is rounding; with the model's positions
    (added rows, or the rotary turn of q and k) it is real, for a rotary model too."""
    model, _ = tiny(family)
    trace = model.run(TEXT)
    test = qkv.order_test(
        model,
        trace.input_ids,
        trace.segments,
        trace.special,
        trace.tokens,
        qkv.head_projections(model, 0, 1),
    )
    assert test.moved and test.gap_without_positions < ATOL
    assert test.gap_with_positions > 1e-3 * test.largest_output


def test_the_rotary_turn_of_one_head_is_the_models_own(tiny):
    """qkv_attention's turned scores equal the model's own layer-0 scores of a rotary model."""
    model, _ = tiny("llama")
    trace = model.run(TEXT)
    projections = qkv.head_projections(model, 0, 2)
    _, cache = model.run_with_cache(trace.input_ids, names=[hook_name(STREAM_IN, 0)])
    x = as64(cache[hook_name(STREAM_IN, 0)])
    attn_input = norm_np(x, *model.layers[0].attn_norm, "rms", model.dims.layer_norm_eps)
    turned = qkv.qkv_attention(
        attn_input, projections, causal=True, rotary_theta=model.dims.rope_theta
    )
    assert_close(turned.attn_weights, trace.attentions[0, 2], "one rotary head's weights")


# ---- padding --------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_a_padding_mask_matches_transformers(tiny, family):
    """The attention mask of the one path against transformers' own attention_mask, per family:
    three filler pieces after the sentence, kept out of every real token's attention."""
    model, folder = tiny(family)
    trace = model.run(TEXT)
    n_real = trace.n_tokens
    ids = np.r_[trace.input_ids, [trace.input_ids[1]] * 3]  # (n,) three fillers after the text
    is_real = torch.arange(len(ids)) < n_real
    names = [hook_name(ATTN_WEIGHTS, layer) for layer in range(model.n_layers)]
    names += [EMBED] + [hook_name(STREAM_OUT, layer) for layer in range(model.n_layers - 1)]
    _, cache = model.run_with_cache(ids, names=names, attention_mask=padding_mask(is_real))
    reference = load_reference(folder, family)
    with torch.inference_mode():
        out = reference(
            input_ids=torch.from_numpy(ids)[None], attention_mask=is_real.long()[None],
            output_attentions=True, output_hidden_states=True,
        )  # fmt: skip
    assert len(out.attentions) == model.n_layers
    for layer in range(model.n_layers):
        expected = out.attentions[layer][0, :, :n_real]  # (H, n_real, n): the real rows
        assert_close(cache[names[layer]][:, :n_real], expected, f"{family} layer {layer}")
        assert float(cache[names[layer]][:, :n_real, n_real:].abs().max()) == 0.0
    for index in range(model.n_layers):  # the last state: transformers' decoders normed it
        state = cache[names[model.n_layers + index]][:n_real]
        assert_close(state, out.hidden_states[index][0, :n_real], f"{family} state {index}")


@pytest.mark.parametrize("family", FAMILIES)
def test_the_padding_experiment(tiny, family):
    model, _ = tiny(family)
    if model.tokenizer.id_of(scaling_masking.PAD) is None:
        with pytest.raises(EmptyInput):
            scaling_masking.padded_run(model, TEXT, 4, masked=True)
        return
    masked = scaling_masking.padded_run(model, TEXT, 4, masked=True)
    unmasked = scaling_masking.padded_run(model, TEXT, 4, masked=False)
    plain = model.run(TEXT)
    n_real = masked.n_real
    assert masked.max_change < ATOL and float(masked.weight_on_pads.max()) == 0.0
    assert unmasked.max_change > 1e-3 and float(unmasked.weight_on_pads.min()) > 0.0
    # the masked run's real rows are the plain run's attention
    assert_close(masked.attentions[:, :, :n_real, :n_real], plain.attentions, "masked = plain")


# ---- inside a layer -------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_sublayer_sizes_read_the_layers_own_writes(tiny, family):
    model, _ = tiny(family)
    trace = model.run(TEXT, ablate={(1, 0)})
    sizes = inside_layer.sublayer_sizes(model, trace)
    assert sizes.max_rebuild_error < ATOL and sizes.stream.shape == (3, trace.n_tokens)
    kind, eps = model.arch.norm_kind, model.dims.layer_norm_eps
    for layer in range(model.n_layers):
        x = as64(trace.hidden_states[layer])
        assert_close(sizes.stream[layer], np.linalg.norm(x, axis=-1), "‖x‖")
        heads = as64(trace.attentions[layer]) @ as64(trace.values[layer])  # (H, n, d_head)
        heads[[head for (at, head) in trace.options.ablate if at == layer]] = 0.0
        w_o = model.layers[layer].attention.output
        a = heads.transpose(1, 0, 2).reshape(trace.n_tokens, -1) @ as64(w_o.weight).T
        a += 0 if w_o.bias is None else as64(w_o.bias)
        assert_close(sizes.attention_update[layer], np.linalg.norm(a, axis=-1), "‖a‖")
        weights = model.layers[layer]
        if model.arch.norm_position == "pre":
            h = x + a
            ffn_input = norm_np(h, *weights.ffn_norm, kind, eps)
        else:
            h = norm_np(x + a, *weights.attn_norm, kind, eps)
            ffn_input = h
        assert_close(sizes.mid_stream[layer], np.linalg.norm(h, axis=-1), "‖h‖", atol=1e-4)
        # the activation's own input: SwiGLU's gate, not its up projection
        reads = weights.ffn_gate if weights.ffn_gate is not None else weights.ffn_in
        act_input = ffn_input @ as64(reads.weight).T + (
            0 if reads.bias is None else as64(reads.bias)
        )
        off = (act_input < 0).mean(axis=-1)
        assert np.abs(sizes.units_off[layer] - off).max() <= 2 / model.dims.d_ff  # a tie or two


# ---- gradients ------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_gradients_through_the_path_match_finite_differences(tiny, family):
    model, _ = tiny(family)
    trace = model.run(TEXT)
    position = trace.n_tokens - 1

    def target(last: torch.Tensor) -> torch.Tensor:
        return last[..., position, :].sum(-1)  # (B,)

    gradient = saliency.target_gradient(model, trace, target)  # (n, d_model)
    direction = np.random.default_rng(0).normal(size=gradient.shape)
    direction /= np.linalg.norm(direction)
    step = 1e-2
    words, segments = torch.tensor(trace.static), torch.tensor(trace.segments)
    moved = [
        float(target(model.forward_from_word_vectors((words + sign * step * torch.tensor(
            direction, dtype=torch.float32))[None], segments))[0])
        for sign in (1, -1)
    ]  # fmt: skip
    finite = (moved[0] - moved[1]) / (2 * step)
    analytic = float((gradient.astype(np.float64) * direction).sum())
    assert abs(finite - analytic) <= 2e-2 * max(1.0, abs(analytic)), (finite, analytic)


# ---- the embedding output, and cross-attention ------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_the_rows_layer_zero_reads_are_the_runs_own(tiny, family):
    model, _ = tiny(family)
    trace = model.run(TEXT)
    sentence = context.layer_zero_sentence(model, TEXT)
    words = [i for i, special in enumerate(trace.special) if not special]
    assert sentence.tokens == tuple(trace.tokens[i] for i in words)
    # what layer 0's heads read: the embedding output, or its first norm in a pre-norm model
    read = as64(trace.hidden_states[0])  # (n, d_model)
    if model.arch.norm_position == "pre":
        kind, eps = model.arch.norm_kind, model.dims.layer_norm_eps
        read = norm_np(read, *model.layers[0].attn_norm, kind, eps)
    assert_close(sentence.vectors, read[words], "what layer 0's heads read")
    # the qkv payoff measures the same rows: their lengths, the word's two cosines
    pair = ("money bank grows", "river bank flows")
    word = context.shared_piece(*(model.run(text).tokens for text in pair), "bank")
    through = qkv.shared_word_through_heads(model, *pair, word)
    for text, index, length in zip(
        pair,
        (through.index_a, through.index_b),
        through.input_lengths,
        strict=True,
    ):
        rows = as64(model.run(text).hidden_states[0])
        if model.arch.norm_position == "pre":
            rows = norm_np(rows, *model.layers[0].attn_norm, kind, eps)
        assert length == pytest.approx(float(np.linalg.norm(rows[index])), rel=1e-5), text


@pytest.mark.parametrize("family", FAMILIES)
def test_a_sentence_cross_attending_to_itself_is_its_own_attention(tiny, family):
    """Cross-attention has no mask and no rotary turn (two sentences are not one sequence): a
    sentence against itself in a run without either is that run's own attention."""
    model, _ = tiny(family)
    for positions in {False, model.arch.positions != "rotary"}:
        trace = model.run(TEXT, causal=False, positions=positions)
        for layer in range(model.n_layers):
            cross = scaling_masking.cross_attention(model, trace, trace, layer)
            assert_close(cross.attn_weights, trace.attentions[layer], f"{family} layer {layer}")
    other = model.run("money grows", causal=False)
    cross = scaling_masking.cross_attention(model, trace, other, 1)
    assert cross.attn_weights.shape == (model.n_heads, trace.n_tokens, other.n_tokens)


# ---- the word-order sentences follow their numbers -------------------------------------------------
def page_on(folder, page: str, tab: tuple[str, str]) -> AppTest:
    """app.py on `page`, the folder's model loaded (as after its Load button), one tab open."""
    at = run_page(page, TEXT, timeout=180, folder=folder, state=dict([tab]))
    assert not at.exception and not [e.value for e in at.error], "the page did not draw"
    return at


def page_text(at: AppTest) -> str:
    return " ".join(
        str(element.value) for kind in ("markdown", "caption") for element in at.get(kind)
    )


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_word_order_sentences_follow_their_numbers(tiny, local_folders, family):
    model, folder = tiny(family)
    at = page_on(folder, "views/positional.py", ("pos_section", "7 · Word order"))
    said = page_text(at)
    ids = np.asarray(model.run(TEXT).input_ids)
    trace = model.run(TEXT)
    removed = positional.permutation_experiment(model, trace.tokens, ids, trace.special, False)
    kept = positional.permutation_experiment(model, trace.tokens, ids, trace.special, True)
    assert removed.agrees and not kept.agrees  # what a tiny random model of each family shows
    assert "With positions removed the two runs agree to rounding" in said
    assert f"With positions they differ by up to {kept.max_abs_diff:.3g}" in said
    scheme = {"gpt2": "no position rows added", "llama": "no rotary turn of the queries and keys"}
    assert scheme[family] in said and "Without it the model runs off its training" in said
    # what the shuffle keeps: the tokenizer's own pieces (GPT-2 adds none, this Llama one <s>),
    # never BERT's first and last places; replayed here as the page's seed-0 shuffle
    stays = {"gpt2": "(no special piece to keep in place)", "llama": "(<s> stays in place)"}
    # a piece's name is escaped as text (<s> becomes &#60;s&#62;), which markdown shows as <s>
    assert f"The shuffled order the model read {stays[family]}:" in html.unescape(said)
    added = {"gpt2": set(), "llama": {"<s>"}}[family]
    movable = [i for i, token in enumerate(trace.tokens) if token not in added]
    order = np.arange(trace.n_tokens)
    order[movable] = np.random.default_rng(0).permutation(movable)
    if family == "gpt2":
        assert order[0] != 0 or order[-1] != trace.n_tokens - 1  # an end moved
    shown = [t.value for t in at.text if "river" in t.value or "mill" in t.value]
    # (AppTest's reader drops "<s>" from st.text; the browser shows it)
    expected = " ".join(trace.tokens[i] for i in order if trace.tokens[i] not in added)
    assert [value.replace("<s>", "").strip() for value in shown] == [expected.strip()], shown
    at = page_on(folder, "views/qkv.py", ("qkv_section", "8 · All at once"))
    said = page_text(at)
    assert f"The shuffled order {stays[family]}:" in html.unescape(said)
    assert "Without positions the two runs agree to float rounding" in said
    assert "That is why order has to be brought in." in said
    assert ("every query and key turned by its position" in said) is (family == "llama")


def test_a_random_head_of_odd_width_turns_its_even_part():
    """Step 8 with a random head on a rotary model: d_k may be odd; its pairs turn, the last
    coordinate stays, and the scores of pairs at equal distance keep the turn's rule."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 10)).astype(np.float32)
    projections = qkv.random_projections(10, 7, seed=1)
    turned = qkv.qkv_attention(x, projections, rotary_theta=10_000.0)
    plain = qkv.qkv_attention(x, projections)
    np.testing.assert_allclose(turned.query[:, 6], plain.query[:, 6], atol=1e-6)  # unturned
    np.testing.assert_allclose(turned.query[0], plain.query[0], atol=1e-6)  # position 0: angle 0
    # pairs (i, i + 3) of the first 6 coordinates: position p turns pair i by p · θ_i
    angle = 2 * 10_000.0 ** (-0.0)  # pair 0 at position 2
    first, second = plain.query[2, 0], plain.query[2, 3]
    expected = first * np.cos(angle) - second * np.sin(angle)
    np.testing.assert_allclose(turned.query[2, 0], expected, atol=1e-5)


def test_the_module_docstring_names_every_hook_point():
    """A learner reading core/transformer.py's docstring sees every point the path offers."""
    import core.transformer

    for point in (EMBED, *LAYER_POINTS):
        assert point in core.transformer.__doc__, point


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_cache_bytes_count_what_the_cache_keeps(tiny, family):
    """The estimate the door admits a cached run by: the kept values' own bytes, plus one
    layer's scores and weights and its feed-forward's widened vectors in flight."""
    model, _ = tiny(family)
    trace = model.run(TEXT)
    n = trace.n_tokens
    names = inside_layer.sublayer_names(model) + every_name(model)[:6]
    _, cache = model.run_with_cache(trace.input_ids, names=names)
    kept = sum(value.numel() * 4 for value in cache.values())
    widened = (3 if family == "llama" else 2) * model.dims.d_ff * n
    assert model.cache_bytes(n, set(names)) == kept + 4 * (2 * model.n_heads * n * n + widened)
