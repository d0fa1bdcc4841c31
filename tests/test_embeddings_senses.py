"""Embedding projections, tabs 2 and 3: whether context sorts a word's occurrences by sense.

Each number is checked against loops written here over plain vectors, and on the page against
each example sentence run on its own through the model.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import assert_no_exception, open_tab, run_page
from shown import sent_array, shown

from core import embeddings
from ui import embeddings_charts


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _points(tokens_per_sentence: list[list[str]], n_states: int = 3, d: int = 5, seed: int = 0):
    """A PointSet of random vectors: sentence s has the given pieces."""
    rng = np.random.default_rng(seed)
    rows = [
        embeddings.TraceRows(
            tuple(tokens),
            rng.normal(size=(len(tokens), d)).astype(np.float32),
            rng.normal(size=(n_states, len(tokens), d)).astype(np.float32),
            np.arange(len(tokens)),
        )
        for tokens in tokens_per_sentence
    ]
    return embeddings.gather_points(rows, [" ".join(t) for t in tokens_per_sentence])


def test_contextual_neighbours_rank_other_sentences_tokens_by_cosine():
    points = _points([["a", "bank", "b"], ["bank", "c"], ["d", "bank", "e", "f"]])
    chosen = embeddings.occurrences(points, "bank")
    for state in range(3):
        ids, cosines = embeddings.contextual_neighbours(points, chosen, state, k=4)
        for row, i in enumerate(chosen):
            ranked = sorted(
                (-_cos(points.hidden[state, i], points.hidden[state, j]), j)
                for j in range(points.n_points)
                if points.sentence[j] != points.sentence[i]
            )
            assert ids[row].tolist() == [j for _, j in ranked[:4]]
            np.testing.assert_allclose(cosines[row], [-c for c, _ in ranked[:4]], atol=1e-6)
    # the second "bank" has only 7 tokens in other sentences: the rest is marked as none
    ids, cosines = embeddings.contextual_neighbours(points, chosen, 0, k=9)
    assert ids[1, 7:].tolist() == [-1, -1] and np.isnan(cosines[1, 7:]).all()


def test_sense_match_counts_nearest_occurrences_of_the_same_sense():
    tokens = [["bank", "x"], ["y", "bank"], ["bank"], ["bank", "z"], ["bank"]]
    senses = ["river", "money", "river", "money", None]  # the last: a sentence of the visitor's
    points = _points(tokens, n_states=4, d=6, seed=3)
    chosen = embeddings.occurrences(points, "bank")
    match = embeddings.sense_match(points, chosen, senses)
    assert match.counted == 4  # each known bank has one rival of its sense and two of the other
    assert match.chance == pytest.approx(1 / 3)
    for state in range(4):
        hits = 0
        for a in range(4):
            rivals = [b for b in range(4) if b != a]
            nearest = max(
                rivals,
                key=lambda b: _cos(
                    points.hidden[state, chosen[a]], points.hidden[state, chosen[b]]
                ),
            )
            hits += senses[nearest] == senses[a]
        assert match.matched[state] == hits, state
    alone = embeddings.sense_match(points, chosen, ["river", "river", None, None, None])
    assert not alone.measured  # no occurrence of another sense to choose instead


def test_sense_match_counts_a_tie_between_the_senses_as_no_match():
    """Where every occurrence is one vector (a model without a position table, at the embedding
    output) no sense is nearer than the other: none is matched, all are tied, whatever order the
    sentences come in. A clear winner still counts."""
    tokens = [["bank"], ["bank"], ["bank"], ["bank"]]
    senses = ["river", "money", "river", "money"]
    points = _points(tokens, n_states=2, d=4, seed=1)
    hidden = np.array(points.hidden)  # (2, 4, d)
    hidden[0] = np.float32([0.3, -1.2, 0.5, 2.0])  # state 0: four copies of one vector
    # state 1: each river bank near the other, each money bank near the other
    hidden[1] = np.float32([[1, 0, 0, 0], [0, 1, 0, 0], [0.9, 0.1, 0, 0], [0.1, 0.9, 0, 0]])
    points = dataclasses.replace(points, hidden=hidden)
    chosen = embeddings.occurrences(points, "bank")
    for order in (senses, senses[::-1]):
        match = embeddings.sense_match(points, chosen, order)
        assert match.counted == 4
        assert match.matched.tolist() == [0, 4]
        assert match.tied.tolist() == [4, 0]


def _three_paths(coords: np.ndarray):
    """The trajectory figure of pieces 1, 3 and 4 of five, over coords' states, three sentences."""
    return embeddings_charts.trajectory_figure(
        coords,
        np.array([1, 3, 4]),
        ["a", "bank", "c", "bank", "bank"],
        np.array([0, 0, 1, 1, 2]),
        ["s one", "s two", "s three"],
        background_layer=3,
        title="paths",
    )


