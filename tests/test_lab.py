"""The training lab: task targets, the loss and its gradient, training to the known solution, page."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
import torch
from conftest import assert_no_exception, run_page
from shown import sent_array, shown

from core import lab
from ui import lab_charts

LAB = "views/lab.py"
torch.set_num_threads(1)  # the page trains on one thread; determinism is checked on the same


def batch(task: str, n_sequences: int = 64, seed: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    return lab.make_batch(lab.TASKS[task], n_sequences, torch.Generator().manual_seed(seed))


# ---- tasks: every target checked by an explicit loop ------------------------------------------
def test_previous_token_targets():
    tokens, targets = batch("previous")
    for row, target_row in zip(tokens.tolist(), targets.tolist(), strict=True):
        for i in range(len(row)):
            assert target_row[i] == (i - 1 if i > 0 else 0)


def test_first_occurrence_targets():
    tokens, targets = batch("first")
    assert (targets != torch.arange(tokens.shape[1])).any(), "the batch should hold repeats"
    for row, target_row in zip(tokens.tolist(), targets.tolist(), strict=True):
        for i, word in enumerate(row):
            first = next(j for j in range(len(row)) if row[j] == word)
            assert target_row[i] == first


def test_bracket_targets_match_a_stack_scan():
    tokens, targets = batch("bracket", n_sequences=200)
    for row, target_row in zip(tokens.tolist(), targets.tolist(), strict=True):
        partner, stack = {}, []
        for i, token in enumerate(row):
            symbol = lab.BRACKETS[token]
            if symbol in "([{<":
                stack.append(i)
            else:  # a closer matches the latest unmatched opener, whatever the kinds say
                j = stack.pop()
                assert "([{<".index(lab.BRACKETS[row[j]]) == ")]}>".index(symbol)
                partner[i], partner[j] = j, i
        assert not stack
        assert target_row == [partner[i] for i in range(len(row))]


def test_bracket_pool_is_every_balanced_sequence_once():
    pool = lab.balanced_bracket_sequences()
    assert len({tuple(row) for row in pool.tolist()}) == len(pool) == 14 * math.factorial(4)
    for row in pool.tolist():
        assert sorted(row) == list(range(8))  # each kind opens once and closes once


def test_probes_are_valid_sequences_of_their_tasks():
    bracket = lab.TASKS["bracket"]
    assert tuple(lab.balanced_bracket_sequences()[0].shape) == (bracket.n_tokens,)
    assert list(bracket.probe) in lab.balanced_bracket_sequences().tolist()
    for task in lab.TASKS.values():
        assert len(task.probe) == task.n_tokens
        assert max(task.probe) < len(task.vocabulary)


# ---- the model and its loss against formulas written out ---------------------------------------
TINY_SEQUENCES = {
    "first": [[0, 1, 0, 2, 1, 3, 0, 2, 4, 1], [4, 4, 3, 2, 1, 0, 0, 1, 2, 3]],
    "bracket": [
        [0, 2, 3, 4, 6, 7, 5, 1],
        [2, 3, 0, 1, 6, 4, 5, 7],
    ],  # ( [ ] { < > } ) and [ ] ( ) < { } >
}


def tiny_case(dtype=torch.float64, task_name="first", **changes):
    """A seeded model with d_model 3, d_head 2 and two sequences of the task, as a stack of one
    run: (params, tokens (1, B, n), targets (1, B, n), stack)."""
    task = lab.TASKS[task_name]
    settings = dataclasses.replace(lab.Settings(task=task_name, d_head=2), **changes)
    params = lab.init_parameters(task, 2, torch.Generator().manual_seed(1), d_model=3, dtype=dtype)
    tokens = torch.tensor(TINY_SEQUENCES[task_name])
    stack = lab.Stack((settings,))
    return params, tokens[None], lab.task_targets(task, tokens)[None], stack


def explicit_weights(params, tokens, settings, run=0) -> np.ndarray:
    """α_ij by the formula, one element at a time, in float64 numpy, for one run of a stack:
    s_ij = (W_q x_i)·(W_k x_j), over √d_head when scaled, softmax over the keys allowed."""
    emb = params.token_embedding[run].detach().double().numpy()
    pos = params.position_embedding[run].detach().double().numpy()
    w_q, w_k = (
        params.w_query[run].detach().double().numpy(),
        params.w_key[run].detach().double().numpy(),
    )
    n = tokens.shape[-1]
    sequences = tokens[run].tolist()
    weights = np.zeros((len(sequences), n, n))
    for b, row in enumerate(sequences):
        x = [emb[row[i]] + (pos[i] if settings.positions else 0.0) for i in range(n)]
        for i in range(n):
            allowed = [j for j in range(n) if not settings.causal or j <= i]
            scores = {}
            for j in allowed:
                s = sum((w_q @ x[i])[c] * (w_k @ x[j])[c] for c in range(w_q.shape[0]))
                scores[j] = s / math.sqrt(w_q.shape[0]) if settings.scale else s
            top = max(scores.values())
            total = sum(math.exp(s - top) for s in scores.values())
            for j, s in scores.items():
                weights[b, i, j] = math.exp(s - top) / total
    return weights


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"scale": False},
        {"causal": True},
        {"positions": False},
        {"task_name": "bracket", "causal": True},  # openers' targets are hidden by the mask
    ],
    ids=["default", "unscaled", "causal", "no-positions", "bracket-causal"],
)
def test_attention_weights_and_both_losses_match_the_formulas(changes):
    params, tokens, targets, stack = tiny_case(**changes)
    settings = stack.shared
    expected = explicit_weights(params, tokens, settings)
    got = lab.attention_weights(params, tokens, stack)[0].detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)

    squared, log_loss, count = 0.0, 0.0, 0
    for b, i in np.ndindex(*targets.shape[1:]):
        t = int(targets[0, b, i])
        if settings.causal and t > i:
            continue  # a hidden target is left out of the loss
        squared += sum((expected[b, i, j] - (j == t)) ** 2 for j in range(tokens.shape[-1]))
        log_loss -= math.log(expected[b, i, t])
        count += 1
    squared_got = lab.loss(params, tokens, targets, stack)
    log_stack = lab.Stack((dataclasses.replace(settings, loss="cross_entropy"),))
    log_got = lab.loss(params, tokens, targets, log_stack)
    assert squared_got.shape == (1,)
    assert squared_got.item() == pytest.approx(squared / count, rel=1e-10)
    assert log_got.item() == pytest.approx(log_loss / count, rel=1e-10)


def test_a_mixed_stack_scores_every_run_by_its_own_settings():
    """Three runs in one stack (own seeds, scaled or not, each loss): each run's weights and
    loss are the formulas' for that run alone."""
    task = lab.TASKS["first"]
    runs = (
        lab.Settings("first", d_head=2, seed=1),
        lab.Settings("first", d_head=2, seed=2, scale=False, loss="cross_entropy"),
        lab.Settings("first", d_head=2, seed=3, scale=False, start_at_other_spread=True),
    )
    starts = [
        lab.init_parameters(
            task, 2, torch.Generator().manual_seed(s.seed), d_model=3, dtype=torch.float64
        )
        for s in runs
    ]
    params = lab.stack_parameters(starts, [lab.start_factor(s) for s in runs])
    tokens = torch.tensor(TINY_SEQUENCES["first"]).expand(3, 2, 10)
    targets = lab.task_targets(task, tokens[0]).expand(3, 2, 10)
    stack = lab.Stack(runs)
    weights = lab.attention_weights(params, tokens, stack).detach().numpy()
    losses = lab.loss(params, tokens, targets, stack)
    for r, settings in enumerate(runs):
        expected = explicit_weights(params, tokens, settings, run=r)
        np.testing.assert_allclose(weights[r], expected, rtol=1e-10, atol=1e-12)
        alone = lab.loss(
            params.part(r, r + 1), tokens[r : r + 1], targets[r : r + 1], stack.part(r, r + 1)
        )
        assert losses[r].item() == pytest.approx(alone.item(), rel=1e-12)
    # the third run's W_q and W_k really are its start shrunk by d_head^(1/4)
    torch.testing.assert_close(params.w_query[2], starts[2].w_query[0] * 2**-0.25)


def test_runs_trained_together_must_share_their_shapes():
    with pytest.raises(ValueError, match="d_head"):
        lab.Stack((lab.Settings(d_head=8), lab.Settings(d_head=16)))
    with pytest.raises(ValueError, match="at least one"):
        lab.Stack(())


