"""Induction heads: the two scores on hand-built blocks, the repeat task, the decoder, training.

The scores are checked against a second computation that finds each token's earlier occurrence
by its id (not by the layout's arithmetic); training is checked on the claims the page makes.
"""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from shown import sent_array

from core import induction
from ui import door, induction_charts, induction_runs

torch.set_num_threads(1)  # the page trains on one thread; determinism is checked on the same


# ---- found: independent references ------------------------------------------------------------
def reference_scores(attentions: np.ndarray, ids: list[int], start: int) -> tuple[np.ndarray, ...]:
    """(L, H, n, n), token ids, first copy's start -> (previous (L, H), induction (L, H)),
    by loops: the induction key of a token is found by searching its earlier occurrence, and the
    copies end after the last token that has one."""
    n_layers, n_heads = attentions.shape[:2]
    seen_before = [i for i in range(start, len(ids)) if ids[i] in ids[start:i]]
    end = seen_before[-1] + 1
    previous = np.zeros((n_layers, n_heads))
    inductive = np.zeros((n_layers, n_heads))
    for layer in range(n_layers):
        for head in range(n_heads):
            weights = attentions[layer, head]
            on_previous = [weights[i, i - 1] for i in range(start + 1, end)]
            on_next = []
            for i in range(start, end):
                earlier = [j for j in range(start, i) if ids[j] == ids[i]]
                if earlier:  # a token of the second copy: it was seen once before
                    on_next.append(weights[i, earlier[0] + 1])
            previous[layer, head] = sum(on_previous) / len(on_previous)
            inductive[layer, head] = sum(on_next) / len(on_next)
    return previous, inductive


def causal_uniform(n_layers: int, n_heads: int, n: int) -> np.ndarray:
    """(L, H, n, n): every query spreads its weight evenly over keys 0 … i."""
    rows = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    return np.broadcast_to(rows, (n_layers, n_heads, n, n)).copy()


SEGMENT = [7, 3, 9, 4, 1]  # T = 5 distinct ids
BOS = 0
IDS = [BOS, *SEGMENT, *SEGMENT]  # n = 11, first copy at 1
LAYOUT = induction.RepeatLayout(start=1, segment_length=5)


def test_layout_pairs_match_the_token_ids():
    queries, keys = LAYOUT.induction_pairs()
    for i, j in zip(queries, keys, strict=True):
        # the key holds the token that followed the query's token the first time
        assert IDS[j] == IDS[IDS.index(IDS[i]) + 1]
    assert list(queries) == list(range(6, 11))
    queries, keys = LAYOUT.previous_token_pairs()
    assert list(queries) == list(range(2, 11)) and list(keys) == list(range(1, 10))


def test_perfect_heads_score_one():
    n = len(IDS)
    attentions = causal_uniform(2, 3, n)
    for i in range(n):  # head (0, 1): every token looks at the one before (the first at itself)
        attentions[0, 1, i] = np.eye(n)[max(i - 1, 0)]
    for i in range(n):  # head (1, 2): the second copy looks ahead of its earlier occurrence
        target = i - 5 + 1 if i >= 6 else 0
        attentions[1, 2, i] = np.eye(n)[target]
    scores = induction.head_scores(attentions, LAYOUT)
    assert scores.previous_token[0, 1] == 1.0
    assert scores.induction[1, 2] == 1.0
    assert scores.best("induction") == (1, 2, 1.0)
    assert scores.best("previous_token") == (0, 1, 1.0)
    np.testing.assert_allclose(
        (scores.previous_token, scores.induction), reference_scores(attentions, IDS, 1)
    )


def test_uniform_attention_scores_the_mean_of_one_over_i_plus_one():
    scores = induction.head_scores(causal_uniform(1, 2, len(IDS)), LAYOUT)
    # query i sees i + 1 keys, so any one key gets 1/(i + 1)
    previous = sum(Fraction(1, i + 1) for i in range(2, 11)) / 9
    inductive = sum(Fraction(1, i + 1) for i in range(6, 11)) / 5
    np.testing.assert_allclose(scores.previous_token, float(previous), rtol=1e-12)
    np.testing.assert_allclose(scores.induction, float(inductive), rtol=1e-12)