def test_paths_read_in_order():
    """Every path's markers carry the state marks emb, 0, 1, …; in 2-D, every marker after the
    first is an arrowhead turned along the path; the markers grow towards the last state."""
    n_states, m = 4, 5
    coords = np.random.default_rng(0).normal(size=(n_states, m, 2))  # (L + 1, m, 2)
    fig = _three_paths(coords)
    paths = [t for t in fig.data if t.mode == "lines+markers+text"]
    assert [list(t.text) for t in paths] == [["emb", "0", "1", "2"]] * 3
    for trace, i in zip(paths, (1, 3, 4), strict=True):
        np.testing.assert_allclose(trace.x, coords[:, i, 0], atol=1e-3)
        assert list(trace.marker.symbol) == ["circle", "arrow", "arrow", "arrow"]
        assert trace.marker.angleref == "previous"
        assert list(trace.marker.size) == sorted(trace.marker.size)
    # three paths from one shared start (no position rows): "emb" is written there once
    shared = coords.copy()
    shared[0] = 0.0
    fig = _three_paths(shared)
    paths = [t for t in fig.data if t.mode == "lines+markers+text"]
    assert [list(t.text) for t in paths] == [
        ["emb", "0", "1", "2"],
        ["", "0", "1", "2"],
        ["", "0", "1", "2"],
    ]
    flat = embeddings_charts.trajectory_figure(
        np.zeros((n_states, m, 3)), np.array([1]), ["a"] * m, np.zeros(m, int), ["s"], 0, "t"
    )
    assert flat.data[1].marker.symbol is None  # 3-D has no arrowheads


# ---- the page, on the bundled model --------------------------------------------------------------
BANKS = (
    ("I sat on the bank of the river and watched the water.", "river"),
    ("The bank raised its interest rates again.", "money"),
    ("We pulled the canoe up onto the muddy bank.", "river"),
    ("She paid the cheque in at the bank on Monday.", "money"),
)


def _bank_states(model) -> list[np.ndarray]:
    """(L + 1, d) each example bank's hidden states, its sentence run on its own."""
    states = []
    for sentence, _ in BANKS:
        trace = model.run(sentence)
        states.append(trace.hidden_states[:, trace.tokens.index("bank")].astype(np.float64))
    return states


def _sorting_words(first: int, last: int, counted: int = 4, chance: float = 1 / 3) -> str:
    """What the page may conclude from `first` and `last` of `counted` matched: "sorts" only
    when every occurrence ends next to its own sense."""
    if first == last == counted:
        return "they were already sorted at the embedding output"
    if last > first and last == counted:
        return "context sorts the occurrences by sense"
    if last > first and last > chance * counted:
        return "context sorts some of them by sense: more than a random pick, not all"
    return "by this measure, context does not sort them by sense here"