@pytest.mark.parametrize("loss_name", ["squared", "cross_entropy"])
def test_gradient_matches_finite_differences(loss_name):
    params, tokens, targets, stack = tiny_case(loss=loss_name, causal=True)
    value = lab.loss(params, tokens, targets, stack).sum()
    gradients = torch.autograd.grad(value, params.tensors())
    h = 1e-6
    for tensor, gradient in zip(params.tensors(), gradients, strict=True):
        numeric = torch.zeros_like(tensor)
        with torch.no_grad():
            for index in np.ndindex(*tensor.shape):
                original = tensor[index].item()
                tensor[index] = original + h
                up = lab.loss(params, tokens, targets, stack).item()
                tensor[index] = original - h
                down = lab.loss(params, tokens, targets, stack).item()
                tensor[index] = original
                numeric[index] = (up - down) / (2 * h)
        torch.testing.assert_close(gradient, numeric, rtol=1e-5, atol=1e-8)


def test_adam_follows_the_papers_formulas():
    """Kingma & Ba (2015), Algorithm 1, written in float64 numpy: the lab's optimizer moves every
    parameter as the paper's update does, step by step."""
    params, tokens, targets, stack = tiny_case()
    expected = [tensor.detach().double().numpy().copy() for tensor in params.tensors()]
    moments = [np.zeros_like(value) for value in expected]
    squares = [np.zeros_like(value) for value in expected]
    lr, beta1, beta2, eps = 0.05, 0.9, 0.999, 1e-8
    optimizer = lab.Adam(params.tensors(), lr=lr)
    for t in range(1, 6):
        loss_now = lab.loss(params, tokens, targets, stack).sum()
        gradients = list(torch.autograd.grad(loss_now, params.tensors()))
        optimizer.step(gradients)
        for value, gradient, m, v in zip(expected, gradients, moments, squares, strict=True):
            g = gradient.double().numpy()
            m[:] = beta1 * m + (1 - beta1) * g
            v[:] = beta2 * v + (1 - beta2) * g**2
            m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
            value -= lr * m_hat / (np.sqrt(v_hat) + eps)
        for mine, theirs in zip(params.tensors(), expected, strict=True):
            np.testing.assert_allclose(
                mine.detach().double().numpy(), theirs, rtol=1e-9, atol=1e-12
            )
    assert not torch.equal(params.w_query, tiny_case()[0].w_query), "the parameters moved"


def test_bilinear_form_entries_add_up_to_the_scores():
    params, tokens, _, stack = tiny_case(scale=True)
    form = lab.bilinear_form(params, stack)[0].detach().numpy()  # rows: 5 words, then positions
    n_words = len(lab.TASKS["first"].vocabulary)
    scores = lab.masked_scores(params, tokens, stack)[0].detach().numpy()
    for b, row in enumerate(tokens[0].tolist()):
        for i, j in [(0, 0), (3, 7), (9, 2)]:
            word_i, word_j, pos_i, pos_j = row[i], row[j], n_words + i, n_words + j
            four_parts = (
                form[word_i, word_j]
                + form[word_i, pos_j]
                + form[pos_i, word_j]
                + form[pos_i, pos_j]
            )
            assert four_parts == pytest.approx(scores[b, i, j], rel=1e-9)


def test_a_tie_between_two_copies_is_not_a_hit_and_locked_rows_are_counted():
    # Row 0 ties between keys 0 and 1; row 1 is nearly all on key 1 (right: not locked); row 2
    # is locked on wrong key 0 (its weight there is above LOCKED_WEIGHT); row 3 is a plain hit.
    scores = torch.tensor(
        [[[[0.0, 0.0, -30.0], [-9.0, 0.0, -9.0], [20.0, 0.0, 0.0], [0.0, 0.0, 1.0]]]],
        dtype=torch.float64,
    )  # (R 1, B 1, n_q 4, n_k 3): a non-square map is fine for the measure
    targets = torch.tensor([[[0, 1, 2, 2]]])
    score = lab.measure(scores, targets)
    weights = np.exp(scores[0, 0].numpy())
    weights /= weights.sum(axis=1, keepdims=True)
    assert score.accuracy[0] == pytest.approx(2 / 4)
    assert score.mass[0] == pytest.approx(
        np.mean([weights[i, t] for i, t in enumerate([0, 1, 2, 2])])
    )
    assert weights[1, 1] >= lab.LOCKED_WEIGHT, "a row nearly all on its target is not locked"
    assert weights[2, 0] >= lab.LOCKED_WEIGHT and score.locked[0] == pytest.approx(1 / 4)
    all_right = lab.measure(scores[..., [1], :], targets[..., [1]])
    assert all_right.locked[0] == 0 and all_right.accuracy[0] == 1
    assert score.spread[0] == pytest.approx(np.std(scores.numpy(), ddof=1))


def test_spread_counts_only_the_pairs_the_mask_leaves():
    scores = lab.apply_mask(torch.arange(9.0).view(1, 1, 3, 3), lab.causal_mask(3))
    visible = [0.0, 3.0, 4.0, 6.0, 7.0, 8.0]
    assert lab.score_spread(scores)[0].item() == pytest.approx(np.std(visible, ddof=1))


def test_softmax_rows_matches_torch_and_masks_exactly():
    scores = torch.tensor([[0.0, -200.0, 3.0, float("-inf")], [5.0, 5.0, -90.0, 0.0]])
    got = lab.softmax_rows(scores)
    torch.testing.assert_close(got, torch.softmax(scores, dim=-1), rtol=1e-6, atol=1e-30)
    assert got[0, 3].item() == 0.0  # a masked key gets exactly nothing


def test_snapshot_steps_and_lookup():
    steps = lab.snapshot_steps(300)
    assert steps[0] == 0 and steps[-1] == 300 and len(steps) == lab.N_SNAPSHOTS + 1
    assert lab.snapshot_steps(7).tolist() == list(range(8))
    assert lab.snapshot_steps(103).tolist()[-2:] == [102, 103]
    run = lab.train_one(lab.Settings(steps=12))  # a snapshot after every update
    run_steps = run.snapshot_steps.tolist()
    assert run_steps == list(range(13))
    sparse = dataclasses.replace(run, snapshot_steps=np.array([0, 6, 12]))
    assert [sparse.snapshot_index(step) for step in (-3, 0, 5, 6, 7, 12, 99)] == [
        0,
        0,
        0,
        1,
        1,
        2,
        2,
    ]


# ---- training reaches the known solution --------------------------------------------------------
@pytest.fixture(scope="module")
def default_runs() -> dict[str, lab.TrainingRun]:
    return {name: lab.train_one(lab.Settings(task=name)) for name in lab.TASKS}


@pytest.mark.parametrize("task", list(lab.TASKS))
def test_training_reaches_the_known_solution(default_runs, task):
    run = default_runs[task]
    assert run.eval_mass[0] < 0.5, "an untrained head should not already solve the task"
    assert run.eval_mass[-1] > 0.95
    assert run.eval_accuracy[-1] > 0.99 and run.solved
    # The probe's learned map is the target pattern, row by row.
    assert (run.probe_attention[-1].argmax(axis=1) == run.probe_targets).all()
    assert run.loss[-20:].mean() < run.loss[:20].mean() / 10


def test_previous_token_is_impossible_without_positions():
    run = lab.train_one(lab.Settings(task="previous", positions=False, steps=200))
    assert run.eval_mass[-1] < 0.5  # without positions, nothing says which key came just before


def test_causal_mask_hides_every_opening_brackets_partner():
    run = lab.train_one(lab.Settings(task="bracket", causal=True, steps=200))
    assert run.reachable_share == 0.5  # openers' partners lie in the future
    assert run.eval_accuracy[-1] == pytest.approx(0.5, abs=0.01)  # closers learn, openers cannot


def test_same_seed_same_numbers_other_seed_other_numbers():
    settings = lab.Settings(task="first", steps=40)
    first, again = lab.train_one(settings), lab.train_one(settings)
    np.testing.assert_array_equal(first.loss, again.loss)
    np.testing.assert_array_equal(first.probe_attention, again.probe_attention)
    np.testing.assert_array_equal(first.bilinear, again.bilinear)
    other = lab.train_one(dataclasses.replace(settings, seed=1))
    assert not np.array_equal(first.loss, other.loss)


