"""The explanation methods, each against an independent computation.

similarity: sentence-transformers' encode(); rollout: the formula with explicit loops; flow:
every cut of a tiny graph (max-flow = min-cut); norm contributions: a per-head loop that slices
W_O column-wise, and transformers' own LayerNorm output; gradients: transformers' BertModel
autograd and finite differences (float64, tiny seeded model); Spearman: scipy's spearmanr;
deletion and leave-one-out: transformers on the shortened input, measuring the gradients' own
target; word merge and lens: explicit loops.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from tiny_bert import write_tiny_bert
from torch.nn import functional as F

from core import explanations, information_flow, lens, rollout, saliency, similarity, words
from core.models import read_config
from core.text import WordPieceTokenizer
from core.transformer import Transformer
from core.weights import load_weights


def random_attention(n_layers: int, n_heads: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=2.0, size=(n_layers, n_heads, n, n))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


# ---- a tiny seeded BERT in float64, and transformers' copy of it --------------------------------
@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A seeded random 2-layer BERT with 4 heads of 8 dimensions (tests/tiny_bert.py)."""
    return write_tiny_bert(
        tmp_path_factory.mktemp("tiny-explain"),
        seed=3, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_positions=32,
    )  # fmt: skip


def tiny_encoder(path, dtype: torch.dtype) -> Transformer:
    dims = read_config(path)
    tensors = {name: t.to(dtype) for name, t in load_weights(path, dims).items()}
    return Transformer("tiny", path, dims, tensors, WordPieceTokenizer(path, True))


@pytest.fixture(scope="module")
def tiny64(tiny_dir) -> Transformer:
    """The differentiable pass in float64 (run() writes float32 blocks: Traces come from tiny32)."""
    return tiny_encoder(tiny_dir, torch.float64)


@pytest.fixture(scope="module")
def tiny32(tiny_dir) -> Transformer:
    return tiny_encoder(tiny_dir, torch.float32)


@pytest.fixture(scope="module")
def tiny_reference64(tiny_dir):
    from transformers import BertModel

    return BertModel.from_pretrained(str(tiny_dir), attn_implementation="eager").double().eval()


@pytest.fixture(scope="module")
def reference(model):
    from core.reference import load_reference

    return load_reference(model.model_dir)


def reference_pooled(reference, word_vectors: torch.Tensor, segments: torch.Tensor):
    """transformers: inputs_embeds (B, n, d) in place of the word-piece rows -> (B, d) mean."""
    out = reference(
        inputs_embeds=word_vectors, token_type_ids=segments.expand(len(word_vectors), -1)
    )
    return out.last_hidden_state.mean(dim=1)


# ---- 1. similarity ------------------------------------------------------------------------------
def test_similarity_equals_sentence_transformers_encode(model):
    from sentence_transformers import SentenceTransformer

    st_model = SentenceTransformer(str(model.model_dir), device="cpu")
    sentences = [pair for _, *pair in similarity.EXAMPLE_PAIRS]
    for first, second in sentences:
        expected = st_model.encode([first, second], convert_to_numpy=True)
        ours = [similarity.sentence_embedding(model.run(s)) for s in (first, second)]
        np.testing.assert_allclose(ours[0], expected[0], atol=1e-5)
        np.testing.assert_allclose(ours[1], expected[1], atol=1e-5)
        assert (
            abs(
                similarity.sentence_similarity(model.run(first), model.run(second))
                - float(expected[0] @ expected[1])
            )
            < 1e-5
        )


# ---- 2. rollout ----------------------------------------------------------------------------------
def test_rollout_equals_the_formula_with_loops():
    n_layers, n_heads, n = 3, 2, 4
    attentions = random_attention(n_layers, n_heads, n)
    expected = np.zeros((n_layers, n, n))
    product = np.eye(n)
    for layer in range(n_layers):
        a_hat = np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                mean = sum(attentions[layer, h, i, j] for h in range(n_heads)) / n_heads
                a_hat[i, j] = 0.5 * mean + (0.5 if i == j else 0.0)
            a_hat[i] /= a_hat[i].sum()
        new = np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                new[i, j] = sum(a_hat[i, k] * product[k, j] for k in range(n))
        product = new
        expected[layer] = product
    # float32 throughout, like the Trace: products of share rows stay within ~1e-7
    np.testing.assert_allclose(rollout.attention_rollout(attentions), expected, atol=1e-6)
    # the first layer's contribution comes first in the product: a reversed order differs
    reversed_order = rollout.rollout(rollout.residual_attention(attentions)[::-1])
    assert not np.allclose(reversed_order[-1], expected[-1])
    np.testing.assert_allclose(rollout.to_sentence(expected[-1]), expected[-1].mean(axis=0))


# ---- 3. flow -------------------------------------------------------------------------------------
def brute_force_flow(mixing: np.ndarray, source: int, sink: int) -> float:
    """Max-flow = min-cut: the cheapest set of nodes holding the source and not the sink."""
    n_layers, n, _ = mixing.shape
    size = (n_layers + 1) * n
    edges = [
        (layer * n + j, (layer + 1) * n + i, mixing[layer, i, j])
        for layer in range(n_layers)
        for i in range(n)
        for j in range(n)
    ]
    others = [v for v in range(size) if v not in (source, sink)]
    best = np.inf
    for picks in itertools.product([False, True], repeat=len(others)):
        side = {source} | {v for v, chosen in zip(others, picks, strict=True) if chosen}
        best = min(best, sum(c for tail, head, c in edges if tail in side and head not in side))
    return best


