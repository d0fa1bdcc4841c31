"""The training lab: task targets, the loss and its gradient, training to the known solution, page."""

from __future__ import annotations

import dataclasses
import json
import math

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
    """A seeded model with d_model 3, d_head 2 and two sequences of the task."""
    task = lab.TASKS[task_name]
    settings = dataclasses.replace(lab.Settings(task=task_name, d_head=2), **changes)
    params = lab.init_parameters(task, 2, torch.Generator().manual_seed(1), d_model=3, dtype=dtype)
    tokens = torch.tensor(TINY_SEQUENCES[task_name])
    return params, tokens, lab.task_targets(task, tokens), settings


def explicit_weights(params, tokens, settings) -> np.ndarray:
    """α_ij by the formula, one element at a time, in float64 numpy."""
    emb = params.token_embedding.detach().numpy()
    pos = params.position_embedding.detach().numpy()
    w_q, w_k = params.w_query.detach().numpy(), params.w_key.detach().numpy()
    n = tokens.shape[1]
    weights = np.zeros((tokens.shape[0], n, n))
    for b, row in enumerate(tokens.tolist()):
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
    params, tokens, targets, settings = tiny_case(**changes)
    expected = explicit_weights(params, tokens, settings)
    got = lab.attention_weights(params, tokens, settings).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)

    squared, log_loss, count = 0.0, 0.0, 0
    for b, i in np.ndindex(*targets.shape):
        t = int(targets[b, i])
        if settings.causal and t > i:
            continue  # a hidden target is left out of the loss
        squared += sum((expected[b, i, j] - (j == t)) ** 2 for j in range(tokens.shape[1]))
        log_loss -= math.log(expected[b, i, t])
        count += 1
    squared_got = lab.loss(params, tokens, targets, settings)
    log_got = lab.loss(params, tokens, targets, dataclasses.replace(settings, loss="cross_entropy"))
    assert squared_got.item() == pytest.approx(squared / count, rel=1e-10)
    assert log_got.item() == pytest.approx(log_loss / count, rel=1e-10)


@pytest.mark.parametrize("loss_name", ["squared", "cross_entropy"])
def test_gradient_matches_finite_differences(loss_name):
    params, tokens, targets, settings = tiny_case(loss=loss_name, causal=True)
    value = lab.loss(params, tokens, targets, settings)
    gradients = torch.autograd.grad(value, params.tensors())
    h = 1e-6
    for tensor, gradient in zip(params.tensors(), gradients, strict=True):
        numeric = torch.zeros_like(tensor)
        with torch.no_grad():
            for index in np.ndindex(*tensor.shape):
                original = tensor[index].item()
                tensor[index] = original + h
                up = lab.loss(params, tokens, targets, settings).item()
                tensor[index] = original - h
                down = lab.loss(params, tokens, targets, settings).item()
                tensor[index] = original
                numeric[index] = (up - down) / (2 * h)
        torch.testing.assert_close(gradient, numeric, rtol=1e-5, atol=1e-8)


def test_written_out_adam_follows_torch_adam():
    params, tokens, targets, settings = tiny_case()
    twins = [tensor.detach().clone().requires_grad_() for tensor in params.tensors()]
    ours = lab.Adam(params.tensors(), lr=0.05)
    reference = torch.optim.Adam(twins, lr=0.05)
    twin_params = lab.Parameters(*twins)
    for t in range(1, 6):
        ours.step(
            list(
                torch.autograd.grad(lab.loss(params, tokens, targets, settings), params.tensors())
            ),
            t,
        )
        reference.zero_grad()
        lab.loss(twin_params, tokens, targets, settings).backward()
        reference.step()
    for mine, theirs in zip(params.tensors(), twins, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)
    assert not torch.equal(params.w_query, tiny_case()[0].w_query), "the parameters moved"


def test_bilinear_form_entries_add_up_to_the_scores():
    params, tokens, _, settings = tiny_case(scale=True)
    form = lab.bilinear_form(params, settings).detach().numpy()  # rows: 5 words, then positions
    n_words = len(lab.TASKS["first"].vocabulary)
    scores = lab.masked_scores(params, tokens, settings).detach().numpy()
    for b, row in enumerate(tokens.tolist()):
        for i, j in [(0, 0), (3, 7), (9, 2)]:
            word_i, word_j, pos_i, pos_j = row[i], row[j], n_words + i, n_words + j
            four_parts = (
                form[word_i, word_j]
                + form[word_i, pos_j]
                + form[pos_i, word_j]
                + form[pos_i, pos_j]
            )
            assert four_parts == pytest.approx(scores[b, i, j], rel=1e-9)