def test_a_run_is_the_same_run_alone_or_in_any_stack():
    """The comparison's runs are the runs Train gives: bit for bit, whatever else trains beside
    them (a wide unscaled run is chaotic: any rounding difference would change its outcome)."""
    shared = {"task": "first", "d_head": 64, "steps": 60}
    runs = [
        lab.Settings(**shared, seed=4, scale=False),
        lab.Settings(**shared, seed=1),
        lab.Settings(**shared, seed=4, scale=False, start_at_other_spread=True),
        lab.Settings(**shared, seed=2, start_at_other_spread=True, loss="cross_entropy"),
    ]
    together = lab.train(runs)
    reversed_stack = lab.train(runs[::-1])[::-1]
    for run, other_order, settings in zip(together, reversed_stack, runs, strict=True):
        alone = lab.train_one(settings)
        assert run.settings == settings
        for field in ("loss", "eval_mass", "eval_accuracy", "score_spread", "probe_attention"):
            np.testing.assert_array_equal(getattr(run, field), getattr(alone, field), field)
            np.testing.assert_array_equal(getattr(other_order, field), getattr(alone, field))
    # Kept arrays are copies, not views of the stack's buffers (the door counts a view's base).
    assert all(run.eval_mass.base is None and run.bilinear.base is None for run in together)


@pytest.mark.parametrize("n_snapshots", [lab.N_SNAPSHOTS, lab.COMPARISON_SNAPSHOTS])
def test_kept_bytes_are_what_the_door_counts(n_snapshots):
    from ui import door

    settings = lab.Settings(task="bracket", steps=30)
    run = lab.train([settings], n_snapshots=n_snapshots)[0]
    assert door.nbytes(run) == pytest.approx(lab.kept_bytes(settings, n_snapshots), abs=1024)


def test_fewer_snapshots_keep_the_same_run():
    settings = lab.Settings(task="previous", steps=60, seed=3)
    dense, sparse = lab.train_one(settings), lab.train([settings], n_snapshots=6)[0]
    assert sparse.snapshot_steps.tolist() == list(range(0, 61, 10))
    np.testing.assert_array_equal(sparse.loss, dense.loss)
    at = [dense.snapshot_index(step) for step in sparse.snapshot_steps]
    np.testing.assert_array_equal(sparse.eval_mass, dense.eval_mass[at])


def test_unscaled_scores_start_sqrt_d_head_wider():
    """Same seed, same start: only the 1/√d_head differs, so the spreads differ by √d_head."""
    scaled = lab.train_one(lab.Settings(d_head=64, steps=1))
    unscaled = lab.train_one(lab.Settings(d_head=64, steps=1, scale=False))
    assert unscaled.initial_score_std / scaled.initial_score_std == pytest.approx(8.0, rel=1e-5)
    assert 1.0 < scaled.initial_score_std < 4.0  # embeddings N(0, 1), W_q and W_k N(0, 1/d_model)


def independent_start_spread(settings: lab.Settings) -> float:
    """The held-out score spread before training, recomputed in numpy float64 from the same
    draws: the start, then the held-out sequences, W_q and W_k times d_head^(∓1/4) if asked."""
    task = lab.TASKS[settings.task]
    generator = torch.Generator().manual_seed(settings.seed)
    start = lab.init_parameters(task, settings.d_head, generator)
    tokens, _ = lab.make_batch(task, lab.N_EVAL_SEQUENCES, generator)
    emb, pos = (
        start.token_embedding[0].detach().double().numpy(),
        start.position_embedding[0].detach().double().numpy(),
    )
    factor = 1.0
    if settings.start_at_other_spread:
        factor = settings.d_head ** (0.25 if settings.scale else -0.25)
    w_q = start.w_query[0].detach().double().numpy() * factor
    w_k = start.w_key[0].detach().double().numpy() * factor
    x = emb[tokens.numpy()] + pos  # (B, n, d_model)
    scores = (x @ w_q.T) @ (x @ w_k.T).transpose(0, 2, 1)  # (B, n, n) = q · k for every pair
    if settings.scale:
        scores /= math.sqrt(settings.d_head)
    return float(np.std(scores, ddof=1))


@pytest.mark.parametrize("d_head", [16, 128])
def test_starting_at_the_other_spread_matches_the_other_heads_spread(d_head):
    """The control switch: an unscaled head shrunk by d_head^(1/4) starts with exactly the
    scaled head's spread, a scaled head enlarged by d_head^(1/4) with the unscaled one's."""
    base = lab.Settings(task="first", d_head=d_head, steps=1, seed=5)
    kinds = {
        "scaled": base,
        "unscaled": dataclasses.replace(base, scale=False),
        "unscaled narrow": dataclasses.replace(base, scale=False, start_at_other_spread=True),
        "scaled wide": dataclasses.replace(base, start_at_other_spread=True),
    }
    runs = dict(zip(kinds, lab.train(list(kinds.values())), strict=True))
    for name, run in runs.items():
        assert run.initial_score_std == pytest.approx(
            independent_start_spread(kinds[name]), rel=1e-4
        )
    assert runs["unscaled narrow"].initial_score_std == pytest.approx(
        runs["scaled"].initial_score_std, rel=1e-5
    )
    assert runs["scaled wide"].initial_score_std == pytest.approx(
        runs["unscaled"].initial_score_std, rel=1e-5
    )
    wide_to_narrow = runs["unscaled"].initial_score_std / runs["scaled"].initial_score_std
    assert wide_to_narrow == pytest.approx(math.sqrt(d_head), rel=1e-5)


def test_initial_w_q_and_w_k_entries_have_variance_one_over_d_model():
    """N(0, 1/d_model) entries: a query entry, a sum of d_model N(0, 1) terms, has variance ≈ 1."""
    params = lab.init_parameters(lab.TASKS["previous"], 256, torch.Generator().manual_seed(7))
    for w in (params.w_query, params.w_key):
        entries = w.detach().double().flatten()  # 256 × 32 draws
        variance = float(((entries - entries.mean()) ** 2).sum()) / (len(entries) - 1)
        assert variance == pytest.approx(1 / lab.D_MODEL, rel=0.1)
    x = params.token_embedding[0].detach().double()  # (V, d_model), N(0, 1) entries
    queries = x @ params.w_query[0].detach().double().T  # (V, 256)
    assert float((queries**2).mean()) == pytest.approx(1.0, rel=0.3)


# ---- the comparison of many seeds ---------------------------------------------------------------
def hypergeometric_tail(a: int, b: int, n: int) -> float:
    """P(a or more solved of a's n | a + b solved of 2n), summed from the hypergeometric
    probabilities C(total, x) C(2n − total, n − x) / C(2n, n)."""
    total = a + b
    tail = sum(
        math.comb(total, x) * math.comb(2 * n - total, n - x) for x in range(a, min(n, total) + 1)
    )
    return tail / math.comb(2 * n, n)


def written_p(a: int, b: int, n: int) -> str:
    p = hypergeometric_tail(a, b, n)
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


@pytest.mark.parametrize(
    ("a", "b", "n"), [(10, 5, 10), (10, 7, 10), (6, 0, 6), (3, 3, 12), (0, 12, 12), (12, 9, 12)]
)
def test_fisher_exact_p_follows_the_hypergeometric_tail(a, b, n):
    expected = hypergeometric_tail(a, b, n)
    assert lab.more_often_p(a, b, n) == pytest.approx(expected, rel=1e-9)
    assert lab.clearly_more(a, b, n) == (expected < lab.CLEAR_P)


@pytest.mark.parametrize(
    ("counts", "story"),
    [
        ((12, 12, 12, 12), "same"),
        ((12, 2, 12, 3), "start"),  # the narrow start rescues, the wide start hurts
        ((12, 0, 0, 12), "training"),  # neither start moves the outcome
        ((12, 0, 0, 5), "both"),  # the wide start hurts, the narrow start does not rescue
        ((1, 12, 12, 1), "reversed"),
    ],
)
def test_verdict_story_follows_the_counts(counts, story):
    assert lab.Verdict(*counts, seeds=12).story == story


@pytest.fixture(scope="module")
def small_comparison() -> lab.Comparison:
    return lab.compare(("previous", "first"), 16, 40, "squared", 2)


def test_comparison_cells_are_the_runs_train_gives(small_comparison):
    comparison = small_comparison
    assert set(comparison.runs) == {(t, s) for t in ("previous", "first") for s in lab.STARTS}
    for (task, start), cell in comparison.runs.items():
        assert [run.settings.seed for run in cell] == [0, 1]
        assert all(run.settings.scale == start.scale for run in cell)
        assert all(run.settings.start_at_other_spread == start.other_spread for run in cell)
        assert comparison.solved(task, start) == sum(run.eval_accuracy[-1] >= 0.99 for run in cell)
        spreads = np.array([run.score_spread for run in cell])
        np.testing.assert_allclose(
            comparison.median_spread(task, start), np.median(spreads, axis=0)
        )
    one = comparison.runs["first", lab.UNSCALED_NARROW][1]
    alone = lab.train_one(one.settings)
    assert one.eval_accuracy[-1] == alone.eval_accuracy[-1]
    np.testing.assert_array_equal(one.loss, alone.loss)
    verdict = comparison.verdict("first")
    assert (verdict.scaled, verdict.unscaled_narrow) == (
        comparison.solved("first", lab.SCALED),
        comparison.solved("first", lab.UNSCALED_NARROW),
    )
    growth = comparison.median_spread("first", lab.UNSCALED_NARROW)
    scaled = comparison.median_spread("first", lab.SCALED)
    assert comparison.growth_ratio("first") == pytest.approx(
        (growth[1] - growth[0]) / (scaled[1] - scaled[0])
    )


