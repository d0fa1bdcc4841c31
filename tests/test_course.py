"""The course's math against independent computations, the corrected claims
as computed facts, and the new and changed pages running with the corrected sentences."""

from __future__ import annotations

import html
import itertools
import math
import re

import numpy as np
import pytest
import torch
from conftest import (
    BAD_INPUTS,
    ROOT,
    assert_each_tab_draws,
    assert_no_exception,
    drawn_figures,
    open_tab,
    run_page,
    written_share,
)
from torch.utils.flop_counter import FlopCounterMode

from core import (
    by_hand,
    context,
    head_roles,
    inside_layer,
    positional,
    qkv,
    scaling_masking,
)
from core.transformer import ATTN_WEIGHTS, EMBED, hook_name

BY_HAND, INSIDE = "views/by_hand.py", "views/inside_layer.py"
SENTENCE = "She sat on the bank of the river."


def _texts(at) -> str:
    """Every Markdown, caption and info text the page shows, joined."""
    return " ".join(e.value for e in [*at.markdown, *at.caption, *at.info, *at.warning])


@pytest.fixture(scope="module")
def reference(model):
    from core.reference import load_reference

    return load_reference(model.model_dir)


# ---- attention by hand ------------------------------------------------------------------------
def test_toy_attention_equals_the_hand_calculation():
    toy = by_hand.toy_sentence(("money", "bank", "grows"))
    result = by_hand.attention_by_hand(toy.vectors)
    n, d = toy.vectors.shape
    for i, j in itertools.product(range(n), repeat=2):
        dot = sum(toy.vectors[i, c] * toy.vectors[j, c] for c in range(d))
        assert result.scores[i, j] == dot
    np.testing.assert_array_equal(result.scores, [[4, 2, 2], [2, 6, 1], [2, 1, 5]])
    for i in range(n):
        total = sum(math.exp(result.scores[i, k]) for k in range(n))
        assert result.row_sums[i] == pytest.approx(total)
        for j in range(n):
            assert result.attn_weights[i, j] == pytest.approx(math.exp(result.scores[i, j]) / total)
        for c in range(d):
            expected = sum(result.attn_weights[i, j] * toy.vectors[j, c] for j in range(n))
            assert result.output[i, c] == pytest.approx(expected)
    # "bank" (S = [2, 6, 1]) keeps the most for itself, "money" (S = [4, 2, 2]) the least
    kept = [math.exp(result.scores[i, i]) / result.row_sums[i] for i in range(n)]
    np.testing.assert_allclose(result.self_weights, kept)
    assert result.keeps_most_and_least() == (kept.index(max(kept)), kept.index(min(kept))) == (1, 0)
    assert toy.feature_columns() == {
        feature: [by_hand.TOY_VECTORS[word][k] for word in toy.words]
        for k, feature in enumerate(by_hand.TOY_FEATURES)
    }


def test_every_toy_word_matches_itself_best_so_a_hard_lookup_has_no_tie():
    toy = by_hand.toy_sentence(tuple(by_hand.TOY_VECTORS))
    scores = by_hand.attention_by_hand(toy.vectors).scores
    for i, row in enumerate(scores):
        assert all(row[i] > row[j] for j in range(len(row)) if j != i)


def test_soft_lookup_is_a_softmax_blend_and_the_hard_one_picks_the_best_key():
    rng = np.random.default_rng(3)
    query, keys, values = rng.normal(size=4), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    found = by_hand.lookup(query, keys, values, sharpness=2.0)
    scores = [sum(query[c] * keys[j, c] for c in range(4)) for j in range(5)]
    exps = [math.exp(2.0 * s) for s in scores]
    for j in range(5):
        assert found.soft_weights[j] == pytest.approx(exps[j] / sum(exps))
    best = max(range(5), key=scores.__getitem__)
    np.testing.assert_allclose(found.hard_value, values[best])
    np.testing.assert_allclose(
        found.soft_value, sum(found.soft_weights[j] * values[j] for j in range(5))
    )
    # c = 0 is the plain average; a large c approaches the hard lookup
    np.testing.assert_allclose(by_hand.lookup(query, keys, values, 0.0).soft_value, values.mean(0))
    np.testing.assert_allclose(
        by_hand.lookup(query, keys, values, 1e3).soft_value, values[best], atol=1e-6
    )


def test_a_dense_layer_mixes_alike_and_attention_does_not():
    first = by_hand.toy_sentence(("money", "bank", "grows")).vectors
    second = by_hand.toy_sentence(("river", "bank", "grows")).vectors
    dense = by_hand.dense_token_mixing(3)
    np.testing.assert_allclose(dense.sum(axis=1), 1.0)
    contrast = by_hand.mixing_contrast(first, second, dense, row=1)
    np.testing.assert_array_equal(contrast.dense_first, contrast.dense_second)
    assert np.abs(contrast.attention_first - contrast.attention_second).max() > 0.05
    with pytest.raises(ValueError):
        by_hand.mixing_contrast(first, second[:2], dense, row=1)


