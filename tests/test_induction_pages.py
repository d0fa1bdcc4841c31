"""Induction heads on the pages: run_ids (the model on chosen word-piece ids), the found grid of
4 · Multi-head attention, and the lab's second experiment.

run_ids is checked against run(): the same ids through either door give the same Trace. The found
scores are checked against an independent loop over each sequence's token ids.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tiny_families import write_tiny_family

import core
from core import induction

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