def test_comparison_curves_draw_each_starts_medians(small_comparison):
    figure = lab_charts.comparison_curves(small_comparison, "first")
    traces = {(trace.name, trace.yaxis): trace for trace in figure.data}
    for start in lab.STARTS:
        spread, locked = traces[start.label, "y"], traces[start.label, "y2"]
        np.testing.assert_allclose(
            spread.y, small_comparison.median_spread("first", start), rtol=1e-3
        )
        np.testing.assert_allclose(
            locked.y, small_comparison.mean_locked("first", start), atol=1e-4
        )
        np.testing.assert_array_equal(spread.x, small_comparison.snapshot_steps("first"))
    assert figure.layout.yaxis.type == "log" and figure.layout.yaxis.exponentformat == "power"


def test_side_by_side_draws_each_run_and_names_it_as_text(small_comparison):
    runs = [small_comparison.runs["first", start][0] for start in (lab.SCALED, lab.UNSCALED)]
    names = [f"#{i} <b>{lab_charts.run_label(run.settings)}</b>" for i, run in enumerate(runs, 1)]
    figure = lab_charts.runs_side_by_side(runs, names)
    assert [shown(trace.name) for trace in figure.data] == ["run #1", "run #1", "run #2", "run #2"]
    np.testing.assert_allclose(figure.data[2].y, runs[1].eval_mass, atol=1e-4)
    np.testing.assert_allclose(figure.data[3].y, runs[1].score_spread, rtol=1e-3)
    for trace, name in zip(figure.data, [names[0], names[0], names[1], names[1]], strict=True):
        assert shown(trace.hovertemplate.split("<br>")[0]) == name  # the whole name, as text
    title = lab_charts.final_attention(runs[1], names[1]).layout.title.text
    lines = title.split("<br>")
    assert len(lines) > 1 and all(len(shown(line)) <= 36 for line in lines)
    assert (
        "".join(shown(line) for line in lines).replace(",", ", ").replace(",  ", ", ") == names[1]
    )


def test_comparison_reports_progress_over_all_its_stacks():
    seen = []
    lab.compare(
        ("previous", "first"), 8, 10, "squared", 1, on_step=lambda d, t: seen.append((d, t))
    )
    assert seen == [(done, 20) for done in range(1, 21)]


# ---- figures ------------------------------------------------------------------------------------
def test_figures_show_the_chosen_snapshot(default_runs):
    run = default_runs["bracket"]
    index = 10
    attention = lab_charts.probe_attention(run, index)
    np.testing.assert_allclose(attention.data[0].z, run.probe_attention[index], atol=1e-4)
    bilinear = lab_charts.bilinear_heatmap(run, index)
    np.testing.assert_allclose(bilinear.data[0].z, run.bilinear[index], atol=1e-3)
    # The app's one colour convention: the positive end of the scale is blue, as the prose says.
    heatmap = bilinear.data[0]
    top = heatmap.colorscale[0 if heatmap.reversescale else -1][1]  # "rgb(r,g,b)"
    red, _, blue = (float(c) for c in top[top.index("(") + 1 : -1].split(","))
    assert heatmap.zmid == 0 and blue > red, top
    # "<" and ">" are tokens here: every label must reach plotly as text, not markup.
    for label in [*bilinear.layout.xaxis.ticktext, *attention.layout.xaxis.ticktext]:
        shown(label)
    assert [shown(label) for label in bilinear.layout.xaxis.ticktext][:8] == list(lab.BRACKETS)
    for cell in np.asarray(bilinear.data[0].customdata).ravel():
        shown(cell)


def sent_figure(figure) -> dict:
    """A figure as st.plotly_chart sends it (plotly's JSON, arrays as base64)."""
    import plotly.io

    return json.loads(plotly.io.to_json(figure, validate=False))


def page_run(settings: lab.Settings) -> lab.TrainingRun:
    """A run as the page trains it: snapshots crowd where the probe map moves, for Play."""
    return lab.train_one(settings, snapshot_moves=lab.SNAPSHOT_MOVES)


def frame_steps(run: lab.TrainingRun) -> list[int]:
    """The steps of the snapshots Play shows."""
    return run.snapshot_steps[lab_charts.play_indices(run)].tolist()


def assert_plays_its_frames(spec: dict, run: lab.TrainingRun) -> None:
    """One frame per chosen snapshot, named by its step, from step 0 to the last; a slider over
    exactly those frames, on step 0, each labelled with its step and the loss the curve shows
    there; a Play button that animates every frame in turn, and a Pause."""
    steps = frame_steps(run)
    names = [str(step) for step in steps]
    assert steps[0] == 0 and steps[-1] == run.settings.steps
    assert [frame["name"] for frame in spec["frames"]] == names
    (slider,) = spec["layout"]["sliders"]
    assert slider["active"] == 0, "opens on step 0, before training"
    labels = [step["label"] for step in slider["steps"]]
    assert "step 0 of" in labels[0] and "Play" in labels[0]
    for step, label in zip(steps[1:], labels[1:], strict=True):
        # the loss of the batch update `step` learned from: the curve's point at x = step
        said = re.fullmatch(
            rf"after step {step} of {run.settings.steps} · step {step}'s loss (\S+)", label
        )
        assert said and float(said[1]) == pytest.approx(run.loss[step - 1], rel=5e-3), label
    assert [step["method"] for step in slider["steps"]] == ["animate"] * len(names)
    assert [step["args"][0] for step in slider["steps"]] == [[name] for name in names]
    (menu,) = spec["layout"]["updatemenus"]
    play, pause = menu["buttons"]
    assert "Play" in play["label"] and play["method"] == "animate"
    assert play["args"][0] is None, "None: every frame, in order"
    assert play["args"][1]["frame"]["duration"] > 0 and play["args"][1]["frame"]["redraw"]
    assert "Pause" in pause["label"] and pause["args"][0] == [None]


def test_learning_steps_play_the_chosen_snapshots_of_the_run(default_runs):
    run = default_runs["first"]
    spec = sent_figure(lab_charts.learning_steps(run))
    assert_plays_its_frames(spec, run)
    heatmap, loss, mass = spec["data"]
    assert heatmap["type"] == "heatmap" and loss["name"] == "training loss"
    np.testing.assert_allclose(sent_array(loss["y"]), run.loss, rtol=1e-6)
    np.testing.assert_allclose(sent_array(mass["y"]), run.eval_mass, atol=1e-4)
    # What the page opens on is the first frame: step 0, before training.
    np.testing.assert_allclose(sent_array(heatmap["z"]), run.probe_attention[0], atol=1e-4)
    assert spec["layout"]["shapes"] == spec["frames"][0]["layout"]["shapes"]
    for index, frame in zip(lab_charts.play_indices(run), spec["frames"], strict=True):
        step = int(run.snapshot_steps[index])
        # Only the heatmap is a trace of a frame: plotly.js replots a frame's scatter traces
        # alone and leaves the rest of the figure undrawn while it plays.
        assert frame["traces"] == [0] and [trace["type"] for trace in frame["data"]] == ["heatmap"]
        np.testing.assert_allclose(
            sent_array(frame["data"][0]["z"]),
            run.probe_attention[index],
            atol=1e-4,
            err_msg=str(step),
        )
        step_line, step_dot = frame["layout"]["shapes"]
        assert (
            (step_line["xref"], step_line["yref"])
            == ("x2", "y3")
            == (step_dot["xref"], step_dot["yref"])
        )
        assert step_line["x0"] == step_line["x1"] == step and step_dot["xanchor"] == step
        assert step_dot["yanchor"] == pytest.approx(run.eval_mass[index], abs=1e-4)
    # The key labels reach plotly as text ("3 c"), one per key.
    assert [shown(label) for label in spec["layout"]["xaxis"]["ticktext"]] == (
        lab_charts.numbered(run.probe_tokens)
    )


