"""Every page's takeaway: the one sentence on its first screen states numbers computed here,
independently of the page (numpy on the model's weights or the toy's vectors)."""

from __future__ import annotations

import numpy as np
from conftest import assert_no_exception, run_page, takeaway_text

from core import by_hand


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """(n, n) -> (n, n): each row's softmax, in float64."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def test_by_hand_takeaway_states_each_words_weight_on_itself():
    at = run_page("views/by_hand.py")
    assert_no_exception(at)
    words = ["money", "bank", "grows"]  # the page's default sentence
    x = np.array([by_hand.TOY_VECTORS[w] for w in words], dtype=np.float64)  # (n, 4)
    kept = softmax_rows(x @ x.T).diagonal()
    most, least = int(kept.argmax()), int(kept.argmin())
    said = takeaway_text(at)
    assert f"**{words[most]}** keeps {kept[most]:.3f}" in said
    assert f"**{words[least]}** only {kept[least]:.3f}" in said


def test_context_takeaway_states_the_shared_words_cosines(model):
    at = run_page("views/context.py")
    assert_no_exception(at)
    table = model.word_vectors().astype(np.float64)
    tokenizer = model.tokenizer
    outputs = []
    for words in (["money", "bank", "grows"], ["river", "bank", "flows"]):
        x = table[[tokenizer.id_of(w) for w in words]]  # (3, d_model) static rows
        outputs.append((softmax_rows(x @ x.T) @ x)[1])  # bank's row of Y
    first, second = outputs
    cosine = first @ second / np.linalg.norm(first) / np.linalg.norm(second)
    said = takeaway_text(at)
    assert "same vector in X (cosine 1.000)" in said
    assert f"their cosine is {cosine:.3f}: each has mixed in its own sentence" in said
    assert cosine < 0.9995
