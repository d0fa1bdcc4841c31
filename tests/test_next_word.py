"""What a decoder predicts next, what each switch does to it, and the readings built on it.

Every number is checked against transformers' own model of a tiny random checkpoint (built by
tests/tiny_families.py, loaded through the app's loader), changed by hand where a switch has no
transformers flag: a removed head is its rows of W_O zeroed, removed positions a zeroed position
table, √d_k off GPT-2's attention scaling set to 1 (what its scale_attn_weights=False sets).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_families import load_reference, write_tiny_family

import core
from core import lens, next_word, positional, rollout, saliency
from core.models import policy_from_settings
from core.transformer import STREAM_MID, hook_name

LOCAL = policy_from_settings({"ATTENTION_EXPLORER_LOCAL_FOLDERS": "1"})
TEXT = "the river bank flows past the old mill, and money grows in"
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    """family -> (model loaded by the app's loader, its folder)."""
    out = {}
    for seed, family in enumerate(("gpt2", "llama"), start=3):
        folder = write_tiny_family(tmp_path_factory.mktemp(family), family, seed=seed)
        out[family] = (core.load_model(str(folder), LOCAL), folder)
    return out


def reference_log_probs(reference: torch.nn.Module, model: core.Transformer) -> np.ndarray:
    """(vocab,) transformers' log p(next piece) after TEXT, float64."""
    ids = torch.tensor([model.encode(TEXT).input_ids])
    with torch.inference_mode():
        logits = reference(input_ids=ids).logits[0, -1].double()
    return torch.log_softmax(logits, dim=-1).numpy()


def assert_close(
    ours: np.ndarray, expected: np.ndarray, what: str, rtol: float = 0.0, atol: float = TOLERANCE
) -> None:
    torch.testing.assert_close(
        torch.as_tensor(np.asarray(ours, dtype=np.float64)),
        torch.as_tensor(np.asarray(expected, dtype=np.float64)),
        atol=atol,
        rtol=rtol,
        msg=lambda m: f"{what}: {m}",
    )


# ---- the prediction and its switches ------------------------------------------------------------
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_prediction_as_trained_is_transformers(decoders, family):
    model, folder = decoders[family]
    ours = next_word.next_log_probs(model, TEXT)
    assert ours.shape == (model.dims.vocab_size,) and not ours.flags.writeable
    assert_close(ours, reference_log_probs(load_reference(folder, family), model), "as trained")


def test_each_switch_matches_transformers_changed_by_hand(decoders):
    model, folder = decoders["gpt2"]
    layer, head, d_head = 1, 2, model.d_head

    unscaled = load_reference(folder, "gpt2")
    for block in unscaled.transformer.h:  # what scale_attn_weights=False sets at construction
        block.attn.scaling = 1.0
    assert_close(
        next_word.next_log_probs(model, TEXT, scale=False),
        reference_log_probs(unscaled, model),
        "√d_k off",
    )

    no_positions = load_reference(folder, "gpt2")
    with torch.no_grad():
        no_positions.transformer.wpe.weight.zero_()
    assert_close(
        next_word.next_log_probs(model, TEXT, positions=False),
        reference_log_probs(no_positions, model),
        "positions removed",
    )

    without_head = load_reference(folder, "gpt2")
    with torch.no_grad():  # Conv1D (in, out): the head's input rows of W_O
        without_head.transformer.h[layer].attn.c_proj.weight[
            head * d_head : (head + 1) * d_head
        ] = 0.0
    assert_close(
        next_word.next_log_probs(model, TEXT, ablate={(layer, head)}),
        reference_log_probs(without_head, model),
        "one head removed",
    )

    without_layer = load_reference(folder, "gpt2")
    with torch.no_grad():
        without_layer.transformer.h[layer].attn.c_proj.weight.zero_()
    every_head = {(layer, h) for h in range(model.n_heads)}
    assert_close(
        next_word.next_log_probs(model, TEXT, ablate=every_head),
        reference_log_probs(without_layer, model),
        "a layer's heads removed",
    )


def test_removing_the_mask_changes_only_what_a_row_could_not_see(decoders):
    """Layer 0's last row sees every piece either way; an earlier row gains the later ones, so
    from layer 1 on the last position's vector moves too (the next piece reads it)."""
    model, _ = decoders["llama"]
    masked, unmasked = model.run(TEXT), model.run(TEXT, causal=False)
    assert masked.options.causal and not unmasked.options.causal
    np.testing.assert_allclose(
        masked.attentions[0, :, -1], unmasked.attentions[0, :, -1], atol=1e-6
    )
    assert np.abs(masked.attentions[0, :, 0] - unmasked.attentions[0, :, 0]).max() > 1e-3
    trained = next_word.next_log_probs(model, TEXT)
    assert (
        next_word.total_variation(trained, next_word.next_log_probs(model, TEXT, causal=False)) > 0
    )


def test_an_encoder_has_no_prediction(model):
    with pytest.raises(ValueError, match="encoder"):
        next_word.next_log_probs(model, TEXT)


def test_compare_runs_and_the_grid_on_known_distributions():
    def log(p):
        return np.log(np.asarray(p, dtype=np.float64))

    trained = log([0.5, 0.3, 0.1, 0.1])
    same_first = log([0.4, 0.3, 0.2, 0.1])
    new_first = log([0.1, 0.2, 0.1, 0.6])
    runs = next_word.compare_runs(trained, {"a": same_first, "b": new_first}, k=2)
    assert [run.label for run in runs] == ["as trained", "a", "b"]
    assert [run.same_top for run in runs] == [True, True, False]
    assert runs[0].total_variation == 0.0
    assert runs[1].total_variation == pytest.approx(0.1)  # ½ (0.1 + 0 + 0.1 + 0)
    assert runs[2].total_variation == pytest.approx(0.5)  # ½ (0.4 + 0.1 + 0 + 0.5)
    assert runs[2].trained_top_probability == pytest.approx(0.1)
    assert list(runs[2].top_ids) == [3, 1]
    ids, grid = next_word.prediction_grid([trained, same_first, new_first], k=2)
    assert list(ids) == [0, 1, 3]  # trained's two likeliest, then run b's first
    np.testing.assert_allclose(grid[2], [0.1, 0.2, 0.6])
    assert list(next_word.top_k(log([0.2, 0.4, 0.4]), 3)) == [1, 2, 0]  # ties: lower row first


# ---- the logit lens -----------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_logit_lens_reads_every_state_through_the_final_norm_and_head(decoders, family):
    model, folder = decoders[family]
    reference = load_reference(folder, family)
    trace = model.run(TEXT)
    position = trace.n_tokens - 3
    ids = torch.tensor([list(trace.input_ids)])
    with torch.inference_mode():
        out = reference(input_ids=ids, output_hidden_states=True)
        # transformers' states before the last are each layer's output, its last one is after
        # the final norm: read the others through the final norm and the head by hand
        body = reference.transformer if family == "gpt2" else reference.model
        final_norm = body.ln_f if family == "gpt2" else body.norm
        states = [h[0, position] for h in out.hidden_states[:-1]]
        expected = [reference.lm_head(final_norm(state)) for state in states]
        expected.append(out.logits[0, position])
        expected_log = torch.log_softmax(torch.stack(expected).double(), dim=-1).numpy()
    reading = lens.logit_lens(model, trace.hidden_states, position, k=5)
    assert reading.ids.shape == (model.n_layers + 1, 5)
    for state, row in enumerate(expected_log):
        assert_close(reading.probabilities[state], np.exp(np.sort(row)[::-1][:5]), f"state {state}")
        assert_close(reading.final_probabilities[state], np.exp(row[reading.final_ids]), "final")
    # the last state's reading is the model's own prediction
    assert list(reading.final_ids) == list(next_word.top_k(expected_log[-1], 5))


# ---- a decoder's explanations -------------------------------------------------------------------
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_next_piece_gradients_match_transformers_autograd(decoders, family):
    model, folder = decoders[family]
    reference = load_reference(folder, family)
    trace = model.run(TEXT)
    piece = int(next_word.top_k(next_word.next_log_probs(model, TEXT), 2)[1])  # the second
    ours = saliency.target_gradient(model, trace, saliency.next_piece_target(model, piece))
    embeddings = reference.get_input_embeddings()
    word_vectors = embeddings(torch.tensor([list(trace.input_ids)])).detach().requires_grad_(True)
    log_p = torch.log_softmax(reference(inputs_embeds=word_vectors).logits[0, -1], dim=-1)[piece]
    (expected,) = torch.autograd.grad(log_p, word_vectors)
    # Gradients of a random model run to ~10 in float32, summed over many paths in another order
    # than transformers sums them: every element is compared to 1e-5 of the largest one (a sign
    # or an axis wrong is off by the gradient's own size).
    scale = float(expected.abs().max())
    assert_close(ours, expected[0].numpy(), "∂ log p / ∂ word vectors", atol=1e-5 * scale)


def test_the_deletion_test_keeps_a_piece_of_a_text_without_specials(decoders):
    model, _ = decoders["gpt2"]
    trace = model.run("the bank")
    assert not any(trace.special)  # GPT-2 adds no specials: every piece may go
    target = saliency.next_piece_target(model, 5)
    everything = {"all": np.arange(trace.n_tokens)}
    with pytest.raises(ValueError, match="nothing to run"):
        saliency.deletion_curves(model, trace, target, everything, k_max=trace.n_tokens)
    curves = saliency.deletion_curves(model, trace, target, everything, k_max=trace.n_tokens - 1)
    assert curves["all"].shape == (trace.n_tokens,)
    one_piece = model.run(".")
    assert one_piece.n_tokens == 1  # precondition
    assert not saliency.leave_one_out(model, one_piece, target).any()  # nothing left to run


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_pre_norm_contributions_split_the_stream_exactly(decoders, family):
    """A pre-norm layer's x_i + attention_i is Σ_j z_ij + b_O with no norm after it: each
    contribution's length is ‖z_ij‖, and the z_ij add up to the layer's own stream."""
    model, _ = decoders[family]
    trace = model.run(TEXT)
    layer = 1
    x = np.asarray(trace.hidden_states[layer], dtype=np.float64)  # (n, d)
    alpha = np.asarray(trace.attentions[layer], dtype=np.float64)  # (H, n, n)
    values = np.asarray(trace.values[layer], dtype=np.float64)  # (H, n, d_head)
    w_o = model.attention_weights(layer).output.weight.double().numpy()  # (d, H d_head)
    per_head = w_o.T.reshape(model.n_heads, model.d_head, model.d_model)  # (H, d_head, d)
    moved = np.einsum("hij,hjk,hkd->ijd", alpha, values, per_head)  # (n_q, n_k, d)
    z = moved + np.eye(len(x))[:, :, None] * x[None]  # the skip connection adds x_i to z_ii
    bias = model.attention_weights(layer).output.bias
    b_o = 0.0 if bias is None else bias.double().numpy()
    mid_stream = hook_name(STREAM_MID, layer)  # the stream between the layer's sublayers
    _, cache = model.run_with_cache(trace.input_ids, trace.segments, names=[mid_stream])
    assert_close(z.sum(axis=1) + b_o, cache[mid_stream].numpy(), "Σ_j z_ij + b_O = x + attention")
    norms = rollout.layer_contributions(model, trace, layer)
    assert_close(norms, np.linalg.norm(z, axis=-1), "‖z_ij‖")


# ---- rotary positions, checked by numbers -------------------------------------------------------
def test_the_rotary_check_finds_the_models_turn_and_a_wrong_one(decoders):
    model, _ = decoders["llama"]
    trace = model.run(TEXT)
    check = positional.rotary_check(model, trace, 2, 3, shift=11)
    assert check.max_turn_error < 1e-5 and check.max_shift_error < 1e-9
    scores = trace.head_scores(2, 3) * np.sqrt(model.d_head)  # the model's own, before √d
    finite = np.isfinite(scores)
    np.testing.assert_allclose(check.scores[finite], scores[finite], atol=1e-4)
    # pair i turns θ_i = Θ^(-2i/d_head) per position: a full turn every 2π Θ^(2i/d_head)
    for pair in (0, 1, model.d_head // 2 - 1):
        expected = 2 * np.pi * model.dims.rope_theta ** (2 * pair / model.d_head)
        assert check.periods[pair] == pytest.approx(expected)
    # a turn by another base is not the model's: the check must say so
    wrong = positional.rotary_turn(
        np.ones((4, model.d_head)), np.arange(4), model.dims.rope_theta * 2
    )
    right = positional.rotary_turn(np.ones((4, model.d_head)), np.arange(4), model.dims.rope_theta)
    assert np.abs(wrong - right).max() > 1e-3
    np.testing.assert_allclose(right[0], np.ones(model.d_head))  # position 0: no turn


def test_rotary_angles_depend_on_distance_alone():
    code = positional.rotary_encoding(40, 16, 10_000.0)
    similarity = code @ code.T
    assert positional.explained_by_distance(similarity) == pytest.approx(1.0)