@pytest.mark.parametrize("n", [5, 24])
def test_layer_cost_counts_what_torch_multiplies(model, n):
    """The formula against torch's own FLOP counter on one real layer (2 FLOPs per multiply-add)."""
    x = torch.randn(n, model.d_model)
    # layer 0 alone on x: the embedding output replaced, its weights read (no fused kernel)
    replace_embedding = (EMBED, lambda _value, _point: x)
    with FlopCounterMode(display=False) as counter:
        model.run_with_cache(
            np.zeros(n, np.int64), names=[hook_name(ATTN_WEIGHTS, 0)], hooks=[replace_embedding]
        )
    cost = by_hand.layer_cost(n, model.d_model, model.n_heads, model.dims.d_ff)
    total = cost.projections + cost.scores + cost.mixing + cost.feed_forward
    assert counter.get_total_flops() == 2 * total
    assert cost.attention_cells == model.n_heads * n * n


def test_break_even_length_is_where_the_square_terms_take_half(model):
    d, d_ff = model.d_model, model.dims.d_ff
    first = next(
        n
        for n in itertools.count(1)
        if by_hand.layer_cost(n, d, model.n_heads, d_ff).quadratic_share >= 0.5
    )
    assert by_hand.break_even_length(d, d_ff) == first


# ---- inside a layer -----------------------------------------------------------------------------
def test_layer_stages_count_every_parameter_of_a_layer(model, reference):
    stages = inside_layer.layer_stages(model, 2)
    layer = reference.encoder.layer[2]
    assert sum(s.parameters for s in stages) == sum(p.numel() for p in layer.parameters())
    attention = sum(p.numel() for p in layer.attention.self.parameters())
    assert stages[1].parameters == attention  # Q, K, V with biases
    # the attention sublayer: Q, K, V and the output projection W_O with its LayerNorm's own
    # numbers left to the norm; the feed-forward: both of its linear maps
    w_o = sum(p.numel() for p in layer.attention.output.dense.parameters())
    ffn = sum(
        p.numel() for p in (*layer.intermediate.parameters(), *layer.output.dense.parameters())
    )
    assert inside_layer.part_parameters(stages, "attention") == attention + w_o
    assert inside_layer.part_parameters(stages, "ffn") == ffn


def test_sublayer_sizes_say_their_spread_and_the_feed_forwards_share():
    rng = np.random.default_rng(3)
    fields = {
        name: rng.uniform(0.5, 4.0, size=(3, 5))  # (L, n)
        for name in (
            "stream", "attention_update", "attention_sum", "mid_stream", "ffn_update",
            "ffn_sum", "output", "kept_direction", "units_off",
        )
    }  # fmt: skip
    sizes = inside_layer.SublayerSizes(**fields, max_rebuild_error=0.0)
    assert sizes.spread("ffn_sum") == pytest.approx(
        fields["ffn_sum"].max() / fields["ffn_sum"].min()
    )
    means = sizes.layer_means()
    a, f = fields["attention_update"], fields["ffn_update"]
    for layer in range(3):
        ffn_share = np.mean([f[layer, t] / (a[layer, t] + f[layer, t]) for t in range(5)])
        assert means["ffn_share"][layer] == pytest.approx(ffn_share)
        assert means["output"][layer] == pytest.approx(np.mean(fields["output"][layer]))


def test_sublayer_sizes_match_transformers_hooks(model, reference):
    """‖a‖ and ‖f‖ against the outputs of transformers' attention-output and FFN-output layers."""
    trace = model.run(SENTENCE)
    captured: dict[str, list[torch.Tensor]] = {"a": [], "f": []}
    hooks = []
    for layer in reference.encoder.layer:
        hooks.append(
            layer.attention.output.dense.register_forward_hook(
                lambda _m, _i, out: captured["a"].append(out[0].detach())
            )
        )
        hooks.append(
            layer.output.dense.register_forward_hook(
                lambda _m, _i, out: captured["f"].append(out[0].detach())
            )
        )
    try:
        with torch.inference_mode():
            reference(
                input_ids=torch.tensor(np.array(trace.input_ids))[None],
                token_type_ids=torch.tensor(np.array(trace.segments))[None],
            )
    finally:
        for hook in hooks:
            hook.remove()
    assert len(captured["a"]) == len(captured["f"]) == model.n_layers
    sizes = inside_layer.sublayer_sizes(model, trace)
    assert sizes.max_rebuild_error < 1e-4
    for layer in range(model.n_layers):
        for token in range(trace.n_tokens):
            a = float(np.linalg.norm(captured["a"][layer][token].numpy()))
            f = float(np.linalg.norm(captured["f"][layer][token].numpy()))
            assert sizes.attention_update[layer, token] == pytest.approx(a, rel=1e-4)
            assert sizes.ffn_update[layer, token] == pytest.approx(f, rel=1e-4)
            assert sizes.attention_share[layer, token] == pytest.approx(a / (a + f), rel=1e-4)
    # the page's claim: the feed-forward network writes more than attention in every layer here
    assert (sizes.layer_means()["attention_share"] < 0.5).all()


def test_sublayer_sizes_rebuild_a_causal_run_with_a_removed_head(model):
    trace = model.run(SENTENCE, causal=True, ablate={(1, 3)})
    sizes = inside_layer.sublayer_sizes(model, trace)
    assert sizes.max_rebuild_error < 1e-4  # the run's own mask and ablation, recomputed
    # under the causal mask token 0 sees only itself: a_0 = W_O (its heads' values, joined) + b_O
    w_o = model.attention_weights(0).output
    joined = torch.from_numpy(np.array(trace.values[0][:, 0])).reshape(-1)  # (H·d_head,)
    expected = float((w_o.weight @ joined + w_o.bias).norm())
    assert sizes.attention_update[0, 0] == pytest.approx(expected, rel=1e-5)