def test_flow_equals_brute_force_min_cut_on_a_tiny_graph():
    mixing = rollout.residual_attention(random_attention(2, 2, 3, seed=4))  # 9 nodes
    flow = rollout.attention_flow(mixing)
    n = 3
    for i in range(n):
        for j in range(n):
            expected = brute_force_flow(mixing, j, 2 * n + i)
            assert abs(flow[i, j] - expected) < 1e-5, (i, j, flow[i, j], expected)
    # flow is not rollout: the rollout of the same graph differs somewhere
    assert not np.allclose(flow, rollout.rollout(mixing)[-1], atol=1e-3)


def test_flow_stops_above_its_limit():
    mixing = rollout.residual_attention(random_attention(1, 1, rollout.MAX_FLOW_PIECES + 1))
    assert rollout.attention_flow(mixing) is None


# ---- 4. norm-based contributions -------------------------------------------------------------
@pytest.mark.parametrize("keys_per_block", [None, 2])  # None: the default, one block here
def test_norm_contributions_equal_a_per_head_loop_with_column_slices_of_w_o(
    model, reference, keys_per_block, monkeypatch
):
    if keys_per_block:  # blocks of 2 keys (and 1 at the end): the split must change nothing
        monkeypatch.setattr(rollout, "_keys_per_block", lambda n_heads, n: keys_per_block)
    trace = model.run("The river bank flooded.")
    n, d, d_head = trace.n_tokens, model.d_model, model.d_head
    layer = 2
    x = torch.tensor(trace.hidden_states[layer], dtype=torch.float64)
    alpha = torch.tensor(trace.attentions[layer], dtype=torch.float64)
    values = torch.tensor(trace.values[layer], dtype=torch.float64)
    w_o = model.attention_weights(layer).output.weight.double()  # (d, H·d_head)
    b_o = model.attention_weights(layer).output.bias.double()
    gamma, beta = (t.double() for t in model.layers[layer].attn_norm)

    def centre(v):
        return gamma * (v - v.mean())

    # z_ij built head by head: head h reads columns h·d_head … (h+1)·d_head − 1 of W_O
    z = torch.zeros(n, n, d, dtype=torch.float64)
    for i in range(n):
        for j in range(n):
            for h in range(model.n_heads):
                w_head = w_o[:, h * d_head : (h + 1) * d_head]  # (d, d_head)
                z[i, j] += alpha[h, i, j] * (w_head @ values[h, j])
            if i == j:
                z[i, j] += x[i]
    pre_norm = z.sum(dim=1) + b_o  # (n, d): the row LayerNorm sees
    sigma = torch.sqrt(pre_norm.var(dim=-1, unbiased=False) + model.dims.layer_norm_eps)
    expected = torch.stack(
        [torch.stack([centre(z[i, j]).norm() / sigma[i] for j in range(n)]) for i in range(n)]
    )
    ours = rollout.layer_contributions(model, trace, layer)
    torch.testing.assert_close(torch.from_numpy(ours).double(), expected, atol=2e-4, rtol=1e-4)

    # the pieces add up to transformers' own LayerNorm output after attention (minus the biases)
    captured = {}
    block = reference.encoder.layer[layer].attention.output  # BertSelfOutput: dense, +x, LN

    def keep(module, inputs, output) -> None:  # returns None: the output is left as it is
        captured["h"] = output[0].double()

    hook = block.register_forward_hook(keep)
    try:
        with torch.no_grad():
            reference(input_ids=torch.tensor(trace.input_ids)[None])
    finally:
        hook.remove()
    rebuilt = (
        torch.stack([sum(centre(z[i, j]) for j in range(n)) / sigma[i] for i in range(n)])
        + (gamma * (b_o - b_o.mean()))[None] / sigma[:, None]
        + beta
    )
    torch.testing.assert_close(rebuilt, captured["h"], atol=1e-4, rtol=1e-4)


def contribution_norms_from_the_whole_block(model, trace, layer: int) -> np.ndarray:
    """(n, n) ‖P(z_ij)‖ / σ_i in float64, with every z_ij built: the (n, n, d) block in full."""
    x = torch.tensor(trace.hidden_states[layer], dtype=torch.float64)  # (n, d)
    alpha = torch.tensor(trace.attentions[layer], dtype=torch.float64)  # (H, n, n)
    values = torch.tensor(trace.values[layer], dtype=torch.float64)  # (H, n, d_head)
    w_o = model.attention_weights(layer).output.weight.double()  # (d, H·d_head)
    b_o = model.attention_weights(layer).output.bias.double()
    gamma = model.layers[layer].attn_norm[0].double()
    per_head = w_o.T.reshape(model.n_heads, model.d_head, -1)  # (H, d_head, d)
    transformed = torch.einsum("hjk,hkd->hjd", values, per_head)  # (H, n, d): v_j^h W_Oʰ
    z = torch.einsum("hij,hjd->ijd", alpha, transformed)  # (n_q, n_k, d)
    z[range(len(x)), range(len(x))] += x  # the skip connection: x_i joins z_ii
    sigma = torch.sqrt((z.sum(dim=1) + b_o).var(dim=-1, unbiased=False) + model.dims.layer_norm_eps)
    centred = gamma * (z - z.mean(dim=-1, keepdim=True))  # P(z_ij)
    return (centred.norm(dim=-1) / sigma[:, None]).numpy()