def test_path_tab_says_how_often_the_nearest_bank_shares_its_sense(model):
    """A bank counts when a bank of its own sense is nearer than any of the other sense; an
    equal pair is a tie, no match (at the embedding output the river bank of s3 and the money
    bank of s4 sit at the same position, one vector: s1 is as near to one as to the other)."""
    states = _bank_states(model)
    senses = [sense for _, sense in BANKS]

    def nearest_of(a: int, state: int, alike: bool) -> float:
        return max(
            _cos(states[a][state], states[b][state])
            for b in range(4)
            if b != a and (senses[b] == senses[a]) == alike
        )

    def matched(state: int) -> int:
        return sum(
            nearest_of(a, state, True) - nearest_of(a, state, False) > 1e-6 for a in range(4)
        )

    tied = [a for a in range(4) if abs(nearest_of(a, 0, True) - nearest_of(a, 0, False)) <= 1e-6]
    assert tied == [0]  # s1, the one occurrence with a tie

    at = run_page("views/embeddings.py", query={"emb_section": "2 · Path"})
    assert_no_exception(at)
    first, last = matched(0), matched(model.n_layers)
    said = " ".join(m.value for m in at.markdown)
    assert (
        f"At the embedding output, {first} of 4 occurrences of 'bank' have an occurrence with "
        f"their own sense as their nearest; after layer {model.n_layers - 1}, {last} of 4 "
        "(a random pick: 33%)"
    ) in said
    assert f"(a random pick: 33%): {_sorting_words(first, last)}." in said
    assert "At the embedding output, 1 of the 4 is tied: an occurrence of the same sense" in said
    figure = next(
        json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key == "emb_sense_match"
    )
    share = sent_array(figure["data"][0]["y"])
    expected = [matched(state) / 4 for state in range(model.n_layers + 1)]
    np.testing.assert_allclose(share, expected, atol=1e-4)


def test_nearest_tab_lists_other_sentences_tokens_by_cosine(model):
    """Each bank's first neighbour after the last layer, found here among the other example
    sentences' tokens, each sentence run on its own."""
    at = run_page("views/embeddings.py")
    at.toggle(key="emb_sidebar").set_value(False)
    at.text_area(key="emb_sentences").set_value("\n".join(s for s, _ in BANKS))
    open_tab(at, "emb_section", "3 · Nearest in context")
    assert_no_exception(at)
    (table,) = [t.value for t in at.table if "occurrence" in t.value.columns]
    traces = [model.run(sentence) for sentence, _ in BANKS]
    same_sense_first = 0
    for s, trace in enumerate(traces):
        bank = trace.hidden_states[-1, trace.tokens.index("bank")]
        best = max(
            (
                (_cos(bank, other.hidden_states[-1, p]), o, other.tokens[p])
                for o, other in enumerate(traces)
                if o != s
                for p in range(other.n_tokens)
                if other.tokens[p] not in ("[CLS]", "[SEP]")
            ),
        )
        cos, o, token = best
        name = f"bank · {BANKS[o][1]} (s{o + 1})" if token == "bank" else f"{token} (s{o + 1})"
        assert shown(table["1st"][s]) == f"{name}\u00a0{cos:.2f}".replace("\u00a00.", "\u00a0.")
        same_sense_first += token == "bank" and BANKS[o][1] == BANKS[s][1]
    said = " ".join(m.value for m in at.markdown)
    assert (
        f"After layer {model.n_layers - 1}, {same_sense_first} of 4 occurrences of 'bank' with a "
        "known sense have, as their nearest token in another sentence, a 'bank' with the same sense."
    ) in said


def test_first_neighbour_shares_sense_counts_by_hand():
    tokens = [["bank", "x"], ["y", "bank"], ["bank"], ["z"]]
    points = _points(tokens, seed=5)
    chosen = embeddings.occurrences(points, "bank")  # points 0, 3, 4
    ids = np.array([[4, 1], [2, 0], [5, 0]])  # first neighbours: bank s3, y s2, z s4
    sentence_senses = ["river", "money", "river", None]
    # bank s1 -> bank s3 (river, river): yes; bank s2 -> y: not a bank; bank s3 -> z: not either
    assert embeddings.first_neighbour_shares_sense(points, chosen, ids, sentence_senses) == (1, 3)
    unknown = [None, None, None, None]
    assert embeddings.first_neighbour_shares_sense(points, chosen, ids, unknown) == (0, 0)