@pytest.mark.parametrize("frame", [1, -2])
def test_a_frame_is_the_run_trained_that_many_steps(frame):
    """Independent of the stored snapshots: a run of `step` steps (same seed, same batches) ends
    where the longer run's frame for that step says."""
    run = page_run(lab.Settings(task="first", steps=100))
    step = frame_steps(run)[frame]
    short = lab.train_one(lab.Settings(task="first", steps=step))
    frames = {
        frame["name"]: frame for frame in sent_figure(lab_charts.learning_steps(run))["frames"]
    }
    np.testing.assert_allclose(
        sent_array(frames[str(step)]["data"][0]["z"]), short.probe_attention[-1], atol=1e-4
    )
    frames = {
        frame["name"]: frame for frame in sent_figure(lab_charts.bilinear_steps(run))["frames"]
    }
    np.testing.assert_allclose(
        sent_array(frames[str(step)]["data"][0]["z"]), short.bilinear[-1], atol=1e-3
    )


def test_bilinear_steps_play_the_maps_frames_on_one_colour_range(default_runs):
    run = default_runs["bracket"]
    spec = sent_figure(lab_charts.bilinear_steps(run))
    assert_plays_its_frames(spec, run)
    limit = float(np.abs(run.bilinear).max())
    assert spec["data"][0]["zmax"] == pytest.approx(limit) == -spec["data"][0]["zmin"]
    for index, frame in zip(lab_charts.play_indices(run), spec["frames"], strict=True):
        assert frame["traces"] == [0]
        np.testing.assert_allclose(
            sent_array(frame["data"][0]["z"]), run.bilinear[index], atol=1e-3
        )
    assert [shown(label) for label in spec["layout"]["xaxis"]["ticktext"]][:8] == list(lab.BRACKETS)


def moves(maps: np.ndarray) -> np.ndarray:
    """(k, n, n) maps -> (k − 1,) how far each moved from the one before: the weight that
    changed keys, half the summed |difference| of a row, averaged over the rows."""
    maps = maps.astype(np.float64)
    n = maps.shape[1]
    return np.array(
        [
            sum(0.5 * np.abs(after[row] - before[row]).sum() for row in range(n)) / n
            for before, after in zip(maps[:-1], maps[1:], strict=True)
        ]
    )


def step_by_which(run: lab.TrainingRun, share: float) -> int:
    """The first snapshot step by which the probe's map has made `share` of its total movement
    over the run's snapshots."""
    moved = moves(run.probe_attention)
    done = 0.0
    for step, move in zip(run.snapshot_steps[1:], moved, strict=True):
        done += move
        if done >= share * moved.sum():
            return int(step)
    return int(run.snapshot_steps[-1])