# ---- heads with a role --------------------------------------------------------------------------
def test_role_weights_equal_explicit_loops():
    rng = np.random.default_rng(0)
    tokens = ["[CLS]", "the", "cat", "saw", "the", "dog", "[SEP]"]
    raw = rng.random((2, 3, 7, 7))
    weights = raw / raw.sum(-1, keepdims=True)
    roles = head_roles.role_weights(weights, tokens)
    for layer, head in itertools.product(range(2), range(3)):
        a = weights[layer, head]
        assert roles["previous"][layer, head].tolist() == pytest.approx(
            [a[i, i - 1] for i in range(2, 6)]
        )
        assert roles["next"][layer, head].tolist() == pytest.approx(
            [a[i, i + 1] for i in range(1, 5)]
        )
        assert roles["cls"][layer, head].tolist() == pytest.approx([a[i, 0] for i in range(1, 6)])
        assert roles["same_word"][layer, head].tolist() == pytest.approx([a[1, 4], a[4, 1]])
    cls, sep = head_roles.special_shares_by_layer(weights, tokens)
    for layer in range(2):
        rows = [(h, i) for h in range(3) for i in range(1, 6)]
        assert cls[layer] == pytest.approx(np.mean([weights[layer, h, i, 0] for h, i in rows]))
        assert sep[layer] == pytest.approx(np.mean([weights[layer, h, i, 6] for h, i in rows]))


def test_special_shares_count_both_seps_of_a_pair():
    rng = np.random.default_rng(1)
    tokens = ["[CLS]", "a", "[SEP]", "b", "c", "[SEP]"]
    raw = rng.random((2, 2, 6, 6))
    weights = raw / raw.sum(-1, keepdims=True)
    cls, sep = head_roles.special_shares_by_layer(weights, tokens)
    for layer in range(2):
        rows = [(h, i) for h in range(2) for i in (1, 3, 4)]  # real word pieces ask
        on_seps = [weights[layer, h, i, 2] + weights[layer, h, i, 5] for h, i in rows]
        assert sep[layer] == pytest.approx(sum(on_seps) / len(rows))
        assert cls[layer] == pytest.approx(
            sum(weights[layer, h, i, 0] for h, i in rows) / len(rows)
        )


def test_role_scores_are_means_over_every_probe_row(model):
    sentences = ("The cat saw the dog.", "We watch the old watch.")
    scores = head_roles.role_scores(model, sentences)
    rows: dict[str, list[np.ndarray]] = {role: [] for role in head_roles.ROLES}
    for sentence in sentences:
        trace = model.run(sentence)
        a, t, n = trace.attentions, trace.tokens, trace.n_tokens
        for i in range(1, n - 1):  # real word pieces ask
            if i >= 2:
                rows["previous"].append(a[:, :, i, i - 1])
            if i <= n - 3:
                rows["next"].append(a[:, :, i, i + 1])
            rows["cls"].append(a[:, :, i, 0])
            rows["self"].append(a[:, :, i, i])
            same = [j for j in range(1, n - 1) if j != i and t[j] == t[i]]
            if same:
                rows["same_word"].append(sum(a[:, :, i, j] for j in same))
    for role, parts in rows.items():
        assert scores.rows[role] == len(parts) > 0, role
        for layer, head in ((0, 0), (2, 5), (model.n_layers - 1, model.n_heads - 1)):
            expected = sum(float(part[layer, head]) for part in parts) / len(parts)
            assert scores.means[role][layer, head] == pytest.approx(expected, abs=1e-6), role


def test_measured_roles_name_real_heads(model):
    """The best head per role is the argmax of the means, and MiniLM has clear examples."""
    scores = head_roles.role_scores(model)
    for role in head_roles.ROLES:
        layer, head, mean = scores.best(role)
        grid = scores.means[role]
        assert mean == grid.max() and grid[layer, head] == mean
    # measured: a previous-token head near 1.0 and a next-token head near 0.68
    assert scores.best("previous")[2] > 0.8
    assert scores.best("next")[2] > 0.4
    layer, head, _ = scores.best("previous")
    trace = model.run("The monitor will monitor the room all night.")
    rows = [trace.attentions[layer, head, i, i - 1] for i in range(2, trace.n_tokens - 1)]
    assert np.mean(rows) > 0.8  # the named head does its job on a probe sentence, read directly


def test_parking_spot_is_the_special_token_with_more_weight():
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    weights = np.zeros((1, 1, 4, 4))
    weights[..., 3] = 0.7  # every row gives [SEP] 0.7 and [CLS] 0.3
    weights[..., 0] = 0.3
    assert head_roles.parking_spot(weights, tokens) == "[SEP]"
    weights[..., [0, 3]] = weights[..., [3, 0]]
    assert head_roles.parking_spot(weights, tokens) == "[CLS]"


def test_a_pair_framed_by_one_special_names_its_two_places_apart():
    """A Llama pair is framed "<s> A <s> B": the first <s> and the later one are two places with
    one piece name, and each keeps its own share and its own name in the parking test."""
    tokens = ["<s>", "a", "b", "<s>", "c"]
    special = [True, False, False, True, False]
    first, later = head_roles.sink_names(tokens, special)
    assert first != later and "<s>" in first and "<s>" in later
    weights = np.zeros((1, 1, 5, 5))
    weights[..., 0] = 0.9  # every row parks on the first <s>, none on the later one
    weights[..., 1] = 0.1
    assert head_roles.parking_spot(weights, tokens, special) == first


