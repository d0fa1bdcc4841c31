"""Induction heads on the pages: run_ids (the model on chosen word-piece ids), the found grid of
4 · Multi-head attention, and the lab's second experiment.

run_ids is checked against run(): the same ids through either door give the same Trace. The found
scores are checked against an independent loop over each sequence's token ids.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from tiny_families import write_tiny_family

import core
from core import induction
from ui import induction_runs

PARITY_TEXTS = ("the bank of the river", "Time flies like an arrow; fruit flies like a banana!")


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return core.load_folder(write_tiny_family(tmp_path_factory.mktemp("gpt2"), "gpt2", seed=3))


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory):
    folder = tmp_path_factory.mktemp("roberta")
    return core.load_folder(write_tiny_family(folder, "roberta", seed=4))


def assert_same_trace(left: core.Trace, right: core.Trace) -> None:
    for field in dataclasses.fields(core.Trace):
        a, b = getattr(left, field.name), getattr(right, field.name)
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        else:
            assert a == b, field.name


@pytest.mark.parametrize("text", PARITY_TEXTS)
def test_run_ids_of_the_encoded_text_is_run_of_the_text(model, tiny_gpt2, tiny_roberta, text):
    for each in (model, tiny_gpt2, tiny_roberta):
        by_text = each.run(text)
        by_ids = each.run_ids(each.encode(text).input_ids)
        assert_same_trace(by_text, by_ids)
        assert by_ids.n_tokens == len(each.encode(text).input_ids)


def test_run_ids_keeps_the_switches(model):
    ids = model.encode("the bank of the river").input_ids
    switched = {"scale": False, "causal": True, "ablate": {(0, 1)}}
    assert_same_trace(
        model.run("the bank of the river", **switched), model.run_ids(ids, **switched)
    )


def test_run_ids_refuses_ids_it_cannot_read(model):
    with pytest.raises(core.EmptyInput):
        model.run_ids([])
    with pytest.raises(ValueError, match="vocabulary row"):
        model.run_ids([101, model.dims.vocab_size, 102])
    with pytest.raises(ValueError, match="at most"):
        model.run_ids([1000] * (model.max_positions + 1))


# ---- found: the scores of a loaded model ------------------------------------------------------
def test_found_sequences_repeat_ordinary_pieces_inside_the_template(model, tiny_gpt2):
    for each, start, end in ((model, ("[CLS]",), ("[SEP]",)), (tiny_gpt2, (), ())):
        sequences = induction.found_sequences(each)
        assert len(sequences) == induction.FOUND_SEQUENCES
        for sequence in sequences:
            layout, ids = sequence.layout, [int(i) for i in sequence.input_ids]
            tokens = [each.tokenizer.token_of(i) for i in ids]
            assert tuple(tokens[: layout.start]) == start
            assert tuple(tokens[layout.end :]) == end
            first = ids[layout.start : layout.second_start]
            assert first == ids[layout.second_start : layout.end]
            assert len(set(first)) == len(first), "each piece once per copy"
            assert not set(first) & each.tokenizer.special_ids
        assert len({tuple(s.input_ids) for s in sequences}) == len(sequences), "seeds differ"


def test_found_scores_match_a_loop_over_each_sequences_ids(model, tiny_gpt2):
    from test_induction import reference_scores

    for each in (model, tiny_gpt2):
        found = induction.found_scores(each)
        previous, inductive = [], []
        for sequence in induction.found_sequences(each):
            trace = each.run_ids(sequence.input_ids)
            ids = [int(i) for i in sequence.input_ids]
            last_repeat = sequence.layout.end  # the [SEP] after the repeat is no repeat
            prev, ind = reference_scores(
                trace.attentions[..., :last_repeat, :last_repeat], ids[:last_repeat],
                sequence.layout.start,
            )  # fmt: skip
            previous.append(prev)
            inductive.append(ind)
        np.testing.assert_allclose(
            found.scores.previous_token, np.mean(previous, axis=0), atol=1e-6
        )
        np.testing.assert_allclose(found.scores.induction, np.mean(inductive, axis=0), atol=1e-6)
        assert found.scores.induction.shape == (each.n_layers, each.n_heads)
        assert found.n_tokens == len(induction.found_sequences(each)[0].input_ids)


def test_even_spread_is_the_mean_of_one_over_the_keys_seen():
    layout = induction.RepeatLayout(start=1, segment_length=3)  # [B] a b c a b c, n = 7
    previous, inductive = induction.even_spread_scores(layout, 7, causal=True)
    assert previous == pytest.approx(np.mean([1 / (i + 1) for i in range(2, 7)]))
    assert inductive == pytest.approx(np.mean([1 / (i + 1) for i in range(4, 7)]))
    assert induction.even_spread_scores(layout, 7, causal=False) == pytest.approx((1 / 7, 1 / 7))


# ---- found: the grid on 4 · Multi-head attention ---------------------------------------------
HEADS_PAGE = "views/multi_head.py"
ALL_HEADS = {"mh_section": "5 · Induction heads"}


def grid_cells(at, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The two heatmaps' (L, H) values as the browser receives them."""
    import json

    from shown import sent_array

    chart = next(c for c in at.get("plotly_chart") if c.key == key)
    heatmaps = [t for t in json.loads(chart.proto.spec)["data"] if t["type"] == "heatmap"]
    return tuple(sent_array(t["z"]) for t in heatmaps)