@pytest.mark.parametrize("which", ["minilm_causal_in_blocks", "tiny_four_heads"])
def test_norm_contributions_equal_the_whole_block_in_every_layer(model, tiny32, which, monkeypatch):
    if which == "tiny_four_heads":  # 4 heads of 8 dimensions: nothing assumes MiniLM's 12 × 32
        encoder, trace = tiny32, tiny32.run("the river bank flows", "money grows")
    else:  # 72 pieces, causal, unscaled: α zero above the diagonal; keys in blocks of 7 (and 2)
        encoder = model
        trace = model.run(
            " ".join(["the bank of the river flooded ."] * 10), causal=True, scale=False
        )
        assert trace.n_tokens % 7 != 0
        monkeypatch.setattr(rollout, "_keys_per_block", lambda n_heads, n: 7)
    for layer in range(encoder.n_layers):
        expected = contribution_norms_from_the_whole_block(encoder, trace, layer)
        ours = rollout.layer_contributions(encoder, trace, layer)
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)


def test_keys_per_block_covers_every_key_in_even_blocks_under_the_byte_limit():
    for n in (1, 2, 20, 72, 128, 145, 300, 512):
        block = rollout._keys_per_block(12, n)
        blocks = -(-n // block)
        assert 4 * 12 * n * block <= max(rollout.KEY_BLOCK_BYTES, 4 * 12 * n)  # one key at least
        assert block * blocks >= n > block * (blocks - 1)  # every key, no empty block
        assert block - (n - block * (blocks - 1)) < blocks  # the last block is the short one


def test_norm_rollout_rows_are_shares_and_differ_from_attention_rollout(model):
    trace = model.run("Fruit flies like a banana.")
    rolled = rollout.contribution_rollout(model, trace)
    np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-6)
    # the shares skip σ_i (it cancels per row): they equal the σ-divided norms, row-normalised
    mixing = rollout.contribution_mixing(model, trace)
    for layer in (0, model.n_layers - 1):
        with_sigma = rollout.layer_contributions(model, trace, layer)
        expected = with_sigma / with_sigma.sum(axis=-1, keepdims=True)
        np.testing.assert_allclose(mixing[layer], expected, atol=1e-5)
    assert not np.allclose(rolled[-1], rollout.attention_rollout(trace.attentions)[-1], atol=1e-2)


# ---- 5. the differentiable pass and its gradients ---------------------------------------------
def test_differentiable_pass_equals_run(model):
    for options in ({}, {"scale": False}, {"causal": True}):
        trace = model.run("Time flies like an arrow.", **options)
        word_vectors = torch.tensor(trace.static)[None]
        last = model.forward_from_word_vectors(
            word_vectors, torch.tensor(trace.segments), **options
        )
        np.testing.assert_allclose(last[0].detach().numpy(), trace.hidden_states[-1], atol=1e-5)


def test_gradients_equal_transformers_autograd_and_finite_differences(
    tiny32, tiny64, tiny_reference64
):
    trace = tiny32.run("the river bank flows", "money grows")
    other = tiny32.run("time flies like an arrow")
    target = saliency.similarity_target(other)
    ours = saliency.target_gradient(tiny64, trace, target)

    word_vectors = torch.tensor(trace.static, dtype=torch.float64)[None].requires_grad_(True)
    pooled = reference_pooled(tiny_reference64, word_vectors, torch.tensor(trace.segments)[None])
    cos = F.cosine_similarity(pooled, torch.tensor(target.reference)[None])[0]
    (expected,) = torch.autograd.grad(cos, word_vectors)
    np.testing.assert_allclose(ours, expected[0].numpy(), atol=1e-10)

    # finite differences, with the switches transformers does not have
    def target_at(trace, options, row: int, col: int, delta: float) -> float:
        moved = torch.tensor(trace.static, dtype=torch.float64).clone()
        moved[row, col] += delta
        last = tiny64.forward_from_word_vectors(
            moved[None], torch.tensor(trace.segments), **options
        )
        return float(target(last)[0])

    rng = np.random.default_rng(0)
    step = 1e-6
    for options in ({"scale": False}, {"causal": True}):
        switched = tiny32.run("the river bank flows", **options)
        gradient = saliency.target_gradient(tiny64, switched, target)
        for _ in range(4):
            row, col = int(rng.integers(switched.n_tokens)), int(rng.integers(tiny64.d_model))
            numeric = (
                target_at(switched, options, row, col, step)
                - target_at(switched, options, row, col, -step)
            ) / (2 * step)
            assert abs(gradient[row, col] - numeric) < 1e-7, (options, gradient[row, col], numeric)