def test_snapshots_crowd_where_the_map_moves():
    """A page's run snapshots the regular steps and, besides, every step whose probe map has
    moved by SNAPSHOT_MOVES since the last snapshot: replayed here on the maps of the same run
    snapshotted after every update. Its kept arrays stay within what the door is told."""
    from ui import door, lab_runs

    settings = lab_runs.PAGE_DEFAULTS
    run, every = page_run(settings), lab.train_one(settings, n_snapshots=settings.steps)
    regular = set(range(0, settings.steps + 1, settings.steps // lab.N_SNAPSHOTS))
    expected, last = [], None
    for step, now in enumerate(every.probe_attention):
        on_grid = step in regular or step == settings.steps
        if on_grid or moves(np.stack([last, now]))[0] >= lab.SNAPSHOT_MOVES:
            expected.append(step)
            last = now
    assert run.snapshot_steps.tolist() == expected
    assert len(regular) < len(expected) < settings.steps, "more where it moves, none where still"
    np.testing.assert_allclose(run.probe_attention, every.probe_attention[expected], atol=1e-6)
    np.testing.assert_allclose(run.eval_mass, every.eval_mass[expected], atol=1e-9)
    np.testing.assert_array_equal(run.loss, every.loss)
    assert door.nbytes(run) <= lab.kept_bytes(settings, settings.steps)


def test_play_spaces_its_frames_by_how_far_the_map_moves():
    """The default run's map moves most in its first steps and then sits still: Play gives
    those steps a frame each and crosses the still end in a few (frames at even steps spent
    most of Play on the finished map). The spacing rule's bounds, against moves counted here."""
    from ui import display_policy, lab_runs

    run = page_run(lab_runs.PAGE_DEFAULTS)
    moved = moves(run.probe_attention)  # (k − 1,) between consecutive snapshots
    total = moved.sum()
    steps = frame_steps(run)
    assert steps == sorted(set(steps)) and len(steps) <= display_policy.PLAY_FRAMES_UP_TO
    marks, clock_share = display_policy.PLAY_FRAMES_UP_TO - 1, lab_charts.PLAY_CLOCK_SHARE
    snapshot = {int(step): index for index, step in enumerate(run.snapshot_steps)}
    for earlier, later in zip(steps, steps[1:], strict=False):
        # Up to the snapshot before the next frame, less than one mark of progress: of the
        # map's moves, and of the steps.
        first, before_next = snapshot[earlier], snapshot[later] - 1
        assert moved[first:before_next].sum() < total / ((1 - clock_share) * marks) + 1e-9
        clock = (run.snapshot_steps[before_next] - earlier) / run.settings.steps
        assert clock < 1 / (clock_share * marks) + 1e-9
    learned_by = step_by_which(run, 0.9)
    assert learned_by < run.settings.steps / 4, "the defaults learn early: the case to fix"
    even = np.arange(0, run.settings.steps + 1, run.settings.steps // lab.N_SNAPSHOTS)
    assert (np.array(steps) <= learned_by).mean() >= 0.5, "most frames show the learning"
    assert (even <= learned_by).mean() < 0.25, "even steps showed mostly the finished map"


def test_the_target_lines_up_with_the_learned_map(default_runs):
    """Beside the stepped figure, the target's map starts at the same height (its figure moved
    down by the CSS offset), just as tall."""
    run = default_runs["first"]
    learned = lab_charts.learning_steps(run).layout
    target = lab_charts.target_attention(run, beside_steps=True).layout
    from conftest import ROOT

    css = re.search(r'TARGET_BESIDE_STEPS_CSS = \(\n    "(.*)"\n\)', (ROOT / LAB).read_text())[1]
    offset = int(re.search(r"\.st-key-lab_target \{ padding-top: (\d+)px", css).group(1))
    assert "@media (min-width: 641px)" in css, "only where the columns stand side by side"
    assert target.margin.t + offset == learned.margin.t
    learned_plot = learned.height - learned.margin.t - learned.margin.b
    map_px = learned_plot * (learned.yaxis.domain[1] - learned.yaxis.domain[0])
    assert target.height - target.margin.t - target.margin.b == pytest.approx(map_px)


def test_causal_target_greys_exactly_the_keys_after_each_query(default_runs):
    n = 4
    path = lab_charts.hidden_keys_path(n)
    corners = [tuple(map(float, point.split())) for point in path[2:-2].split(" L ")]

    def inside(x: float, y: float) -> bool:
        """Ray casting: a point is inside when a ray to the right crosses the edges an odd time."""
        crossings = 0
        for (x1, y1), (x2, y2) in zip(corners, corners[1:] + corners[:1], strict=True):
            if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
                crossings += 1
        return crossings % 2 == 1

    for i, j in np.ndindex(n, n):  # cell (row i, key j) has its centre at x = j, y = i
        assert inside(j, i) == (j > i), (i, j)
    run = dataclasses.replace(
        default_runs["bracket"], settings=lab.Settings("bracket", causal=True)
    )
    assert lab_charts.target_attention(run).layout.shapes[0].path == lab_charts.hidden_keys_path(8)
    assert not lab_charts.target_attention(default_runs["bracket"]).layout.shapes


def test_the_scale_takeaway_follows_the_two_runs():
    """The first screen's sentence on √d_k: its verdict and numbers come from the two runs,
    whichever of them is on screen."""
    from ui import lab_story

    template = lab.train_one(lab.Settings(task="first", steps=2))

    def run(scale: bool, accuracy: float, locked: float) -> lab.TrainingRun:
        final = template.eval_accuracy.copy()
        final[-1] = accuracy
        stuck = template.locked_share.copy()
        stuck[-1] = locked
        settings = dataclasses.replace(template.settings, scale=scale)
        return dataclasses.replace(
            template, settings=settings, eval_accuracy=final, locked_share=stuck
        )

    scaled, unscaled = run(True, 1.0, 0.0), run(False, 0.7, 0.2)
    for shown_run, other in ((scaled, unscaled), (unscaled, scaled)):
        text = lab_story.scale_takeaway(shown_run, other)
        assert "learns better with 1/√d_k" in text
        assert "with 1/√d_k the head gets 100% of the held-out tokens right, without it 70%" in text
        assert "without it 70% (20% of its rows locked on a wrong key)" in text
    assert "learns better without 1/√d_k" in lab_story.scale_takeaway(
        run(True, 0.6, 0.0), run(False, 0.9, 0.0)
    )
    # 2,558 of 2,560 tokens right is not "100%"
    nearly = lab_story.scale_takeaway(run(True, 2558 / 2560, 0.0), unscaled)
    assert "with 1/√d_k the head gets 99.9% of the held-out tokens right" in nearly, nearly
    # the stepped figure's title is true of the step it draws: it opens on step 0, and each
    # frame's title gives its own step's share of held-out tokens (not the probe rows the map
    # draws), a whole percent unless that would claim all of them
    figure = lab_charts.learning_steps(unscaled)
    titled = [(0, figure.layout.title.text)] + [
        (int(frame.name), frame.layout.title.text.removeprefix("<b>").removesuffix("</b>"))
        for frame in figure.frames
    ]
    for step, title in titled:
        said = re.fullmatch(r"Attention at step (\d+): ([\d.]+)% held-out right", title)
        assert said and int(said[1]) == step, title
        share = float(unscaled.eval_accuracy[unscaled.snapshot_steps.tolist().index(step)])
        assert abs(float(said[2]) / 100 - share) <= 0.005 and (said[2] == "100") == (share == 1)
    assert "Press ▶ Play to see each step's share in the figure's title" in text
    alike = lab_story.scale_takeaway(run(True, 1.0, 0.0), run(False, 0.99, 0.0))
    assert "makes no visible difference" in alike and "rows" not in alike


# ---- the page -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def small_comparison_on_the_page():
    """The page's comparison with one seed per cell, trained before any page runs: the page
    finds it ready instead of training the full one in the background during the tests."""
    from ui import door, lab_runs

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lab_runs, "COMPARISON_SEEDS", 1)
        yield lab_runs.wait_for_comparison(lab_runs.ComparisonChoice())
    door.forget_all()


def charts(at) -> dict[str, dict]:
    """The page's plotly figures by title (the first line of it)."""
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return {
        spec["layout"].get("title", {}).get("text", "").split("<br>")[0]: spec for spec in specs
    }


def learned(at) -> dict:
    """The shown run's stepped figure: its probe attention, loss curve, frames and slider."""
    return next(spec for title, spec in charts(at).items() if title.startswith("Attention at step"))


def shown_weights(at) -> np.ndarray:
    """The probe attention after the run's last step (its stepped figure's last frame)."""
    return sent_array(learned(at)["frames"][-1]["data"][0]["z"])


def test_page_opens_on_the_trained_run_of_its_switches():
    """No button pressed: section 1 draws the defaults' run, every snapshot ready to play."""
    at = run_page(LAB)
    assert_no_exception(at)
    assert not [info for info in at.info if "switches" in info.value], "nothing asks for Train"
    from ui import lab_runs

    expected = page_run(lab_runs.PAGE_DEFAULTS)
    spec = learned(at)
    assert_plays_its_frames(spec, expected)
    np.testing.assert_allclose(shown_weights(at), expected.probe_attention[-1], atol=1e-4)
    np.testing.assert_allclose(
        sent_array(spec["data"][0]["z"]), expected.probe_attention[0], atol=1e-4
    )
    fifth = lab_charts.play_indices(expected)[5]
    np.testing.assert_allclose(
        sent_array(spec["frames"][5]["data"][0]["z"]), expected.probe_attention[fifth], atol=1e-4
    )
    assert any(title.startswith("Target pattern") for title in charts(at))
    half, most = step_by_which(expected, 0.5), step_by_which(expected, 0.9)
    prose = " ".join(str(m.value) for m in at.markdown)
    assert f"half of its moves by step {half} and 90% of them by step {most} of 100" in prose
    bilinear = next(s for title, s in charts(at).items() if title.startswith("W_qᵀW_k"))
    assert_plays_its_frames(bilinear, expected)
    assert not at.slider, "the steps are played in the figures, not on a slider of the page"


def test_each_switch_trains_its_run_and_keeps_earlier_runs():
    """A switch acts at once, as the sidebar's do: the page shows the run its switches describe,
    with no Train to press, and keeps the earlier runs side by side, starting with the same run
    under the other √d_k switch."""
    from ui import lab_runs

    at = run_page(LAB)
    first = page_run(lab_runs.PAGE_DEFAULTS)
    partner = page_run(dataclasses.replace(lab_runs.PAGE_DEFAULTS, scale=False))
    np.testing.assert_allclose(shown_weights(at), first.probe_attention[-1], atol=1e-4)
    assert not [button for button in at.button if button.label == "Train"]
    table = at.table[0].value
    assert [shown(cell) for cell in table.iloc[:, 0]] == [
        "#1 " + lab_charts.run_label(first.settings),
        "#2 " + lab_charts.run_label(partner.settings),
    ]
    # The takeaway on the first screen states both runs' accuracies, as trained here.
    takeaway = next(m.value for m in at.markdown if "1/√d_k**:" in m.value)
    assert f"with 1/√d_k the head gets {first.eval_accuracy[-1]:.0%}" in takeaway
    assert f"without it {partner.eval_accuracy[-1]:.0%}" in takeaway
    assert first.eval_accuracy[-1] - partner.eval_accuracy[-1] >= 0.1, "the defaults show √d_k"
    assert "learns better with 1/√d_k" in takeaway

    at.selectbox(key="lab_task").set_value("bracket").run()
    assert_no_exception(at)
    bracket = dataclasses.replace(lab_runs.PAGE_DEFAULTS, task="bracket")
    expected = page_run(bracket)
    np.testing.assert_allclose(shown_weights(at), expected.probe_attention[-1], atol=1e-4)
    assert_plays_its_frames(learned(at), expected)

    at.toggle(key="lab_scale").set_value(False).run()  # the unscaled run, next to the scaled one
    assert_no_exception(at)
    unscaled = page_run(dataclasses.replace(bracket, scale=False))
    np.testing.assert_allclose(shown_weights(at), unscaled.probe_attention[-1], atol=1e-4)
    table = at.table[0].value
    assert [shown(cell) for cell in table.iloc[:, 0]] == [
        "#1 " + lab_charts.run_label(unscaled.settings),
        "#2 " + lab_charts.run_label(expected.settings),
        "#3 " + lab_charts.run_label(first.settings),
        "#4 " + lab_charts.run_label(partner.settings),
    ]
    assert [float(cell) for cell in table.iloc[:, 1]] == pytest.approx(
        [r.eval_mass[-1] for r in (unscaled, expected, first, partner)], abs=1e-3
    )
    side = next(spec for spec in charts(at).values() if len(spec["data"]) == 8)  # 4 runs × 2
    np.testing.assert_allclose(sent_array(side["data"][0]["y"]), unscaled.eval_mass, atol=1e-4)
    np.testing.assert_allclose(sent_array(side["data"][2]["y"]), expected.eval_mass, atol=1e-4)


def test_a_copied_link_reopens_the_same_run():
    """The address holds the switches: a link opens on their run, trained, without Train."""
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"lab_task": "first occurrence of the word", "lab_d_head": "16"})
    at.query_params.update({"lab_seed": "7", "lab_start": "true"})
    at.run()
    at.switch_page(LAB)
    at.run()
    assert_no_exception(at)
    settings = lab.Settings(task="first", d_head=16, seed=7, steps=100, start_at_other_spread=True)
    expected = page_run(settings)
    np.testing.assert_allclose(shown_weights(at), expected.probe_attention[-1], atol=1e-4)
    assert_plays_its_frames(learned(at), expected)


def test_hostile_link_values_are_clamped_or_ignored():
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    hostile = {
        "lab_task": "<img src=x onerror=alert(1)>",
        "lab_d_head": "3",
        "lab_steps": "99999",
        "lab_seed": "-5",
        "lab_step": "999999",  # an address from before the steps played in the figure
        "lab_loss": "nonsense",
        "lab_start": "maybe",
        "lab_cmp_d_head": "7",
        "lab_cmp_steps": "1e9",
        "lab_run": "1",
    }
    at.query_params.update(hostile)
    at.run()
    at.switch_page(LAB)
    at.run()
    assert_no_exception(at)
    # Every control fell back to a value the page offers, and the run shown is that run.
    assert at.selectbox(key="lab_task").value in lab.TASKS
    steps = at.select_slider(key="lab_steps").value
    assert steps in (100, 200, 300, 500)
    assert 0 <= at.number_input(key="lab_seed").value <= 9999
    last_step = int(learned(at)["frames"][-1]["name"])
    assert last_step == steps, "the run shown is the clamped switches' run"
    assert at.select_slider(key="lab_cmp_d_head").value == 128
    assert at.select_slider(key="lab_cmp_steps").value == 300