def induction_texts(at) -> str:
    return " ".join(
        e.value
        for kind in ("markdown", "caption")
        for e in at.get(kind)
        if "induction" in e.value or "Olsson" in e.value
    )


def test_multi_head_page_shows_minilms_grid_and_says_it_is_an_encoder(model):
    from conftest import assert_no_exception, run_page

    at = run_page(HEADS_PAGE, query=ALL_HEADS)
    assert_no_exception(at)
    previous, inductive = grid_cells(at, "mh_induction_grid")
    found = induction.found_scores(model)
    np.testing.assert_allclose(previous, np.round(found.scores.previous_token, 3))
    np.testing.assert_allclose(inductive, np.round(found.scores.induction, 3))
    text = induction_texts(at)
    layer, head, _ = found.scores.best("previous_token")
    assert f"highest previous-token score is L{layer} H{head}'s" in text
    # each score is called a role only at twice what an even spread scores, as printed
    said = re.search(
        r"\(([\d.]+)\), the highest induction score L\d+ H\d+'s \(([\d.]+)\)\. A head that "
        r"spread every row evenly over the pieces it may see would score ([\d.]+) and ([\d.]+)"
        r"(.*?)(\d+ heads?|No head)",
        text,
    )
    previous_best, induction_best, even_previous, even_induction = map(float, said.groups()[:4])
    named = (previous_best >= 2 * even_previous, induction_best >= 2 * even_induction)
    expected = {
        (True, True): ".",
        (False, False): "neither score earns its role's name here.",
        (True, False): "only the previous-token score does here.",
        (False, True): "only the induction score does here.",
    }[named]
    assert said.group(5).strip().endswith(expected), said.group(0)
    assert "is an encoder" in text and "is a decoder" not in text


def test_multi_head_page_shows_a_tiny_gpt2s_grid(tmp_path, local_folders):
    from conftest import assert_no_exception, run_page

    folder = write_tiny_family(tmp_path / "gpt2", "gpt2", seed=3)
    text = "the river bank flows past the old mill"
    at = run_page(HEADS_PAGE, text, folder=folder, state={"mh_section": "5 · Induction heads"})
    assert_no_exception(at)
    assert not [e.value for e in at.error], "the tiny model was not loaded"
    previous, inductive = grid_cells(at, "mh_induction_grid")
    found = induction.found_scores(core.load_folder(folder))
    assert previous.shape == (3, 4)
    np.testing.assert_allclose(inductive, np.round(found.scores.induction, 3))
    assert "is a decoder" in induction_texts(at)


# ---- learned: the lab's second experiment ------------------------------------------------------
LAB = "views/lab.py"


def test_lab_trains_both_runs_scrubs_and_says_what_the_numbers_say():
    """On the defaults, as a visitor: Train (2 layers), scrub, Train with 1 layer."""
    from conftest import assert_no_exception, drawn_figures, run_page

    from ui import induction_charts

    at = run_page(LAB, timeout=600)
    assert_no_exception(at)
    assert not {"ind_loss", "ind_grid", "ind_one_grid"} & drawn_figures(at), "nothing trained yet"
    at.button(key="ind_train_two").click().run()
    assert_no_exception(at)
    assert {"ind_loss", "ind_previous_curves", "ind_induction_curves", "ind_grid"} <= (
        drawn_figures(at)
    )
    # the page's run, from the door's cache (this process's): what it trained is what it shows;
    # tests/test_induction.py checks training itself against independent computations
    two = induction_runs.trained_run(induction.InductionSettings(n_layers=2))
    final = two.scores_at(-1)
    np.testing.assert_allclose(grid_cells(at, "ind_grid")[1], np.round(final.induction, 3))
    story = " ".join(e.value for e in at.markdown if "Training " in e.value)
    assert f"Training stopped after {two.steps} steps" in story  # the defaults solve it
    (layer, head), step = min(two.crossings(0.5).items(), key=lambda item: item[1])
    assert f"{induction_charts.head_name(layer, head)} was the first head" in story
    assert f"at step {step}" in story
    fall = two.fall()
    assert ("a phase change" in story) == (fall.steps <= two.steps / 4)

    early = int(two.snapshot_steps[2])
    at.slider(key="ind_step").set_value(early).run()
    assert_no_exception(at)
    np.testing.assert_allclose(
        grid_cells(at, "ind_grid")[1], np.round(two.scores_at(2).induction, 3)
    )
    assert not (grid_cells(at, "ind_grid")[1] >= 0.5).any(), "no induction head that early"

    at.button(key="ind_train_one").click().run()
    assert_no_exception(at)
    assert {"ind_one_loss", "ind_one_grid", "ind_grid"} <= drawn_figures(at)
    one = induction_runs.trained_run(induction.InductionSettings(n_layers=1))
    one_best = one.scores_at(-1).best("induction")[2]
    assert one_best < 0.5 and one.solved_at is None, "the claim the page makes"
    one_story = " ".join(e.value for e in at.markdown if "With one layer" in e.value)
    assert f"Its best induction score is {one_best:.2f}" in one_story
    assert "no head finds the word after the earlier copy" in one_story
    assert at.query_params["ind_run"] == "21"