def test_gradient_x_input_on_the_real_model_equals_transformers(model, reference):
    trace = model.run("A man is playing a guitar.")
    target = saliency.embedding_target(trace)
    ours = saliency.gradient_x_input(model, trace, target)
    word_vectors = torch.tensor(trace.static)[None].requires_grad_(True)
    pooled = reference_pooled(reference, word_vectors, torch.tensor(trace.segments)[None])
    value = pooled[0] @ torch.tensor(target.reference, dtype=torch.float32)
    (gradient,) = torch.autograd.grad(value, word_vectors)
    expected = (gradient[0] * word_vectors[0]).sum(-1).detach().numpy()
    np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=1e-4)


def test_integrated_gradients_equal_a_per_step_loop_through_transformers(
    tiny32, tiny64, tiny_reference64
):
    trace = tiny32.run("the bank of the river")
    target = saliency.embedding_target(trace)
    steps = 16
    ours, gap, _ = saliency.integrated_gradients(tiny64, trace, target, steps)
    x = torch.tensor(trace.static, dtype=torch.float64)
    segments = torch.tensor(trace.segments)[None]
    reference_vector = torch.tensor(target.reference)
    total = torch.zeros_like(x)
    for k in range(steps):  # one step at a time, no batching
        point = (x * (k + 0.5) / steps)[None].requires_grad_(True)
        value = reference_pooled(tiny_reference64, point, segments)[0] @ reference_vector
        (gradient,) = torch.autograd.grad(value, point)
        total += gradient[0]
    expected = (total / steps * x).sum(-1).numpy()
    np.testing.assert_allclose(ours, expected, atol=1e-10)
    # completeness: with many steps the scores add up to f(x) − f(0)
    _, fine_gap, _ = saliency.integrated_gradients(tiny64, trace, target, 256)
    assert abs(fine_gap) < 1e-3 and abs(fine_gap) <= abs(gap) + 1e-9


def test_ig_converged_is_completeness_within_the_papers_five_percent():
    """The rule, with the share written out: |Σ IG − Δ| ≤ 0.05 |Δ|, Δ = f(x) − f(0)."""
    assert saliency.IG_TOLERANCE == 0.05
    for gap, difference in [(0.04, 1.0), (-0.049, -1.0), (0.0, 0.0), (-0.0011, 5.02)]:
        assert saliency.ig_converged(gap, difference), (gap, difference)
    for gap, difference in [(0.051, 1.0), (-1.93, 3.58), (1e-6, 0.0), (0.33, 0.35)]:
        assert not saliency.ig_converged(gap, difference), (gap, difference)


@pytest.mark.parametrize("family, converges", [("llama", False), ("gpt2", True)])
def test_integrated_gradients_through_a_zero_rmsnorm_input_miss_and_rank_nothing(
    tmp_path, family, converges
):
    """A tiny Llama adds no position rows: the zero baseline meets RMSNorm at x = 0, where its
    slope is ~1/√ε. The midpoint sum and f(x) − f(0), recomputed here one step at a time through
    transformers' causal-LM class, miss each other by more than 5%, and side_by_side drops
    integrated gradients; a tiny GPT-2 (position rows keep the path off zero) keeps them."""
    from tiny_families import write_tiny_family
    from transformers import AutoModelForCausalLM

    from core.models import load_folder

    folder = write_tiny_family(tmp_path / family, family, seed=7)
    model = load_folder(folder)
    trace = model.run("the river bank flows past the old mill, and money grows in the bank.")
    reference = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
    reference = reference.double().eval()
    ids = torch.tensor(trace.input_ids)[None]
    x = reference.get_input_embeddings()(ids)[0].detach()  # (n, d_model)
    with torch.no_grad():
        piece = int(reference(input_ids=ids).logits[0, -1].argmax())  # the likeliest next piece

    def f(rows: torch.Tensor) -> torch.Tensor:
        """(n, d_model) word rows -> log p(piece | rows) at the last position."""
        logits = reference(inputs_embeds=rows[None]).logits[0, -1]
        return torch.log_softmax(logits, dim=-1)[piece]

    steps = 32
    total = torch.zeros_like(x)
    for k in range(steps):  # the midpoint rule, one step at a time
        point = (x * (k + 0.5) / steps).requires_grad_(True)
        (gradient,) = torch.autograd.grad(f(point), point)
        total += gradient
    ig_sum = float((total / steps * x).sum())
    with torch.no_grad():
        difference = float(f(x) - f(torch.zeros_like(x)))
    gradients = explanations.gradient_scores(
        model, trace, saliency.next_piece_target(model, piece), steps
    )
    assert gradients.ig_difference == pytest.approx(difference, abs=1e-3)
    assert gradients.ig_gap == pytest.approx(ig_sum - difference, abs=2e-3)
    assert (abs(ig_sum - difference) <= 0.05 * abs(difference)) is converges
    assert gradients.ig_converged is converges
    flow = information_flow.information_flow(model, trace)
    assert ("integrated_gradients" in explanations.side_by_side(flow, gradients)) is converges


