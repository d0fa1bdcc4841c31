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