def test_random_blocks_match_the_reference():
    rng = np.random.default_rng(5)
    for start in (0, 1, 3):
        segment = rng.choice(np.arange(50, 90), 6, replace=False).tolist()
        ids = rng.integers(0, 50, start).tolist() + segment + segment + [1, 2]  # a tail too
        raw = rng.random((2, 4, len(ids), len(ids)))
        attentions = np.tril(raw) / np.tril(raw).sum(-1, keepdims=True)
        layout = induction.RepeatLayout(start, 6)
        scores = induction.head_scores(attentions, layout)
        np.testing.assert_allclose(
            (scores.previous_token, scores.induction), reference_scores(attentions, ids, start)
        )


def test_mean_over_sequences_weighs_each_the_same():
    rng = np.random.default_rng(1)
    blocks = [rng.random((1, 2, 12, 12)), rng.random((1, 2, 9, 9))]
    layouts = [induction.RepeatLayout(0, 6), induction.RepeatLayout(1, 4)]
    mean = induction.mean_head_scores(blocks, layouts)
    each = [induction.head_scores(b, lay) for b, lay in zip(blocks, layouts, strict=True)]
    np.testing.assert_allclose(mean.induction, (each[0].induction + each[1].induction) / 2)


def test_pairs_outside_the_block_are_refused():
    with pytest.raises(ValueError):
        induction.head_scores(np.ones((1, 1, 8, 8)), induction.RepeatLayout(1, 5))  # needs 11
    with pytest.raises(ValueError):
        induction.RepeatLayout(0, 1)


def test_repeated_sequence_from_candidate_ids():
    candidates = list(range(100, 140))
    made = induction.repeated_sequence(candidates, 12, seed=3, bos_id=2)
    ids = made.input_ids.tolist()
    assert ids[0] == 2 and len(ids) == 25
    assert ids[1:13] == ids[13:25]
    assert len(set(ids[1:13])) == 12 and set(ids[1:]) <= set(candidates)
    assert made.layout == induction.RepeatLayout(1, 12)
    again = induction.repeated_sequence(candidates, 12, seed=3, bos_id=2)
    assert again.input_ids.tolist() == ids
    other = induction.repeated_sequence(candidates, 12, seed=4, bos_id=2)
    assert other.input_ids.tolist() != ids
    plain = induction.repeated_sequence(candidates, 12, seed=3)
    assert plain.layout.start == 0 and len(plain.input_ids) == 24
    with pytest.raises(ValueError):
        induction.repeated_sequence(range(5), 6, seed=0)


# ---- learned: the task ------------------------------------------------------------------------
SETTINGS = induction.InductionSettings()


def test_batches_repeat_one_segment_at_a_random_offset():
    batch = induction.make_batch(SETTINGS, 300, torch.Generator().manual_seed(0))
    tokens = batch.tokens.tolist()
    first_half, repeated_half = batch.first_half().tolist(), batch.repeated_half().tolist()
    for row, start, length, first, repeated in zip(
        tokens,
        batch.starts.tolist(),
        batch.segment_lengths.tolist(),
        first_half,
        repeated_half,
        strict=True,
    ):
        assert SETTINGS.shortest_segment <= length <= SETTINGS.longest_segment
        assert 0 <= start <= SETTINGS.n_tokens - 2 * SETTINGS.longest_segment
        assert row[start : start + length] == row[start + length : start + 2 * length]
        assert len(set(row[: start + length])) == start + length  # no word twice before copy 2
        assert max(row) < SETTINGS.vocab_size
        # prediction i is of token i + 1: the first copy's 2nd … T-th, the second copy's likewise
        assert [i for i, on in enumerate(first) if on] == list(range(start, start + length - 1))
        repeated_at = [i for i, on in enumerate(repeated) if on]
        assert repeated_at == list(range(start + length, start + 2 * length - 1))
        for i in repeated_at:  # each is answered by the token after the earlier occurrence
            assert row[i + 1] == row[row.index(row[i]) + 1]
    lengths, starts = batch.segment_lengths.tolist(), batch.starts.tolist()
    assert len(set(lengths)) == SETTINGS.longest_segment - SETTINGS.shortest_segment + 1
    assert len(set(starts)) == SETTINGS.longest_prefix + 1  # every offset occurs


def test_settings_refuse_tasks_that_cannot_be_built():
    with pytest.raises(ValueError):
        induction.InductionSettings(n_tokens=30)  # two copies of 16 do not fit
    with pytest.raises(ValueError):
        induction.InductionSettings(vocab_size=20)  # prefix + segment need 24 distinct words
    with pytest.raises(ValueError):
        induction.InductionSettings(d_model=30)