# ---- 6. side by side: Spearman and the deletion test -------------------------------------------
def test_rank_agreement_equals_scipy_spearman():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(1)
    scores = {"a": rng.normal(size=9), "b": rng.normal(size=9), "c": np.arange(9.0) % 3}
    allowed = np.ones(9, dtype=bool)
    allowed[[0, 8]] = False
    rho = explanations.rank_agreement(scores, allowed)
    names = list(scores)
    for p, q in itertools.product(range(3), repeat=2):
        expected = spearmanr(scores[names[p]][allowed], scores[names[q]][allowed]).statistic
        assert abs(rho[p, q] - expected) < 1e-12
    # tie-free: the textbook formula 1 − 6 Σ d² / (m (m² − 1))
    m = int(allowed.sum())
    ranks = [np.argsort(np.argsort(scores[k][allowed])) for k in ("a", "b")]
    textbook = 1 - 6 * ((ranks[0] - ranks[1]) ** 2).sum() / (m * (m * m - 1))
    assert abs(rho[0, 1] - textbook) < 1e-12


def test_ranking_keeps_specials_and_orders_by_score():
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    allowed = saliency.removable(tokens)
    order = saliency.ranking(np.array([9.0, 1.0, 3.0, 3.0, 8.0]), allowed)
    assert order.tolist() == [2, 3, 1]


def reference_target(reference, ids: torch.Tensor, target: saliency.Target) -> float:
    """f of one input through transformers, written out: mean-pool the top layer, then take the
    cosine to the other sentence (similarity) or the projection on ê (embedding)."""
    with torch.no_grad():
        pooled = reference(input_ids=ids[None]).last_hidden_state[0].mean(0)
    if target.kind == saliency.SIMILARITY:
        pooled = F.normalize(pooled, dim=0)
    return float(pooled.numpy() @ target.reference)


@pytest.mark.parametrize("kind", [saliency.SIMILARITY, saliency.EMBEDDING])
def test_deletion_curves_equal_transformers_on_the_shortened_input(model, reference, kind):
    trace = model.run("The cat sat on the warm mat.")
    target = (
        saliency.similarity_target(model.run("A kitten rests on a rug."))
        if kind == saliency.SIMILARITY
        else saliency.embedding_target(trace)
    )
    allowed = saliency.removable(trace.tokens)
    first = np.flatnonzero(allowed)
    rankings = {
        "first": first,
        "random": saliency.random_ranking(allowed, 2),
        # the same pieces as "first" at k = 2, in another order: one run shared at that k
        "swapped": np.concatenate([first[1::-1], first[2:][::-1]]),
    }
    curves = saliency.deletion_curves(model, trace, target, rankings, k_max=3)
    for name, order in rankings.items():
        for k in range(4):
            keep = np.ones(trace.n_tokens, dtype=bool)
            keep[order[:k]] = False
            expected = reference_target(reference, torch.tensor(trace.input_ids[keep]), target)
            assert abs(curves[name][k] - expected) < 1e-5 * max(1.0, abs(expected)), (name, k)
    assert curves["first"][2] == curves["swapped"][2]


def first_piece(trace) -> np.ndarray:
    return np.flatnonzero(saliency.removable(trace.tokens))[:1]


def test_deletion_and_the_gradients_measure_the_same_function(model):
    """The deletion curve starts at the very f the gradients explain: the projection h̄ · ê for
    the sentence's own vector (its length, ~6 here), not the cosine to itself (1); and by
    completeness the integrated gradients add up to that start less f(all-zero rows)."""
    trace = model.run("A man is playing a guitar.")
    for target in (
        saliency.embedding_target(trace),
        saliency.similarity_target(model.run("Someone plays music.")),
    ):
        allowed = saliency.removable(trace.tokens)
        (curve,) = saliency.deletion_curves(
            model, trace, target, {"any": np.flatnonzero(allowed)}, k_max=1
        ).values()
        # f at the input, written out from the Trace's top layer
        pooled = np.asarray(trace.hidden_states[-1], dtype=np.float64).mean(axis=0)
        if target.kind == saliency.SIMILARITY:
            pooled = pooled / np.linalg.norm(pooled)
        f_input = float(pooled @ target.reference)
        assert curve[0] == pytest.approx(f_input, abs=1e-4)
        scores, gap, _ = saliency.integrated_gradients(model, trace, target, 32)
        zero_rows = torch.zeros(trace.n_tokens, model.d_model)[None]
        with torch.no_grad():
            last = model.forward_from_word_vectors(zero_rows, torch.tensor(trace.segments))
        f_zero = float(target(last)[0])
        assert float(scores.sum()) == pytest.approx(curve[0] - f_zero, abs=abs(gap) + 1e-4)
    own = saliency.embedding_target(trace)
    assert saliency.deletion_curves(model, trace, own, {"a": first_piece(trace)}, 0)["a"][0] > 2


def test_leave_one_out_equals_one_removal_at_a_time_through_transformers(model, reference):
    trace = model.run("Fruit flies like a banana.")
    target = saliency.embedding_target(trace)
    drops = saliency.leave_one_out(model, trace, target)
    full = reference_target(reference, torch.tensor(trace.input_ids), target)
    for j, token in enumerate(trace.tokens):
        if token in ("[CLS]", "[SEP]"):
            assert drops[j] == 0.0
            continue
        keep = np.arange(trace.n_tokens) != j
        without = reference_target(reference, torch.tensor(trace.input_ids[keep]), target)
        assert drops[j] == pytest.approx(full - without, abs=2e-5), token