def test_a_tie_between_two_copies_is_not_a_hit():
    weights = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 0.9, 0.1], [0.2, 0.2, 0.6]]])
    score = lab.evaluate(weights, torch.tensor([[0, 1, 2]]))
    assert score.accuracy == pytest.approx(2 / 3)
    assert score.mass == pytest.approx((0.5 + 0.9 + 0.6) / 3)


def test_snapshot_steps_and_lookup():
    steps = lab.snapshot_steps(300)
    assert steps[0] == 0 and steps[-1] == 300 and len(steps) == lab.N_SNAPSHOTS + 1
    assert lab.snapshot_steps(7).tolist() == list(range(8))
    assert lab.snapshot_steps(103).tolist()[-2:] == [102, 103]
    run = lab.train(lab.Settings(steps=12))  # a snapshot after every update
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
    return {name: lab.train(lab.Settings(task=name)) for name in lab.TASKS}


@pytest.mark.parametrize("task", list(lab.TASKS))
def test_training_reaches_the_known_solution(default_runs, task):
    run = default_runs[task]
    assert run.eval_mass[0] < 0.5, "an untrained head should not already solve the task"
    assert run.eval_mass[-1] > 0.95
    assert run.eval_accuracy[-1] > 0.99
    # The probe's learned map is the target pattern, row by row.
    assert (run.probe_attention[-1].argmax(axis=1) == run.probe_targets).all()
    assert run.loss[-20:].mean() < run.loss[:20].mean() / 10


def test_previous_token_is_impossible_without_positions():
    run = lab.train(lab.Settings(task="previous", positions=False, steps=200))
    assert run.eval_mass[-1] < 0.5  # without positions, nothing says which key came just before


def test_causal_mask_hides_every_opening_brackets_partner():
    run = lab.train(lab.Settings(task="bracket", causal=True, steps=200))
    assert run.reachable_share == 0.5  # openers' partners lie in the future
    assert run.eval_accuracy[-1] == pytest.approx(0.5, abs=0.01)  # closers learn, openers cannot


def test_same_seed_same_numbers_other_seed_other_numbers():
    settings = lab.Settings(task="first", steps=40)
    first, again = lab.train(settings), lab.train(settings)
    np.testing.assert_array_equal(first.loss, again.loss)
    np.testing.assert_array_equal(first.probe_attention, again.probe_attention)
    np.testing.assert_array_equal(first.bilinear, again.bilinear)
    other = lab.train(dataclasses.replace(settings, seed=1))
    assert not np.array_equal(first.loss, other.loss)


def test_unscaled_scores_start_sqrt_d_head_wider():
    """Same seed, same start: only the 1/√d_head differs, so the spreads differ by √d_head."""
    scaled = lab.train(lab.Settings(d_head=64, steps=1))
    unscaled = lab.train(lab.Settings(d_head=64, steps=1, scale=False))
    assert unscaled.initial_score_std / scaled.initial_score_std == pytest.approx(8.0, rel=1e-5)
    assert 1.0 < scaled.initial_score_std < 4.0  # embeddings N(0, 1), W_q and W_k N(0, 1/d_model)


def test_initial_w_q_and_w_k_entries_have_variance_one_over_d_model():
    """N(0, 1/d_model) entries: a query entry, a sum of d_model N(0, 1) terms, has variance ≈ 1."""
    params = lab.init_parameters(lab.TASKS["previous"], 256, torch.Generator().manual_seed(7))
    for w in (params.w_query, params.w_key):
        entries = w.detach().double().flatten()  # 256 × 32 draws
        variance = float(((entries - entries.mean()) ** 2).sum()) / (len(entries) - 1)
        assert variance == pytest.approx(1 / lab.D_MODEL, rel=0.1)
    x = params.token_embedding.detach().double()  # (V, d_model), N(0, 1) entries
    queries = x @ params.w_query.detach().double().T  # (V, 256)
    assert float((queries**2).mean()) == pytest.approx(1.0, rel=0.3)


# ---- figures ------------------------------------------------------------------------------------
def test_figures_show_the_chosen_snapshot(default_runs):
    run = default_runs["bracket"]
    index = 10
    loss = lab_charts.loss_curve(run, index)
    assert loss.layout.shapes[0].x0 == run.snapshot_steps[index]
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