# ---- learned: the decoder against a loop written out ------------------------------------------
def explicit_forward(decoder: induction.Decoder, row: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """One sequence through the decoder in float64 numpy, one query at a time ->
    (logits (n, V), attentions (L, H, n, n))."""

    def array(t: torch.Tensor) -> np.ndarray:
        return t.detach().double().numpy()

    n, n_heads = len(row), decoder.n_heads
    x = array(decoder.token_embedding)[row] + array(decoder.position_embedding)[:n]
    d_head = x.shape[1] // n_heads
    attentions = np.zeros((len(decoder.layers), n_heads, n, n))
    for index, layer in enumerate(decoder.layers):
        q, k, v = (x @ array(w).T for w in (layer.w_query, layer.w_key, layer.w_value))
        outputs = np.zeros_like(x)
        for h in range(n_heads):
            cols = slice(h * d_head, (h + 1) * d_head)
            for i in range(n):
                scores = [q[i, cols] @ k[j, cols] / math.sqrt(d_head) for j in range(i + 1)]
                top = max(scores)
                weights = np.exp(np.array(scores) - top)
                weights /= weights.sum()
                attentions[index, h, i, : i + 1] = weights
                outputs[i, cols] = weights @ v[: i + 1, cols]
        x = x + outputs @ array(layer.w_out).T
    return x @ array(decoder.unembedding).T, attentions


def test_forward_matches_the_loop():
    settings = dataclasses.replace(SETTINGS, d_model=16, n_heads=2)
    generator = torch.Generator().manual_seed(2)
    decoder = induction.init_decoder(settings, generator)
    batch = induction.make_batch(settings, 2, generator)
    with torch.no_grad():
        logits, per_layer = induction.forward(decoder, batch.tokens)
    attentions = torch.stack(per_layer, dim=1)  # (B, L, H, n, n)
    assert attentions.shape == (2, 2, 2, 40, 40)
    for b, row in enumerate(batch.tokens.tolist()):
        want_logits, want_attentions = explicit_forward(decoder, row)
        np.testing.assert_allclose(attentions[b].numpy(), want_attentions, atol=1e-5)
        np.testing.assert_allclose(logits[b].numpy(), want_logits, atol=1e-4, rtol=1e-4)
    losses = induction.next_token_losses(logits, batch.tokens)
    row = batch.tokens[0].tolist()
    probabilities = torch.softmax(logits[0].double(), dim=-1)
    for i in (0, 17, 38):
        want = -math.log(float(probabilities[i, row[i + 1]]))
        assert float(losses[0, i]) == pytest.approx(want, rel=1e-5)


# ---- learned: training ------------------------------------------------------------------------
def test_a_seed_gives_the_same_run_and_progress_is_reported():
    short = dataclasses.replace(SETTINGS, max_steps=12)
    reports = []
    run = induction.train_induction(
        short, on_step=lambda done, total: reports.append((done, total))
    )
    again = induction.train_induction(short)
    assert reports == [(k, 12) for k in range(1, 13)]
    assert run.steps == 12 and list(run.snapshot_steps) == [0, 5, 10, 12]
    for field in ("repeated_loss", "first_half_loss", "induction", "previous_token"):
        np.testing.assert_array_equal(getattr(run, field), getattr(again, field))
    other = induction.train_induction(dataclasses.replace(short, seed=1))
    assert not np.array_equal(other.repeated_loss, run.repeated_loss)


@pytest.fixture(scope="module")
def two_layers() -> induction.InductionRun:
    return induction.train_induction(SETTINGS)


@pytest.fixture(scope="module")
def one_layer() -> induction.InductionRun:
    return induction.train_induction(dataclasses.replace(SETTINGS, n_layers=1))


@pytest.mark.slow
def test_two_layers_learn_an_induction_head_on_a_previous_token_head(two_layers):
    run = two_layers
    assert run.solved_at is not None and run.steps == run.solved_at < SETTINGS.max_steps
    assert run.probe_repeated_loss[-1] < SETTINGS.solved_loss
    assert run.probe_repeated_loss[0] > 0.9 * SETTINGS.chance_loss  # it started from a guess
    final = run.scores_at(-1)
    assert final.induction[1].max() > 0.8  # a layer-1 head reads the token after the repeat
    assert final.induction[0].max() < 0.2  # layer 0 alone cannot
    assert final.previous_token[0].max() > 0.6  # the layer-0 head it builds on
    # the phase change: the induction head forms between the first and the last snapshot
    assert run.induction[0, 1].max() < 0.2
    crossings = run.crossings(0.5)
    assert crossings and all(layer == 1 for layer, _ in crossings)
    for (layer, head), step in crossings.items():  # the first snapshot at or above 0.5
        k = list(run.snapshot_steps).index(step)
        assert run.induction[k, layer, head] >= 0.5 > run.induction[:k, layer, head].max()


@pytest.mark.slow
def test_one_layer_with_the_same_budget_cannot(one_layer):
    run = one_layer
    assert run.solved_at is None and run.steps == SETTINGS.max_steps
    assert run.probe_repeated_loss[-1] > 1.0  # ten times the bar the two layers clear
    assert run.induction.max() < 0.5 and run.crossings(0.5) == {}


@pytest.mark.slow
def test_the_examples_attention_is_the_last_snapshots(two_layers):
    run = two_layers
    scores = induction.head_scores(run.example_attention, run.example_layout)
    layout = run.example_layout
    ids = run.example_tokens.tolist()
    assert ids[layout.start : layout.second_start] == ids[layout.second_start : layout.end]
    assert run.example_attention.shape == (2, 4, SETTINGS.n_tokens, SETTINGS.n_tokens)
    layer, head, _ = run.scores_at(-1).best("induction")
    assert scores.induction[layer, head] > 0.5  # one sequence agrees with the batch's mean


# ---- figures, read as the browser receives them ------------------------------------------------
def sent(figure) -> dict:
    return json.loads(figure.to_json())


GRID_SCORES = induction.HeadScores(
    previous_token=np.array([[0.1, 0.92, 0.3], [0.05, 0.2, 0.0]]),
    induction=np.array([[0.02, 0.04, 0.01], [0.3, 0.12, 0.871]]),
)


def test_score_grid_draws_both_grids_with_their_numbers():
    spec = sent(induction_charts.score_grid(GRID_SCORES))
    heatmaps = [t for t in spec["data"] if t["type"] == "heatmap"]
    numbers = [t for t in spec["data"] if t.get("mode") == "text"]
    assert len(heatmaps) == 2 and len(numbers) == 2
    for heatmap, text, grid in zip(
        heatmaps, numbers, (GRID_SCORES.previous_token, GRID_SCORES.induction), strict=True
    ):
        np.testing.assert_allclose(sent_array(heatmap["z"]), grid)
        assert list(sent_array(heatmap["x"])) == [0, 1, 2] and list(sent_array(heatmap["y"])) == [
            0,
            1,
        ]
        assert (text["xaxis"], text["yaxis"]) == (heatmap["xaxis"], heatmap["yaxis"])
        cells = zip(sent_array(text["x"]), sent_array(text["y"]), text["text"], strict=True)
        for head, layer, written in cells:  # each number sits on its own cell
            assert written == f"{grid[int(layer), int(head)]:.2f}"
    frames = [(s["x0"] + 0.5, s["y0"] + 0.5) for s in spec["layout"]["shapes"]]
    assert frames == [(1, 0), (2, 1)]  # best previous-token head L0 H1, best induction L1 H2
    colours = spec["layout"]["coloraxis"]
    assert (colours["cmin"], colours["cmax"]) == (0, 1)
    assert (
        spec["layout"]["xaxis"]["dtick"] == 1 and spec["layout"]["yaxis"]["autorange"] == "reversed"
    )


def test_loss_ticks_are_plain_decimals():
    values, labels = induction_charts.loss_ticks(0.003, 8.0)
    assert values == [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5]
    assert labels == ["0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5"]
    values, labels = induction_charts.loss_ticks(1.7, 9.5)  # less than a decade: finer
    assert values == [2, 3, 4, 5, 6, 7, 8, 9] and labels[0] == "2"


def synthetic_run(**changes) -> induction.InductionRun:
    """A hand-made run of 20 steps, 2 layers × 2 heads: L1 H0 reaches 0.5 at step 10, L1 H1 at
    step 15, the layer-0 heads never."""
    snapshot_steps = np.array([0, 5, 10, 15, 20])
    scores = np.zeros((5, 2, 2))
    scores[:, 1, 0] = [0.0, 0.2, 0.5, 0.8, 0.9]
    scores[:, 1, 1] = [0.0, 0.1, 0.3, 0.6, 0.7]
    scores[:, 0, :] = 0.45
    repeated = np.geomspace(3.8, 0.02, 20)
    fields = {
        "settings": dataclasses.replace(SETTINGS, max_steps=20),
        "first_half_loss": np.linspace(3.9, 9.0, 20),
        "repeated_loss": repeated,
        "snapshot_steps": snapshot_steps,
        "probe_first_half_loss": np.linspace(3.9, 9.0, 5),
        "probe_repeated_loss": repeated[[0, 5, 10, 15, 19]],
        "previous_token": scores[:, ::-1],
        "induction": scores,
        "solved_at": 20,
        "example_tokens": np.arange(40),
        "example_layout": induction.RepeatLayout(0, 8),
        "example_attention": causal_uniform(2, 2, 40),
        "seconds": 0.0,
    }
    return induction.InductionRun(**{**fields, **changes})


def test_crossings_are_each_heads_first_snapshot_at_the_bar():
    assert synthetic_run().crossings(0.5) == {(1, 0): 10, (1, 1): 15}
    assert synthetic_run().crossings(0.95) == {}


def test_loss_curves_draw_both_halves_and_mark_the_crossings():
    run = synthetic_run()
    spec = sent(induction_charts.loss_curves(run, step=15))
    lines = [t for t in spec["data"] if t["type"] == "scatter"]
    assert [t["name"] for t in lines] == [
        "first copy (random, left out of training)",
        "repeat (predictable)",
    ]
    np.testing.assert_allclose(sent_array(lines[0]["y"]), run.first_half_loss, atol=1e-4)
    np.testing.assert_allclose(sent_array(lines[1]["y"]), run.repeated_loss, atol=1e-4)
    assert list(sent_array(lines[1]["x"])) == list(range(20))
    y_axis = spec["layout"]["yaxis"]
    assert y_axis["type"] == "log"
    assert all(label.replace(".", "").isdigit() for label in y_axis["ticktext"])  # no "µ", no "m"
    assert y_axis["tickvals"][0] <= run.repeated_loss.min() and y_axis["tickvals"][-1] >= 5
    low, high = (10**end for end in y_axis["range"])
    assert low < run.repeated_loss.min() and high > run.first_half_loss.max()
    shapes = spec["layout"]["shapes"]
    chance = [s for s in shapes if s["y0"] == s["y1"]]
    assert [s["y0"] for s in chance] == [pytest.approx(math.log(48))]
    upright = [s["x0"] for s in shapes if s["x0"] == s["x1"]]
    assert upright == [10, 15, 15]  # L1 H0, L1 H1, then the chosen step
    chance_label = [a for a in spec["layout"]["annotations"] if a.get("xref") == "paper"]
    assert [10 ** a["y"] for a in chance_label] == [pytest.approx(math.log(48))]
    marks = [a["text"] for a in spec["layout"]["annotations"] if a.get("xref") == "x"]
    assert marks == ["L1 H0 ≥ 0.5", "L1 H1 ≥ 0.5"]


def test_score_curves_draw_one_line_per_head():
    run = synthetic_run()
    spec = sent(induction_charts.score_curves(run, "induction"))
    lines = spec["data"]
    assert [t["name"] for t in lines] == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]
    for line, (layer, head) in zip(lines, np.ndindex(2, 2), strict=True):
        np.testing.assert_allclose(sent_array(line["y"]), run.induction[:, layer, head])
        assert list(sent_array(line["x"])) == [0, 5, 10, 15, 20]
    spec = sent(induction_charts.score_curves(run, "previous_token"))
    np.testing.assert_allclose(sent_array(spec["data"][0]["y"]), run.previous_token[:, 0, 0])