def synthetic_comparison(base: lab.Comparison, counts: dict[str, tuple[int, ...]], seeds: int = 12):
    """A comparison whose cells solve exactly these counts (scaled, unscaled, unscaled narrow,
    scaled wide) of `seeds`: copies of a real run with the final accuracy set."""
    template = base.runs["first", lab.SCALED][0]

    def run(solved: bool) -> lab.TrainingRun:
        accuracy = template.eval_accuracy.copy()
        accuracy[-1] = 1.0 if solved else 0.5
        return dataclasses.replace(template, eval_accuracy=accuracy)

    runs = {
        (task, start): tuple(run(seed < solved) for seed in range(seeds))
        for task, task_counts in counts.items()
        for start, solved in zip(lab.STARTS, task_counts, strict=True)
    }
    return dataclasses.replace(base, runs=runs, seeds=seeds, tasks=tuple(counts))


def page_text(at) -> str:
    return "\n".join(element.value for element in [*at.markdown, *at.caption])


def test_the_comparison_prose_says_what_the_counts_show(monkeypatch, small_comparison_on_the_page):
    from ui import lab_runs

    counts = {"previous": (12, 12, 12, 12), "first": (12, 0, 0, 12)}
    shown_comparison = synthetic_comparison(small_comparison_on_the_page, counts)
    monkeypatch.setattr(
        lab_runs, "comparison_or_progress", lambda choice, start=True: shown_comparison
    )
    at = run_page(LAB)
    assert_no_exception(at)
    text = page_text(at)
    previous, first = (lab.TASKS[name].title for name in ("previous", "first"))
    assert f"**{previous}**: scaled and unscaled heads solved equally often (12 of 12 each)" in text
    assert (
        f"**{first}**: the scaled head solved clearly more often (12 of 12 against 0 of 12, "
        f"{written_p(12, 0, 12)})" in text
    )
    assert (
        "Started at the scaled spread, the unscaled head solved 0 of 12: not clearly more than "
        f"the 0 of 12 from its own start ({written_p(0, 0, 12)}), so a narrow start did not "
        "rescue it." in text
    )
    assert (
        "Started at the unscaled spread, the scaled head solved 12 of 12: not clearly fewer than "
        f"the 12 of 12 from its own start ({written_p(12, 12, 12)}), so it got out of a wide "
        "start." in text
    )
    assert "the start does not explain the difference" in text
    assert text.count("solved clearly more often") == 1, "only where the counts say so"
    assert text.count("rescue") == 1, "no rescue where nothing needed one"

    counts = {"previous": (12, 2, 12, 3), "first": (12, 12, 11, 12)}
    shown_comparison = synthetic_comparison(small_comparison_on_the_page, counts)
    at = run_page(LAB)
    text = page_text(at)
    assert (
        f"clearly more than the 2 of 12 from its own start ({written_p(12, 2, 12)}), so a narrow "
        "start rescued it." in text
    )
    assert (
        f"clearly fewer than the 12 of 12 from its own start ({written_p(12, 3, 12)}), so a wide "
        "start cost it runs." in text
    )
    assert "the starting spread explains the difference" in text
    assert f"**{first}**: scaled and unscaled heads solved equally often" in text
    cells = at.table[-1].value
    assert [shown(cell) for cell in cells[previous]][:2] == [
        f"12 of 12 · {shown_comparison.mean_mass('previous', lab.SCALED):.3f}",
        f"2 of 12 · {shown_comparison.mean_mass('previous', lab.UNSCALED):.3f}",
    ]

    # Ten seeds: 10 against 7 (p ≈ 0.105) and 10 against 5 (p ≈ 0.016) are borderline counts
    # that another block of seeds can reverse: no verdict rests on them. 10 against 4 is clear.
    counts = {"previous": (10, 7, 10, 5), "first": (10, 0, 0, 4)}
    shown_comparison = synthetic_comparison(small_comparison_on_the_page, counts, seeds=10)
    at = run_page(LAB)
    text = page_text(at)
    assert (
        f"**{previous}**: scaled and unscaled heads were not clearly apart (10 of 10 against 7 "
        f"of 10, {written_p(10, 7, 10)}): with 10 seeds, these runs do not show the scale "
        "deciding the outcome here." in text
    )
    assert (
        "scaled head solved 5 of 10: not clearly fewer than the 10 of 10 from its own start "
        f"({written_p(10, 5, 10)})" in text
    )
    assert (
        "scaled head solved 4 of 10: clearly fewer than the 10 of 10 from its own start "
        f"({written_p(10, 4, 10)})" in text
    )
    assert "So on these seeds the start explains part of the difference" in text
    assert text.count("So on these seeds") == 1, (
        "no conclusion where scaling made no clear difference"
    )


def test_the_comparison_shows_its_progress_or_its_trouble(monkeypatch):
    from ui import lab_runs

    monkeypatch.setattr(
        lab_runs,
        "comparison_or_progress",
        lambda choice, start=True: lab_runs.Progress(done=150, total=600),
    )
    at = run_page(LAB)
    assert_no_exception(at)
    bar = at.get("progress")
    assert bar and bar[0].proto.value == 25
    monkeypatch.setattr(
        lab_runs,
        "comparison_or_progress",
        lambda choice, start=True: lab_runs.Progress(error="The server is busy."),
    )
    at = run_page(LAB)
    assert [warning.value for warning in at.warning] == ["The server is busy."]


def test_the_page_trains_the_comparison_only_when_asked(monkeypatch):
    """A visit shows a button, not a background run; pressing it starts the training."""
    import threading

    from ui import lab_runs

    monkeypatch.setattr(lab_runs, "COMPARISON_SEEDS", 1)
    monkeypatch.setattr(lab_runs, "_jobs", {})
    at = run_page(LAB, query={"lab_cmp_d_head": "8"})
    assert_no_exception(at)
    assert not at.get("progress") and not [
        t for t in threading.enumerate() if t.name == "lab-comparison"
    ]
    assert "Nobody has trained these runs" in page_text(at)
    at.button(key="lab_cmp_start").click().run()
    assert_no_exception(at)
    workers = [t for t in threading.enumerate() if t.name == "lab-comparison"]
    assert len(workers) == 1 and at.get("progress"), "pressed: it trains, with its progress"
    for worker in workers:
        worker.join()


def test_the_comparison_trains_once_in_the_background(monkeypatch):
    """Asked twice while it trains, one thread trains it; then the result comes from the cache."""
    import threading

    from ui import door, lab_runs

    monkeypatch.setattr(lab_runs, "COMPARISON_SEEDS", 1)
    monkeypatch.setattr(lab_runs, "_jobs", {})
    choice = lab_runs.ComparisonChoice(d_head=8, steps=300)
    door.forget_all()
    assert lab_runs.comparison_or_progress(choice, start=False) is None, "nobody asked yet"
    assert not [t for t in threading.enumerate() if t.name == "lab-comparison"]
    first = lab_runs.comparison_or_progress(choice)
    again = lab_runs.comparison_or_progress(choice, start=False)
    assert isinstance(first, lab_runs.Progress) and again is first
    workers = [t for t in threading.enumerate() if t.name == "lab-comparison"]
    assert len(workers) == 1
    workers[0].join()
    result = lab_runs.comparison_or_progress(choice)
    assert isinstance(result, lab.Comparison) and result.d_head == 8 and result.seeds == 1
    assert lab_runs.comparison(choice) is result, "the door's cached result"
    del result
    door.forget_all()  # the cache lets it go: the next visit trains it again
    assert isinstance(lab_runs.comparison_or_progress(choice), lab_runs.Progress)
    for worker in [t for t in threading.enumerate() if t.name == "lab-comparison"]:
        worker.join()


# ---- the page in a real browser -----------------------------------------------------------------
# At every redraw of the stepped figure while it plays: the frame last started, the heatmap's
# image (plotly draws the map as one PNG, a pixel per cell) and whether the loss curve is drawn.
RECORD_DRAWS_JS = """
g => {
  window.labFrames = []; window.labDraws = [];
  g.on('plotly_animatingframe', e => window.labFrames.push(e.name));
  g.on('plotly_afterplot', () => {
    const image = g.querySelector('.hm image');
    const lossLine = g.querySelector('.scatterlayer .trace path.js-line');
    window.labDraws.push([window.labFrames[window.labFrames.length - 1] ?? null,
                          image ? image.getAttribute('href') : null,
                          lossLine ? (lossLine.getAttribute('d') || '').length : 0]);
  });
}
"""