def test_repeat_example_reads_the_weight_between_two_occurrences(model):
    sentence = "The monitor will monitor the room all night."
    example = head_roles.repeat_example(model, sentence, 0, 8)
    trace = model.run(sentence)
    pairs = [
        (i, j)
        for j in range(1, trace.n_tokens - 1)
        for i in range(1, j)
        if trace.tokens[i] == trace.tokens[j]
    ]
    first, second = pairs[0]
    assert (example.word, example.first, example.second) == ("monitor", first, second)
    assert example.weight == pytest.approx(float(trace.attentions[0, 8, second, first]))
    row = trace.attentions[0, 8, second]
    assert example.to_itself == pytest.approx(float(row[second]))
    assert example.to_cls == pytest.approx(float(row[0]))
    assert example.to_sep == pytest.approx(float(row[trace.n_tokens - 1]))  # one sentence
    top_key = max(range(trace.n_tokens), key=lambda j: row[j])
    assert (example.top_key, example.top_piece) == (top_key, trace.tokens[top_key])
    assert example.top_weight == pytest.approx(float(row[top_key]))
    # an encoder's row sees every piece: an even spread gives each 1/n
    assert (example.keys_seen, example.even_weight) == (trace.n_tokens, 1 / trace.n_tokens)
    assert head_roles.repeat_example(model, "No word repeats here.", 0, 8) is None


def test_roles_on_one_sentence_equal_explicit_loops():
    rng = np.random.default_rng(3)
    tokens = ["[CLS]", "a", "b", "c", "d", "e", "[SEP]"]
    special = [True, False, False, False, False, False, True]
    raw = rng.random((2, 3, 7, 7))
    weights = raw / raw.sum(-1, keepdims=True)
    weights[1, 2, 1:6] = 0.0
    for i in range(1, 6):  # L1 H2 reads the next real piece (the last one reads itself)
        weights[1, 2, i, min(i + 1, 5)] = 1.0
    best = head_roles.best_on_sentence(weights, tokens, "next")
    means = {
        (layer, head): np.mean([weights[layer, head, i, i + 1] for i in range(1, 5)])
        for layer in range(2)
        for head in range(3)
    }
    top = max(means, key=means.get)
    assert best == (top[0], top[1], pytest.approx(means[top])) and top == (1, 2)
    assert head_roles.best_on_sentence(weights[..., :3, :3], tokens[:2] + ["[SEP]"], "next") is None
    # how often the role's neighbour is the row's largest weight, over rows with a real one
    for role, step in (("previous", -1), ("next", 1)):
        for layer, head in itertools.product(range(2), range(3)):
            a = weights[layer, head]
            rows = [i for i in range(1, 6) if 1 <= i + step <= 5]
            held = sum(max(range(7), key=lambda j: a[i, j]) == i + step for i in rows)
            assert head_roles.role_holds(a, role, special) == (held, len(rows))
    assert head_roles.role_holds(weights[1, 2], "next", special) == (4, 4)
    # without specials (a GPT-2 text) the ends are real pieces: row 0 has a next neighbour
    plain = [False] * 7
    a = weights[1, 2]
    held = sum(max(range(7), key=lambda j: a[i, j]) == i + 1 for i in range(6))
    assert head_roles.role_holds(a, "next", plain) == (held, 6)
    # the focus row: both neighbours real, the larger of the two roles' smaller weight
    prev, nxt = weights[0, 0], weights[1, 2]
    candidates = {i: min(prev[i, i - 1], nxt[i, i + 1]) for i in range(2, 5)}
    assert head_roles.neighbour_focus(prev, nxt, special) == max(candidates, key=candidates.get)
    assert head_roles.neighbour_focus(prev[:4, :4], nxt[:4, :4], special[:3] + [True]) is None
    candidates = {i: min(prev[i, i - 1], nxt[i, i + 1]) for i in range(1, 6)}  # no specials
    assert head_roles.neighbour_focus(prev, nxt, plain) == max(candidates, key=candidates.get)
    # one head strong early, the other late: the row both hold is the middle one, not an end
    early, late = np.full((7, 7), 0.05), np.full((7, 7), 0.05)
    for i, (before, after) in zip((2, 3, 4), ((0.9, 0.1), (0.5, 0.5), (0.1, 0.9)), strict=True):
        early[i, i - 1], late[i, i + 1] = before, after
    assert head_roles.neighbour_focus(early, late, special) == 3


def test_minilm_parks_attention_on_cls_not_sep(model):
    """MiniLM's parking spot is [CLS] (0.5-0.7 in layers 1-4), [SEP] stays small."""
    trace = model.run("The bank raised its interest rates again.")
    cls, sep = head_roles.special_shares_by_layer(trace.attentions, trace.tokens)
    assert (cls[1:5] > 0.45).all() and (sep <= 0.15).all() and (sep[1:5] < 0.07).all()


# ---- padding mask ------------------------------------------------------------------------------
def test_padding_mask_matches_transformers_attention_mask(model, reference):
    text = "The bank raised its rates."
    masked = scaling_masking.padded_run(model, text, 5, masked=True)
    unmasked = scaling_masking.padded_run(model, text, 5, masked=False)
    n = masked.n_real
    ids = torch.tensor([list(model.encode(text).input_ids) + [model.tokenizer.id_of("[PAD]")] * 5])
    attention_mask = torch.tensor([[1] * n + [0] * 5])
    with torch.inference_mode():
        out = reference(input_ids=ids, attention_mask=attention_mask, output_attentions=True)
    assert len(out.attentions) == model.n_layers
    for layer, ref in enumerate(out.attentions):
        np.testing.assert_allclose(masked.attentions[layer, :, :n], ref[0, :, :n], atol=1e-5)
    np.testing.assert_array_equal(masked.weight_on_pads, 0.0)
    assert masked.max_change < 1e-4
    assert (unmasked.weight_on_pads > 0.01).all() and unmasked.max_change > 1e-2