def test_side_by_side_runs_every_method_and_drops_flow_above_its_limit(model):
    trace = model.run("Fruit flies like a banana.")
    flow = information_flow.information_flow(model, trace)
    # 16 steps: at 8 this sentence's IG sum misses f(x) − f(0) by 5.2%, over the 5% rule
    gradients = explanations.gradient_scores(model, trace, saliency.embedding_target(trace), 16)
    scores = explanations.side_by_side(flow, gradients)
    assert list(scores) == list(explanations.METHOD_LABELS)
    for name, values in scores.items():
        assert values.shape == (trace.n_tokens,) and np.isfinite(values).all(), name
    np.testing.assert_allclose(scores["rollout"].sum(), 1.0, rtol=1e-6)  # shares of the sentence
    long_trace = model.run("bank " * 60)
    assert information_flow.information_flow(model, long_trace).flow is None


def mean_of_rows(matrix: np.ndarray) -> list[float]:
    """Column j's mean over the rows, written out: piece j's share of the mean-pooled sentence."""
    n = len(matrix)
    return [sum(float(matrix[i][j]) for i in range(n)) / n for j in range(n)]


def product_of_layers(mixing: list[np.ndarray]) -> np.ndarray:
    """M_L ⋯ M_1, one entry at a time: the first layer's matrix is the rightmost."""
    n = len(mixing[0])
    product = np.eye(n)
    for matrix in mixing:
        product = np.array(
            [
                [sum(matrix[i, k] * product[k, j] for k in range(n)) for j in range(n)]
                for i in range(n)
            ]
        )
    return product