def drawn_cells(href: str, n: int) -> np.ndarray:
    """(n, n) luminance of a heatmap image's cells, read at each cell's centre pixel."""
    import base64
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(href.split(",", 1)[1]))).convert("RGB")
    width, height = image.size
    pixels = np.asarray(image, dtype=np.float64)  # (height, width, 3)
    rows = ((np.arange(n) + 0.5) * height / n).astype(int)
    columns = ((np.arange(n) + 0.5) * width / n).astype(int)
    cells = pixels[rows][:, columns]  # (n, n, 3)
    return cells @ np.array([0.2126, 0.7152, 0.0722])  # viridis: brighter is more weight


@pytest.mark.browser
def test_lab_opens_trained_and_plays_in_chromium(server, browser):
    """Open the lab: the run is drawn on the first screen without Train, on step 0. Play draws
    every frame in turn (the map as trained to that step, the curves kept) and the slider picks
    one, both in the browser, without a rerun. A fresh visit of its link opens on the same
    figures, and there, at 1280 px, the learned map and the target's start at one height (on a
    phone: test_the_target_follows_closely_on_a_phone)."""
    from tests.support.browser import (
        RunWatcher,
        figure_signatures,
        page_exceptions,
        wait_for_app,
        wait_for_figure,
    )
    from ui import lab_runs

    expected = page_run(lab_runs.PAGE_DEFAULTS)  # the run the page opens on
    names = [str(step) for step in frame_steps(expected)]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    runs = RunWatcher(page)
    page.goto(f"{server.url}/lab")
    wait_for_figure(page, 90_000)
    wait_for_app(page)
    assert not page_exceptions(page)
    learned = page.locator(".js-plotly-plot").first
    assert "Attention at step" in learned.locator(".gtitle").text_content()
    assert learned.bounding_box()["y"] < 900 - 200, "its top on the first screen"
    opened = figure_signatures(page)[:2]  # the stepped figure and the target
    # the slider, and the step's line on the curves
    step_state = "g => [g._fullLayout.sliders[0].active, g._fullLayout.shapes[0].x0]"
    last_step = expected.settings.steps
    assert learned.evaluate(step_state) == [0, 0], "opens on step 0, before training"
    opened_title = learned.locator(".gtitle").text_content()  # step 0's, as the map is
    start_share = float(expected.eval_accuracy[0])
    assert opened_title.startswith("Attention at step 0: "), opened_title
    assert abs(float(opened_title.split(": ")[1].split("%")[0]) / 100 - start_share) <= 0.005
    learned.evaluate(RECORD_DRAWS_JS)
    mark = runs.mark()
    learned.locator(".updatemenu-button").first.click()  # Play
    page.wait_for_function(f"() => window.labFrames.length === {len(names)}", timeout=60_000)
    assert page.evaluate("() => window.labFrames") == names, "every frame, in order"
    page.wait_for_function(
        f"g => g._fullLayout.sliders[0].active === {len(names) - 1}", arg=learned.element_handle()
    )
    page.wait_for_function(f"() => window.labDraws.some(d => d[0] === '{names[-1]}')")
    draws = {
        name: (href, loss_drawn)
        for name, href, loss_drawn in page.evaluate("() => window.labDraws")
    }
    middle = names[1:-1]
    drawn = [name for name in middle if name in draws]
    # Each frame is redrawn before the next starts (a redraw takes a few ms, a frame 300 ms);
    # a very loaded machine may merge some, never most.
    assert len(drawn) >= len(middle) // 2, f"redrawn mid-animation: {drawn}"
    n = len(expected.probe_targets)
    for name in drawn:
        href, loss_drawn = draws[name]
        assert href and href.startswith("data:image/png"), f"step {name}: the heatmap is blank"
        assert loss_drawn > 0, f"step {name}: the loss curve is gone"
        snapshot = expected.snapshot_steps.tolist().index(int(name))
        weights = expected.probe_attention[snapshot]  # trained to that step
        luminance = drawn_cells(href, n)
        assert np.corrcoef(luminance.ravel(), weights.ravel())[0, 1] > 0.9, f"step {name}"
    rail = learned.locator(".slider-rail-rect").bounding_box()
    page.mouse.click(rail["x"] + 1, rail["y"] + rail["height"] / 2)  # the slider's start: step 0
    page.wait_for_function("g => g._fullLayout.shapes[0].x0 === 0", arg=learned.element_handle())
    assert learned.evaluate(step_state) == [0, 0]
    # the title follows the step, back to the one it opened with: the random start's share
    title = learned.locator(".gtitle")
    assert title.text_content() == opened_title, title.text_content()
    assert title.locator("tspan").first.evaluate("e => getComputedStyle(e).fontWeight") == "700"
    page.mouse.click(rail["x"] + rail["width"] - 1, rail["y"] + rail["height"] / 2)  # the end
    page.wait_for_function(
        f"g => g._fullLayout.shapes[0].x0 === {last_step}", arg=learned.element_handle()
    )
    assert learned.evaluate(step_state) == [len(names) - 1, last_step]
    assert title.text_content().startswith(f"Attention at step {last_step}: ")
    assert figure_signatures(page)[0] != opened[0], "the map shows the last step"
    assert not [event for event in runs.events[mark:] if event[1] == "new_session"], (
        "playing and scrubbing ran no script on the server"
    )
    assert not page_exceptions(page)
    # A fresh visit opens on the same figures (the run is cached, and the same run anyway).
    other = browser.new_page(viewport={"width": 1280, "height": 900})
    other.goto(page.url)
    wait_for_figure(other, 90_000)
    wait_for_app(other)
    assert figure_signatures(other)[:2] == opened
    # At 1280 px the two maps, the learned one and the target, start at one height.
    other.wait_for_function(
        "() => document.querySelector('.st-key-lab_target .nsewdrag[data-subplot=\"xy\"]')"
    )
    learned_box, target_box = other.evaluate(MAP_TOPS_JS)
    assert abs(learned_box["map"] - target_box["map"]) <= 2, (learned_box, target_box)
    assert not page_exceptions(other)


# The learned figure's and the target's boxes: the figure's top and bottom, its map's top.
MAP_TOPS_JS = """
() => ['.st-key-lab_learning', '.st-key-lab_target'].map(key => {
  const figure = document.querySelector(key + ' .js-plotly-plot').getBoundingClientRect();
  const map = document.querySelector(key + ' .nsewdrag[data-subplot="xy"]').getBoundingClientRect();
  return {top: figure.top, bottom: figure.bottom, map: map.top};
})
"""


@pytest.mark.browser
def test_the_target_follows_closely_on_a_phone(server, browser):
    """At 390 px, where the columns stack, the target's map follows the figure above it with no
    empty band (it left ~250 px). (At 1280 px the two maps start at one height:
    test_lab_opens_trained_and_plays_in_chromium checks it on its fresh visit.)"""
    from tests.support.browser import page_exceptions, wait_for_app, wait_for_figure

    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{server.url}/lab")
    wait_for_figure(page, 90_000)
    wait_for_app(page)
    page.wait_for_function(
        "() => document.querySelector('.st-key-lab_target .nsewdrag[data-subplot=\"xy\"]')"
    )
    learned_box, target_box = page.evaluate(MAP_TOPS_JS)
    assert target_box["top"] >= learned_box["bottom"], "stacked"
    # the title's line over the map, and the gap between two elements
    assert target_box["map"] - learned_box["bottom"] <= 100, (learned_box, target_box)
    assert not page_exceptions(page)
    page.close()


def test_the_prose_and_formulas_follow_the_runs_switches():
    """Positions off: no position table, no position entries in the map's sums; √d_k off: the
    map and the score formula lose 1/√d_head, as core.lab.query_key_map does."""
    at = run_page(LAB)
    scaled_title = next(t for t in charts(at) if t.startswith("W_qᵀW_k"))
    assert scaled_title.startswith("W_qᵀW_k/√d_head")
    at.toggle(key="lab_positions").set_value(False).run()
    at.toggle(key="lab_scale").set_value(False).run()
    assert_no_exception(at)
    prose = " ".join(str(m.value) for m in at.markdown)
    formulas = " ".join(str(f.value) for f in at.latex)
    assert "one entry of this map, word→word" in prose and "sum of four" not in prose
    assert "position vectors switched off" in formulas and "E_{\\text{pos}}" not in formulas
    assert "\\frac{(W_q x_i)" not in formulas and "\\frac{W_q^{\\top} W_k}" not in formulas
    unscaled_title = next(t for t in charts(at) if t.startswith("W_qᵀW_k"))
    assert unscaled_title.startswith("W_qᵀW_k on")