def test_weight_on_pads_without_the_mask_equals_transformers_written_out(model, reference):
    text, n_pad = "The bank raised its rates.", 4
    unmasked = scaling_masking.padded_run(model, text, n_pad, masked=False)
    n, total = unmasked.n_real, unmasked.n_real + n_pad
    ids = torch.tensor(
        [list(model.encode(text).input_ids) + [model.tokenizer.id_of("[PAD]")] * n_pad]
    )
    # no mask: transformers sees the [PAD] pieces as ordinary tokens of segment 0
    with torch.inference_mode():
        out = reference(
            input_ids=ids,
            token_type_ids=torch.zeros_like(ids),
            attention_mask=torch.ones_like(ids),
            output_attentions=True,
        )
    for layer, ref in enumerate(out.attentions):
        np.testing.assert_allclose(unmasked.attentions[layer], ref[0], atol=1e-5)
        on_pads = [
            sum(float(ref[0, h, i, k]) for k in range(n, total))  # a real query's weight on pads
            for h in range(model.n_heads)
            for i in range(n)
        ]
        assert unmasked.weight_on_pads[layer] == pytest.approx(
            sum(on_pads) / len(on_pads), abs=1e-5
        )
    assert unmasked.mean_weight_on_pads == pytest.approx(
        float(np.mean(unmasked.weight_on_pads)), abs=1e-9
    )


# ---- errors as computed facts -------------------------------------------------------------------
def test_page_one_scores_are_symmetric_and_its_weights_are_not(model):
    """The row-wise softmax alone makes α asymmetric; S − Sᵀ is exactly 0 on page 1."""
    sentence = context.static_sentence(model, "money bank grows")
    result = context.parameter_free(sentence.vectors)
    assert np.array_equal(qkv.asymmetry(result.similarity), np.zeros((3, 3)))
    money_bank, bank_money = result.attn_weights[0, 1], result.attn_weights[1, 0]
    assert money_bank == pytest.approx(0.237, abs=5e-4)  # measured on MiniLM
    assert bank_money == pytest.approx(0.225, abs=5e-4)
    # and by hand: each row divided by its own sum
    x = sentence.vectors.astype(np.float64)
    rows = [np.exp(x[i] @ x.T - (x[i] @ x.T).max()) for i in range(3)]
    assert money_bank == pytest.approx(rows[0][1] / rows[0].sum(), abs=1e-5)


def test_projections_make_the_scores_themselves_asymmetric(model):
    x = model.run("money bank grows").hidden_states[0]
    result = qkv.qkv_attention(x, qkv.random_projections(model.d_model, 8, 0))
    assert np.abs(qkv.asymmetry(result.dot)).max() > 1.0
    same = qkv.random_projections(model.d_model, 8, 0)
    tied = qkv.QKVProjections(
        same.w_query, same.w_query, same.w_value, same.b_query, same.b_query, same.b_value
    )  # W_k = W_q: symmetric scores again
    tied_result = qkv.qkv_attention(x, tied)
    np.testing.assert_allclose(qkv.asymmetry(tied_result.dot), 0.0, atol=1e-3)


def test_bilinear_form_equals_pairwise_loops(model):
    x = model.run("money bank grows").hidden_states[1]
    projections = qkv.random_projections(model.d_model, 4, 1)
    form = qkv.bilinear_form(x, projections)
    x64 = x.astype(np.float64)
    for i, j in itertools.product(range(len(x64)), repeat=2):
        q = x64[i] @ projections.w_query.astype(np.float64)
        k = x64[j] @ projections.w_key.astype(np.float64)
        assert x64[i] @ form.matrix @ x64[j] == pytest.approx(float(q @ k), rel=1e-9, abs=1e-9)
    assert form.rank == 4 and form.asymmetry > 0.5 and form.max_abs_error < 1e-6


def test_same_word_piece_enters_layer_zero_differently_at_another_position(model):
    """The same table row, but layer 0 reads LayerNorm(word + position + segment)."""
    a, b = model.run("She sat on the bank of the river."), model.run("The bank raised rates.")
    i, j = a.tokens.index("bank"), b.tokens.index("bank")
    assert i != j
    np.testing.assert_array_equal(a.static[i], b.static[j])
    assert float(positional.cosine(a.hidden_states[0][i], b.hidden_states[0][j])) < 0.999


def test_binary_and_sinusoid_frequencies_are_both_geometric():
    """Powers of two are geometric too (ratio ½); the sinusoid's ratio is 10000^(-2/d)."""
    d = 64
    omega = positional.frequencies(d)
    ratios = omega[1:] / omega[:-1]
    np.testing.assert_allclose(ratios, 10000 ** (-2 / d))
    waves = positional.wavelengths(d)
    assert waves[0] == pytest.approx(2 * math.pi)
    assert waves[-1] < 2 * math.pi * 1e4 < positional.wavelengths(4096)[-1] * 1.01
    bits = positional.binary_encoding(64)
    periods = [2 * (np.flatnonzero(np.diff(bits[:, j]) != 0)[0] + 1) for j in range(4)]
    assert [periods[j + 1] / periods[j] for j in range(3)] == [2, 2, 2]


