"""Every page's takeaway: the one sentence on its first screen states numbers computed here,
independently of the page (numpy on the model's weights or the toy's vectors)."""

from __future__ import annotations

import numpy as np
from conftest import assert_no_exception, open_tab, run_page, takeaway_text

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


def entropy_bits(weights: np.ndarray) -> np.ndarray:
    """(..., n) rows of weights -> (...,) their entropy in bits (0 log 0 = 0)."""
    return -(weights * np.log2(np.where(weights > 0, weights, 1))).sum(axis=-1)


def test_scaling_takeaways_state_the_top_weight_and_the_switched_run(model):
    from core import scaling_masking

    at = run_page("views/scaling_masking.py", text="Time flies like an arrow.")
    assert_no_exception(at)
    # tab 1 opens on 8 random scores times c = 10: the largest weight at c = 10 and at c = 1
    scores = scaling_masking.random_scores(8).astype(np.float64)
    top = {c: softmax_rows((c * scores)[None, :]).max() for c in (1, 10)}
    assert top[10] > top[1]
    said = takeaway_text(at)
    assert f"c = 10 keeps their order, yet the largest gets {top[10]:.2f}" in said
    assert f"instead of {top[1]:.2f} at c = 1: the larger the scores" in said
    # tab 3 opens with scaling off: L0 H0's mean row entropy both ways, the final vectors' cosine
    open_tab(at, "sm_section", "3 · Switches")
    assert_no_exception(at)
    runs = [model.run("Time flies like an arrow.", scale=scale) for scale in (True, False)]
    trained, unscaled = (entropy_bits(r.attentions[0, 0].astype(np.float64)).mean() for r in runs)
    final = [r.hidden_states[-1].astype(np.float64) for r in runs]  # (n, d_model) each
    cosines = (final[0] * final[1]).sum(-1) / np.linalg.norm(final[0], axis=-1)
    cosines /= np.linalg.norm(final[1], axis=-1)
    said = takeaway_text(at)
    change = "sharper" if round(unscaled, 2) < round(trained, 2) else "flatter"
    assert f"With no scaling, the rows of L0 H0 are {change} than as trained" in said
    assert f"(mean entropy {unscaled:.2f} bits against {trained:.2f})" in said
    assert f"keep a mean cosine of {cosines.mean():.3f}" in said


def test_information_flow_takeaway_states_the_pairs_cosine_before_and_after(model):
    from core import similarity

    at = run_page("views/information_flow.py", text="Time flies like an arrow.")
    assert_no_exception(at)
    _, first, second = similarity.EXAMPLE_PAIRS[0]  # the sidebar holds one sentence
    states = [model.run(s).hidden_states.astype(np.float64) for s in (first, second)]
    pooled = [h.mean(axis=1) for h in states]  # (L + 1, d_model) each
    cosines = (pooled[0] * pooled[1]).sum(-1)
    cosines /= np.linalg.norm(pooled[0], axis=-1) * np.linalg.norm(pooled[1], axis=-1)
    said = takeaway_text(at)
    assert f"the example pair have cosine {cosines[-1]:.3f} after the last layer" in said
    assert f"against {cosines[0]:.3f} for the same average taken at the embedding output" in said
    moved = "pull the two meanings together" if cosines[-1] > cosines[0] else "push them apart"
    assert f"the layers {moved.replace('them', 'the two meanings')}" in said
    texts = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert "sentence-transformers" not in texts and "test_" not in texts
    assert "no longer the example pair above" in texts  # where the page switches sentences