# ---- through the door -------------------------------------------------------------------------
@pytest.fixture
def fresh_door():
    door.forget_all()
    yield door
    door.forget_all()


def test_a_training_run_is_cached_read_only(fresh_door):
    short = dataclasses.replace(SETTINGS, max_steps=6)
    run = induction_runs.trained_run(short)
    assert induction_runs.trained_run(short) is run  # the second visitor trains nothing
    np.testing.assert_array_equal(run.repeated_loss, induction.train_induction(short).repeated_loss)
    assert not run.induction.flags.writeable
    assert induction.training_bytes(short) > 10 * door.nbytes(run)  # training holds the most


def test_found_scores_of_a_trace(fresh_door, model):
    trace = model.run("a b c d e a b c d e")  # [CLS] a b c d e a b c d e [SEP]
    layout = induction.RepeatLayout(start=1, segment_length=5)
    scores = induction_runs.found_scores(trace, layout)
    want = reference_scores(
        np.asarray(trace.attentions, dtype=np.float64), list(trace.input_ids[:-1]), 1
    )
    np.testing.assert_allclose((scores.previous_token, scores.induction), want, rtol=1e-6)
    assert induction_runs.found_scores(trace, layout) is scores
    mean = induction_runs.mean_found_scores([trace, trace], [layout, layout])
    np.testing.assert_allclose(mean.induction, scores.induction)