def test_switching_off_the_scale_multiplies_scores_by_sqrt_d_head(model):
    """Off-distribution, not 'the model without scaling': every score × √d_head."""
    scaled, unscaled = model.run(SENTENCE), model.run(SENTENCE, scale=False)
    np.testing.assert_allclose(
        unscaled.head_scores(0, 3), scaled.head_scores(0, 3) * math.sqrt(model.d_head), rtol=1e-5
    )


def test_trained_scaled_scores_do_not_have_unit_spread(model):
    trace = model.run(SENTENCE)
    spread = scaling_masking.score_spread_by_layer(trace)
    q, k = trace.queries.astype(np.float64), trace.keys.astype(np.float64)
    for layer in range(model.n_layers):
        values = [
            float(q[layer, h, i] @ k[layer, h, j]) / math.sqrt(model.d_head)
            for h in range(model.n_heads)
            for i in range(trace.n_tokens)
            for j in range(trace.n_tokens)
        ]
        assert spread[layer] == pytest.approx(np.std(values), rel=1e-4)
    assert spread.min() > 1.1 and spread.max() > 2.5  # measured 1.3-3.4


# ---- positional additions -----------------------------------------------------------------------
def test_sine_only_columns_and_the_distance_law():
    n, d = 40, 16
    sines = positional.sine_only_encoding(n, d)
    for p, i in itertools.product(range(n), range(d // 2)):
        assert sines[p, i] == pytest.approx(math.sin(p * 10000 ** (-2 * i / d)))
    paired = positional.explained_by_distance(
        positional.similarity_matrix(positional.sinusoidal_encoding(n, d), "dot")
    )
    alone = positional.explained_by_distance(positional.similarity_matrix(sines, "dot"))
    assert paired == pytest.approx(1.0) and alone < 0.9


def test_shared_component_of_position_rows(model):
    table = model.position_vectors().astype(np.float64)
    shared = positional.shared_component(table)
    mean_row = table.mean(axis=0)
    lengths = [float(row @ row) for row in table]
    assert shared.mean_row_share == pytest.approx(float(mean_row @ mean_row) / np.mean(lengths))
    assert shared.mean_cosine == pytest.approx(0.12, abs=0.02)  # measured on MiniLM
    assert abs(shared.centred_mean_cosine) < 0.02  # the 0.12 is the shared direction
    # What remains by distance, as tab 6 states it: rows 100 apart, written out from the centred
    # rows, keep ~0.04 of closeness; with the shared direction in it looked like 0.15.
    centred = positional.centred_rows(table)
    np.testing.assert_allclose(centred, table - mean_row)
    near = [
        float(centred[p] @ centred[p + 100])
        / (np.linalg.norm(centred[p]) * np.linalg.norm(centred[p + 100]))
        for p in range(len(table) - 100)
    ]
    profile = positional.distance_profile(positional.similarity_matrix(centred, "cosine"))[0]
    assert profile[100] == pytest.approx(np.mean(near), abs=1e-9)
    assert profile[100] == pytest.approx(0.04, abs=0.01)  # measured on MiniLM


def test_score_terms_split_the_dot_product_of_sums():
    rng = np.random.default_rng(2)
    w, p = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    terms = positional.score_terms(w, p)
    for i, j in itertools.product(range(5), repeat=2):
        assert terms.total[i, j] == pytest.approx((w[i] + p[i]) @ (w[j] + p[j]))
        assert terms.cross[i, j] == pytest.approx(w[i] @ p[j] + p[i] @ w[j])
        concatenated = np.concatenate([w[i], p[i]]) @ np.concatenate([w[j], p[j]])
        assert concatenated == pytest.approx(terms.word_word[i, j] + terms.position_position[i, j])
    np.testing.assert_allclose(terms.word_word + terms.position_position + terms.cross, terms.total)


def test_shared_word_through_heads_matches_the_encoder(model):
    result = qkv.shared_word_through_heads(model, "money bank grows", "river bank flows", "bank")
    a, b = model.run("money bank grows"), model.run("river bank flows")
    for head in range(model.n_heads):
        out_a = a.attentions[0, head] @ a.values[0, head]  # (n, d_head), from the encoder's run
        out_b = b.attentions[0, head] @ b.values[0, head]
        expected = float(positional.cosine(out_a[2], out_b[2]))
        assert result.cosine_by_head[head] == pytest.approx(expected, abs=1e-5)
    assert result.cosine_input == pytest.approx(1.0)
    assert result.cosine_by_head.min() < 0.9 < result.cosine_parameter_free


# ---- pages --------------------------------------------------------------------------------------
# Every figure of the by-hand page, by the tab that draws it (views/by_hand.py, SECTIONS).
BY_HAND_FIGURES = {
    "1–2 · By hand": {"hand_scores", "hand_weights", "hand_output"},
    "3 · Soft lookup": {"hand_lookup"},
    "4 · Fixed vs computed": {"hand_dense", "hand_attention"},
    "5 · Cost": {"hand_cost"},
}


def test_by_hand_page_shows_numbers_a_learner_can_check():
    at = run_page(BY_HAND)
    assert_no_exception(at)
    assert "e^2 : e^6 : e^1" in _texts(at)  # bank's row: scores 2, 6, 1 with money, bank, grows
    table = at.table[0].value  # the toy's vectors, a row per word of the default sentence
    assert list(table.columns) == ["word", *by_hand.TOY_FEATURES]
    assert list(table["word"]) == ["money", "bank", "grows"]
    # written as a visitor reads them: whole numbers, no decimals
    assert table[list(by_hand.TOY_FEATURES)].to_numpy().tolist() == [
        ["2", "0", "0", "0"],
        ["1", "1", "2", "0"],
        ["1", "0", "0", "2"],
    ]
    # S, α and Y of "money bank grows" as HTML cells, worked out here by hand from the vectors
    # above: S = X Xᵀ, α = softmax of each row, Y = α X
    scores = [[4, 2, 2], [2, 6, 1], [2, 1, 5]]
    exp = np.exp(np.array(scores, dtype=np.float64))
    alpha = exp / exp.sum(axis=1, keepdims=True)
    output = alpha @ np.array([[2, 0, 0, 0], [1, 1, 2, 0], [1, 0, 0, 2]], dtype=np.float64)
    grids = {
        name: [float(number) for number in re.findall(r">(-?\d+(?:\.\d+)?)</i>", body)]
        for body in (element.proto.body for element in at.get("html"))
        for name in re.findall(r'data-figure="([^"]+)"', body)
    }
    assert grids["hand_scores"] == [float(v) for row in scores for v in row]
    np.testing.assert_allclose(grids["hand_weights"], alpha.ravel(), atol=0.005)
    np.testing.assert_allclose(grids["hand_output"], output.ravel(), atol=0.005)
    assert not at.get("plotly_chart")  # the first tab loads no plotly.js
    assert_each_tab_draws(at, BY_HAND, BY_HAND_FIGURES)
    assert "2304" in _texts(at).replace(",", "")  # the n² break-even for MiniLM: 2·384 + 1536
    open_tab(at, "hand_section", "1–2 · By hand")
    at.text_input(key="hand_text").set_value("River, zebra!").run()
    assert_no_exception(at)
    assert any("at least two" in info.value for info in at.info)
    assert any("zebra" in caption.value for caption in at.caption)
    assert not drawn_figures(at)  # two words are needed for a matrix


def test_toy_words_keep_known_words_in_order():
    assert by_hand.toy_words("The river BANK, money? bank zebra bank grows") == (
        ("river", "bank", "money", "bank"),
        ("the", "zebra"),
    )
    assert by_hand.toy_words("") == ((), ())


def test_inside_layer_page_measures_both_sublayers():
    at = run_page(INSIDE, text=SENTENCE)
    assert_no_exception(at)
    texts = _texts(at)
    assert "feed-forward network" in texts and "1,181,568" in texts  # W_1 + W_2 with biases
    table = at.table[0].value
    # shares to three decimals, norms to two, as a visitor reads them
    assert table["attention share"].str.fullmatch(r"0\.\d{3}").all()
    assert (table["attention share"].astype(float) < 0.5).all()
    assert table["‖f‖ feed-forward"].str.fullmatch(r"\d+\.\d{2}").all()


@pytest.mark.parametrize("name", ["empty", "html", "ten_thousand"])
def test_new_pages_survive_bad_input(name):
    for page in (BY_HAND, INSIDE):
        assert_no_exception(run_page(page, text=BAD_INPUTS[name]))


def test_changed_pages_state_the_corrected_claims():
    qkv = run_page("views/qkv.py", query={"qkv_section": "5 · Not symmetric"})
    assert_no_exception(qkv)
    texts = _texts(qkv)
    assert "α(money→bank) = 0.237" in texts and "α(bank→money) = 0.225" in texts
    assert "max |S − Sᵀ| = 0.0e+00" in texts

    heatmaps = run_page("views/heatmaps.py", text="The bank raised its interest rates again.")
    texts = _texts(heatmaps)
    assert "starts from the same vector" not in texts and "row of the word-piece table" in texts
    assert "Clark et al. (2019)" in texts and "Xiao et al. (2024)" in texts
    # measured, not written in; a piece's name is escaped (a custom tokenizer writes it)
    assert "the parking spot is &#91;CLS&#93;" in texts

    scaling_page = run_page("views/scaling_masking.py", text=SENTENCE)
    assert_no_exception(scaling_page)
    texts = _texts(open_tab(scaling_page, "sm_section", "5 · Cross-attention"))
    assert "MiniLM-L6, like BERT, has no cross-attention" in texts.replace("&#45;", "-")
    assert "BERT as trained" not in texts and "inside BERT" not in texts
    texts = _texts(open_tab(scaling_page, "sm_section", "3 · Switches"))
    assert "not 1" in texts and "BERT as trained" not in texts
    charts = drawn_figures(scaling_page)
    charts |= drawn_figures(open_tab(scaling_page, "sm_section", "6 · Padding mask"))

    positional_page = run_page("views/positional.py", text=SENTENCE)
    positional_page.session_state["pos_section"] = "2 · Binary"  # one tab at a time
    texts = _texts(positional_page.run())
    assert "instead of by powers of two" not in texts and "Both ladders are geometric" in texts
    positional_page.session_state["pos_section"] = "3 · Learned"
    headings = " ".join(h.value for h in positional_page.run().subheader)
    assert "What BERT learned instead" not in headings and "learned instead" in headings

    assert {"sm_score_spread", "sm_pad_on", "sm_pad_off"} <= charts

    heads = run_page("views/multi_head.py", text=SENTENCE)
    assert_no_exception(heads)
    assert drawn_figures(heads) == {"mh_two_mixtures"}  # the first tab
    assert "Why several heads: one softmax makes one mixture" in [h.value for h in heads.subheader]
    charts = {c.key for c in open_tab(heads, "mh_section", "1 · All heads").get("plotly_chart")}
    assert {f"mh_role_{role}" for role in head_roles.possible_roles(causal=False)} <= charts
    texts = _texts(open_tab(heads, "mh_section", "3 · Looking vs moving"))
    assert "Kobayashi et al. (2020) found" in texts
    assert "[SEP] or a full stop" not in texts and "[SEP], [CLS] or punctuation" not in texts
    assert "(out, in)" in _texts(open_tab(heads, "mh_section", "2 · Back to one vector"))


def test_named_heads_show_their_role_on_the_example_they_are_shown_with(model):
    """The two heads of "Why several heads" are the best previous- and next-token
    heads on the sidebar sentence, shown on the row where both hold best, with how often each
    role holds; the same-word head's layer 0 is not said to see a noun or a verb."""
    text = "Time flies like an arrow."
    heads = run_page("views/multi_head.py", text=text)
    assert_no_exception(heads)
    caption = _texts(heads)
    trace = model.run(text)
    a = np.asarray(trace.attentions, dtype=np.float64)
    n = trace.n_tokens

    def best(step: int) -> tuple[int, int]:
        rows = [i for i in range(1, n - 1) if 1 <= i + step <= n - 2]
        means = {
            (layer, head): sum(a[layer, head, i, i + step] for i in rows) / len(rows)
            for layer in range(model.n_layers)
            for head in range(model.n_heads)
        }
        return max(means, key=means.get)

    (pl, ph), (nl, nh) = best(-1), best(+1)
    focus = max(range(2, n - 2), key=lambda i: min(a[pl, ph, i, i - 1], a[nl, nh, i, i + 1]))
    assert f"L{pl} H{ph} gives the token before" in caption
    assert f"{a[pl, ph, focus, focus - 1]:.2f} of the row" in caption
    assert f"L{nl} H{nh} gives the token after" in caption
    assert f"{a[nl, nh, focus, focus + 1]:.2f}; an even spread over the {n} keys" in caption
    assert f"this row can see gives each {written_share(n)}. Each row sums to 1" in caption
    next_rows = range(1, n - 2)
    held = sum(int(np.argmax(a[nl, nh, i])) == i + 1 for i in next_rows)
    assert f"H{nh} on the token after in {held} of the {len(next_rows)} rows" in caption

    texts = _texts(open_tab(heads, "mh_section", "1 · All heads"))
    assert "noun" not in texts and "verb." not in texts
    same_layer, same_head, _ = head_roles.role_scores(model).best("same_word")
    assert ("Layer 0 sees only each piece's row" in texts) == (same_layer == 0)
    # the "same-word head" is said to give the repeat its largest weight only when it does
    probe = head_roles.PROBE_SENTENCES[2]
    row = model.run(probe).attentions[same_layer, same_head]
    repeat = head_roles.repeat_example(model, probe, same_layer, same_head)
    top_key = int(np.argmax(row[repeat.second]))
    if top_key == repeat.first:
        assert "That is the largest weight in its row." in texts
    else:
        top_piece = model.run(probe).tokens[top_key]
        assert f"Its largest weight here goes to {top_piece}" in html.unescape(texts)
    # an even spread over the probe sentences' rows, from their lengths, not a typed 10 %:
    # 1/n for each row between [CLS] + one piece and the last [SEP]
    lengths = [model.run(sentence).n_tokens for sentence in head_roles.PROBE_SENTENCES]
    assert f"({min(lengths)} to {max(lengths)} pieces in the probe sentences)" in texts
    even = np.mean([1 / n for n in lengths for _ in range(2, n - 1)])
    assert f"gives the token before {even:.2f} on average" in texts and "10 %" not in texts

    scaling_page = open_tab(
        run_page("views/scaling_masking.py", text=SENTENCE), "sm_section", "3 · Switches"
    )
    texts = _texts(scaling_page)
    assert "would learn smaller W_Q and W_K" not in texts
    assert "could absorb the factor" in texts and "unscaled training is less stable" not in texts
    assert "Vaswani et al. (2017) suspect" in texts and "depends on the task" in texts

    overview = run_page("views/overview.py", text=SENTENCE)
    headings = " ".join(h.value for h in overview.subheader)
    assert "really BERT" not in headings and "Is this really MiniLM" in headings.replace(
        "&#45;", "-"
    )
    assert '"Explore BERT"' not in (ROOT / "app.py").read_text()


def test_padded_run_of_a_long_text_reads_its_first_pieces(model):
    text = " ".join(["The bank raised its rates."] * 40)  # ~280 pieces
    run = scaling_masking.padded_run(model, text, 4, masked=True, max_real=64)
    assert run.n_real == 64 and run.tokens[63] == "[SEP]" and run.tokens[64:] == ("[PAD]",) * 4
    assert run.attentions.shape == (model.n_layers, model.n_heads, 68, 68)
    assert run.attentions.dtype == np.float32
    np.testing.assert_array_equal(run.weight_on_pads, 0.0)
    assert run.max_change < 1e-4  # against the same 64 pieces run alone
    alone = model.run(text)
    assert alone.n_tokens > 64