def test_information_flow_scores_equal_the_top_layer_shares_written_out(model):
    trace = model.run("Fruit flies like a banana.")
    scores = information_flow.information_flow(model, trace).scores()
    n, n_heads = trace.n_tokens, model.n_heads
    weights = np.asarray(trace.attentions, dtype=np.float64)  # (L, H, n, n)
    # last-layer attention: the mean over heads of the top layer, then over its query rows
    top = [
        [sum(weights[-1, h, i, j] for h in range(n_heads)) / n_heads for j in range(n)]
        for i in range(n)
    ]
    np.testing.assert_allclose(scores["attention"], mean_of_rows(top), atol=1e-6)
    # rollout: ½(Ā + I) per layer, rows renormalised, multiplied through every layer
    residual = []
    for layer in range(model.n_layers):
        a_hat = np.array(
            [
                [
                    0.5 * sum(weights[layer, h, i, j] for h in range(n_heads)) / n_heads
                    + 0.5 * (i == j)
                    for j in range(n)
                ]
                for i in range(n)
            ]
        )
        residual.append(a_hat / a_hat.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(
        scores["rollout"], mean_of_rows(product_of_layers(residual)), atol=1e-5
    )
    # norm rollout: each layer's σ-divided contribution norms (checked head by head above) as
    # shares of their row, multiplied through every layer
    norm_shares = []
    for layer in range(model.n_layers):
        norms = rollout.layer_contributions(model, trace, layer).astype(np.float64)
        norm_shares.append(norms / norms.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(
        scores["norm"], mean_of_rows(product_of_layers(norm_shares)), atol=1e-4
    )
    # flow: every top position's max-flows as shares of that position's total, then the mean
    flow = rollout.attention_flow(np.stack(residual))  # checked against a brute-force min-cut
    shares = [[flow[i, j] / sum(flow[i, k] for k in range(n)) for j in range(n)] for i in range(n)]
    np.testing.assert_allclose(scores["flow"], mean_of_rows(shares), atol=1e-6)


def test_mean_change_and_special_share_written_out():
    curve = np.array([0.9, 0.7, 0.5, 0.8])  # k = 0 … 3
    expected = ((0.7 - 0.9) + (0.5 - 0.9) + (0.8 - 0.9)) / 3
    assert explanations.mean_change(curve) == pytest.approx(expected)
    assert explanations.mean_change(np.array([0.4])) == 0.0
    tokens = ("[CLS]", "a", "b", "[SEP]", "c", "[SEP]")  # a pair: two [SEP]s
    shares = np.array([0.3, 0.1, 0.05, 0.2, 0.15, 0.2])
    assert information_flow.special_share(shares, tokens) == pytest.approx(0.3 + 0.2 + 0.2)


# ---- 7. lens and words -----------------------------------------------------------------------
def test_lens_against_explicit_cosines(model):
    trace = model.run("The bank raised its rates.")
    hidden = trace.hidden_states
    settle = lens.token_settling(hidden)
    for layer in (0, 3, model.n_layers):
        for i in range(trace.n_tokens):
            a, b = hidden[layer, i].astype(np.float64), hidden[-1, i].astype(np.float64)
            assert abs(settle[layer, i] - a @ b / np.linalg.norm(a) / np.linalg.norm(b)) < 1e-6
    sentence = lens.sentence_settling(hidden)
    final = similarity.sentence_embedding(trace)
    for layer in range(model.n_layers + 1):
        mean = hidden[layer].astype(np.float64).mean(0)
        assert abs(sentence[layer] - mean @ final / np.linalg.norm(mean)) < 1e-6


def test_similarity_by_layer_ends_at_the_sentence_similarity(model):
    first, second = model.run("A man plays a guitar."), model.run("Someone strums an old guitar.")
    by_layer = lens.similarity_by_layer(first.hidden_states, second.hidden_states)
    for layer in (0, 2):
        a = first.hidden_states[layer].astype(np.float64).mean(0)
        b = second.hidden_states[layer].astype(np.float64).mean(0)
        assert abs(by_layer[layer] - a @ b / np.linalg.norm(a) / np.linalg.norm(b)) < 1e-6
    assert abs(by_layer[-1] - similarity.sentence_similarity(first, second)) < 1e-6


def test_nearest_by_layer_equals_cosines_with_every_table_row(model):
    trace = model.run("The bank raised its rates.")
    table = np.random.default_rng(5).normal(size=(40, model.d_model))
    unit_table = table / np.linalg.norm(table, axis=1, keepdims=True)
    token, k = 2, 3
    ids, cosines = lens.nearest_by_layer(trace.hidden_states, token, unit_table, k=k)
    for state in range(model.n_layers + 1):
        h = trace.hidden_states[state, token].astype(np.float64)
        cos = [float(h @ row) / float(np.sqrt(h @ h)) for row in unit_table]
        best = sorted(range(len(cos)), key=lambda r: -cos[r])[:k]
        assert ids[state].tolist() == best, state
        np.testing.assert_allclose(cosines[state], [cos[r] for r in best], atol=1e-6)


def test_word_merge_sums_keys_and_averages_queries():
    tokens = ["[CLS]", "em", "##bed", "##ding", "##s", "are", "fun", "[SEP]"]
    groups = words.word_groups(tokens)
    assert groups == ((0,), (1, 2, 3, 4), (5,), (6,), (7,))
    assert words.word_labels(tokens, groups) == ["[CLS]", "embeddings", "are", "fun", "[SEP]"]
    # a bare "##" is a word of its own (a piece after it continues that word)
    assert words.word_groups(["[CLS]", "a", "##", "##b", "[SEP]"]) == ((0,), (1,), (2, 3), (4,))
    matrix = random_attention(1, 2, len(tokens))[0]  # (2, n, n)
    merged = words.merge_attention(matrix, groups)
    for h in range(2):
        for a, group_a in enumerate(groups):
            for b, group_b in enumerate(groups):
                expected = sum(sum(matrix[h, q, k] for k in group_b) for q in group_a) / len(
                    group_a
                )
                assert abs(merged[h, a, b] - expected) < 1e-12
    np.testing.assert_allclose(merged.sum(axis=-1), 1.0)  # rows still sum to 1
    scores = np.arange(len(tokens), dtype=float)
    assert words.merge_scores(scores, groups).tolist() == [0.0, 10.0, 5.0, 6.0, 7.0]
    # the merge adds neighbouring columns, so groups must be consecutive runs of every position
    with pytest.raises(ValueError):
        words.merge_attention(matrix, ((0,), (1, 3), (2,), (4,), (5,), (6,), (7,)))
    with pytest.raises(ValueError):
        words.merge_scores(scores, ((0,), (1, 2, 3, 4), (5,), (6,)))  # position 7 left out


def test_fastest_falls_names_ties_and_counts_the_random_orders_beaten():
    chance = np.array([-0.05, -0.02, 0.01, -0.12])  # four random orders' mean changes
    # a clear winner, below zero and below every random order
    verdict = explanations.fastest_falls({"a": -0.30, "b": -0.10}, chance)
    assert (verdict.fastest, verdict.orders_beaten, verdict.beats_chance) == (["a"], 4, True)
    # the band the page states: mean, population sd, smallest and largest of the four
    mean = (-0.05 - 0.02 + 0.01 - 0.12) / 4
    sd = (sum((c - mean) ** 2 for c in (-0.05, -0.02, 0.01, -0.12)) / 4) ** 0.5
    assert verdict.chance == pytest.approx((mean, sd, -0.12, 0.01))
    # "Dogs bark.": three methods remove the same pieces; all are named
    tied = {"a": -0.698, "b": -0.698, "c": -0.6981, "d": -0.5}
    assert explanations.fastest_falls(tied, chance).fastest == ["a", "b", "c"]
    # inside the band: below three orders, not the lowest one
    inside = explanations.fastest_falls({"a": -0.1}, chance)
    assert (inside.orders_beaten, inside.beats_chance) == (3, False)
    # within a tie of a random order does not beat it
    assert explanations.fastest_falls({"a": -0.1202}, chance).orders_beaten == 3
    # a rise is never a win, even when every random order rises more
    rising = explanations.fastest_falls({"a": 0.001}, np.array([0.05, 0.04]))
    assert (rising.orders_beaten, rising.beats_chance) == (2, False)


def test_deletion_rankings_hold_every_method_and_seeded_random_orders():
    tokens = ("[CLS]", "a", "b", "c", "d", "[SEP]")
    scores = {"m": np.array([9.0, 1.0, 4.0, 3.0, 2.0, 9.0])}
    rankings = explanations.deletion_rankings(scores, tokens, n_random=5)
    assert rankings["m"].tolist() == [2, 3, 4, 1]
    randoms = [name for name in rankings if explanations.is_random(name)]
    assert randoms == [explanations.random_name(seed) for seed in range(5)]
    for seed, name in enumerate(randoms):
        expected = np.random.default_rng(seed).permutation([1, 2, 3, 4])
        assert rankings[name].tolist() == expected.tolist()
    curves = {
        "m": np.array([1.0, 0.5]),
        **{n: np.array([1.0, 0.1 * i]) for i, n in enumerate(randoms)},
    }
    methods, band = explanations.split_chance(curves)
    assert list(methods) == ["m"] and band.curves.shape == (5, 2)
    np.testing.assert_allclose(band.low, [1.0, 0.0])
    np.testing.assert_allclose(band.high, [1.0, 0.4])
    np.testing.assert_allclose(band.mean, [1.0, 0.2])
    np.testing.assert_allclose(band.changes, [-1.0, -0.9, -0.8, -0.7, -0.6])


def spearman_written_out(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def test_paper_check_counts_where_rollout_and_flow_beat_raw_attention():
    allowed = np.array([False, True, True, True, True, True, False])
    importance = np.array([0.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    scores = {
        "attention": np.array([0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 0.5]),  # reversed: ρ = −1
        "rollout": np.array([0.5, 5.0, 4.0, 3.0, 1.0, 2.0, 0.5]),  # nearly the same order
        "flow": np.array([0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5]),  # flat: ρ undefined
    }
    other = np.array([0.0, 1.0, 3.0, 2.0, 5.0, 4.0, 0.0])
    check = explanations.paper_check(scores, {"removal": importance, "ig": other}, allowed)
    for reference, values in (("removal", importance), ("ig", other)):
        for name in ("attention", "rollout"):
            expected = spearman_written_out(scores[name][allowed], values[allowed])
            assert check.rho[reference][name] == pytest.approx(expected, abs=1e-12)
        assert np.isnan(check.rho[reference]["flow"])
    # rollout beats attention against "removal" (0.9 > −1) but not against "ig"; flow never
    # counts (undefined)
    assert (check.wins, check.comparisons) == (1, 2)
    assert not check.agrees and not check.disagrees
    agreeing = explanations.paper_check(scores, {"removal": importance}, allowed)
    assert agreeing.agrees and (agreeing.wins, agreeing.comparisons) == (1, 1)


def test_share_entropy_in_bits():
    bits, even = information_flow.share_entropy(np.full(8, 1 / 8))
    assert bits == pytest.approx(3.0) and even == pytest.approx(3.0)
    shares = np.array([0.5, 0.25, 0.25, 0.0])
    assert information_flow.share_entropy(shares) == (pytest.approx(1.5), pytest.approx(2.0))


def test_batch_plan_fits_the_bytes_and_checkpoints_only_when_one_input_would_not(model):
    n = 40
    one = saliency.pass_bytes(model, n, 1, checkpointed=False)
    assert saliency.batch_plan(model, n, 32, 100 * one) == (32, False)
    assert saliency.batch_plan(model, n, 32, 3 * one) == (3, False)
    checkpointed = saliency.pass_bytes(model, n, 1, True)
    assert checkpointed < one  # one layer's activations at a time, besides every layer's input
    assert saliency.batch_plan(model, n, 32, one - 1) == ((one - 1) // checkpointed, True)
    assert saliency.batch_plan(model, n, 32, 1) == (1, True)


def test_checkpointed_gradients_equal_the_plain_ones(model):
    """One byte per pass forces one input at a time through checkpointed layers."""
    trace = model.run("The river bank flooded after the storm.", "Money grows.")
    target = saliency.embedding_target(trace)
    plain, plain_gap, _ = saliency.integrated_gradients(model, trace, target, 8)
    tight, tight_gap, _ = saliency.integrated_gradients(model, trace, target, 8, max_pass_bytes=1)
    np.testing.assert_allclose(tight, plain, rtol=1e-4, atol=1e-6)
    assert abs(tight_gap - plain_gap) < 1e-5
    np.testing.assert_allclose(
        saliency.gradient_x_input(model, trace, target, max_pass_bytes=1),
        saliency.gradient_x_input(model, trace, target),
        rtol=1e-4,
        atol=1e-6,
    )


def test_the_deletion_test_removes_at_most_k_pieces_and_always_leaves_one():
    from ui import explanations_runs

    k = explanations_runs.DELETION_K
    with_specials = np.array([False] + [True] * 20 + [False])  # [CLS] … [SEP]
    assert explanations_runs.deletion_steps(with_specials) == k  # a long sentence: K
    short = np.array([False, True, True, True, False])
    assert explanations_runs.deletion_steps(short) == 3  # every removable piece
    no_specials = np.ones(4, dtype=bool)  # GPT-2: every piece removable, one must stay
    assert explanations_runs.deletion_steps(no_specials) == 3
    assert explanations_runs.deletion_steps(np.array([False, False])) == 0


def test_a_method_whose_every_piece_counts_against_names_none():
    """top_pieces: the highest allowed score, or None when even that one is at or below 0 (the
    least negative piece still counts against the output); a disallowed piece is never named."""
    from core import explanations

    allowed = np.array([False, True, True, True])  # piece 0: a special piece
    scores = {
        "mixed": np.array([9.0, -1.0, 0.5, 0.2]),
        "against": np.array([9.0, -0.3, -0.1, -2.0]),
    }
    assert explanations.top_pieces(scores, allowed) == {"mixed": 2, "against": None}