# ---- the page -----------------------------------------------------------------------------------
def spec(at, index: int) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def heatmap_z(at, index: int) -> np.ndarray:
    """The z matrix of a page's heatmap; plotly sends arrays as base64 ("bdata") with a dtype."""
    return sent_array(spec(at, index)["data"][0]["z"])


def test_page_trains_and_scrubs():
    at = run_page(LAB)
    assert_no_exception(at)
    assert not at.get("plotly_chart"), "nothing is trained before the button is pressed"
    at.selectbox(key="lab_task").set_value("bracket").run()
    at.button[0].click().run()
    assert_no_exception(at)
    expected = lab.train(lab.Settings(task="bracket"))
    assert spec(at, 0)["layout"]["shapes"][0]["x0"] == 300
    np.testing.assert_allclose(heatmap_z(at, 1), expected.probe_attention[-1], atol=1e-4)

    at.slider(key="lab_step").set_value(60).run()
    assert_no_exception(at)
    index = expected.snapshot_index(60)
    assert spec(at, 0)["layout"]["shapes"][0]["x0"] == 60
    np.testing.assert_allclose(heatmap_z(at, 1), expected.probe_attention[index], atol=1e-4)

    at.toggle(key="lab_scale").set_value(False).run()  # new settings: the old run is not shown
    assert not at.get("plotly_chart")
    # Back to the trained settings needs Train again, which opens on the last step.
    at.toggle(key="lab_scale").set_value(True).run()
    at.button[0].click().run()
    assert at.slider(key="lab_step").value == 300


def test_a_copied_link_reopens_the_same_run():
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"lab_task": "first occurrence of the word", "lab_step": "120"})
    at.query_params["lab_run"] = "1"  # the page adds this once a run is shown
    at.query_params.update({"lab_d_head": "16", "lab_seed": "7"})
    at.run()
    at.switch_page(LAB)
    at.run()
    assert_no_exception(at)
    expected = lab.train(lab.Settings(task="first", d_head=16, seed=7))
    np.testing.assert_allclose(
        heatmap_z(at, 1), expected.probe_attention[expected.snapshot_index(120)], atol=1e-4
    )


def test_hostile_link_values_are_clamped_or_ignored():
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    hostile = {
        "lab_task": "<img src=x onerror=alert(1)>",
        "lab_d_head": "3",
        "lab_steps": "99999",
        "lab_seed": "-5",
        "lab_step": "999999",
        "lab_loss": "nonsense",
        "lab_run": "1",  # so the run is trained and the step slider drawn with these values
    }
    at.query_params.update(hostile)
    at.run()
    at.switch_page(LAB)
    at.run()
    assert_no_exception(at)
    # Every control fell back to a value the page offers, and the run shown is that run.
    assert at.selectbox(key="lab_task").value in lab.TASKS
    assert at.select_slider(key="lab_steps").value in (100, 200, 300, 500)
    assert 0 <= at.number_input(key="lab_seed").value <= 9999
    step = at.slider(key="lab_step").value
    assert 0 <= step <= at.select_slider(key="lab_steps").value


# ---- the page in a real browser -----------------------------------------------------------------
@pytest.mark.browser
def test_lab_trains_in_chromium(server, browser):
    """Open the lab, press Train, scrub with the keyboard."""
    from browser import (
        figure_signatures,
        page_exceptions,
        wait_figures_changed,
        wait_for_app,
        wait_for_figure,
    )

    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    page.goto(f"{url}/lab")
    wait_for_app(page)
    page.get_by_role("button", name="Train").click()
    wait_for_figure(page, 90_000)
    wait_for_app(page)
    assert not page_exceptions(page)
    before = figure_signatures(page)
    page.locator('input[aria-label="Step"]').focus()
    page.keyboard.press("Home")  # to step 0: the untrained head
    assert wait_figures_changed(page, before), "the figures follow the step slider"
    assert "lab_step=0" in page.url, "the step is in the address bar"
    assert "lab_run=1" in page.url, "the address says a run is shown"
    assert not page_exceptions(page)
    wait_for_app(page)
    shown_here = figure_signatures(page)
    # The copied link, opened fresh: the same run at the same step, without pressing Train.
    other = browser.new_page(viewport={"width": 1300, "height": 1600})
    other.goto(page.url)
    wait_for_figure(other, 90_000)
    wait_for_app(other)
    other.wait_for_function(
        f"() => document.querySelectorAll('.js-plotly-plot').length >= {len(shown_here)}"
    )
    assert figure_signatures(other) == shown_here
