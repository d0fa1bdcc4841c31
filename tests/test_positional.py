"""core.positional, core.embeddings and core.text against the formulas written out one entry at a time.

Position encodings follow "Attention is all you need" (Vaswani et al., 2017):
PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)).
PCA is checked against an SVD of the centred data; neighbours against a full sort.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from tiny_bert import cosine_loop, write_tiny_bert

import core
from core import embeddings, positional
from core.text import truncate_longest_first
from ui import positional_charts


def pe_loop(n: int, d: int) -> np.ndarray:
    out = np.zeros((n, d))
    for p in range(n):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            out[p, 2 * i], out[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return core.load_folder(write_tiny_bert(tmp_path_factory.mktemp("pos"), seed=6))


# ---- core.positional ----------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "d"), [(7, 6), (20, 16)])
def test_sinusoid_frequencies_and_wavelengths_by_formula(n, d):
    np.testing.assert_allclose(positional.sinusoidal_encoding(n, d), pe_loop(n, d), atol=1e-12)
    for i, omega in enumerate(positional.frequencies(d)):
        assert omega == pytest.approx(1 / 10000 ** (2 * i / d))
    lengths = positional.wavelengths(d)
    for t in range(d):
        assert lengths[t] == pytest.approx(2 * math.pi * 10000 ** (2 * (t // 2) / d))


def test_binary_encoding_and_bits_by_loop():
    for n in (1, 2, 5, 8, 9, 100):
        assert positional.n_bits_for(n) == max(1, len(format(n - 1, "b")))
    bits = positional.binary_encoding(11)
    signed = positional.binary_encoding(11, signed=True)
    for p in range(11):
        for j in range(bits.shape[1]):
            bit = (p // 2**j) % 2
            assert bits[p, j] == bit and signed[p, j] == (1.0 if bit else -1.0)


def test_bit_of_a_position_and_the_wavelength_ladder_by_loop():
    for j in range(4):
        assert positional.bit_of(range(11), j).tolist() == [
            float((p // 2**j) % 2) for p in range(11)
        ]
    for d in (4, 16, 128):
        step, shortest, longest = positional.wavelength_ladder(d)
        assert step == pytest.approx(10000 ** (-2 / d))  # ω_{i+1} / ω_i
        assert shortest == pytest.approx(2 * math.pi)
        assert longest == pytest.approx(2 * math.pi * 10000 ** (2 * (d // 2 - 1) / d))


def test_encodings_at_one_size_and_on_the_rows_every_code_has():
    table = np.arange(30.0).reshape(10, 3)  # a learned table of 10 rows, 3 wide
    sized = positional.encodings(6, 4, table)
    assert sized.n_positions == 6 and sized.d_model == 4
    np.testing.assert_allclose(sized.sinusoid, pe_loop(6, 4), atol=1e-12)
    np.testing.assert_array_equal(sized.learned, [[3 * p, 3 * p + 1, 3 * p + 2] for p in range(6)])
    assert sized.on_common_rows() is sized, "the table covers every position asked for"
    longer = positional.encodings(14, 4, table)
    assert len(longer.learned) == 10 and len(longer.sinusoid) == 14
    common = longer.on_common_rows()
    assert common.n_positions == 10 and common.d_model == 4
    np.testing.assert_allclose(common.sinusoid, pe_loop(10, 4), atol=1e-12)
    np.testing.assert_array_equal(common.learned, table)
    rotary = positional.encodings(14, 4, None)
    assert rotary.learned is None and rotary.on_common_rows() is rotary


def test_slow_drift_share_counts_the_dimensions_above_the_threshold():
    rng = np.random.default_rng(5)
    walks = rng.normal(size=(200, 3)).cumsum(axis=0)  # random walks: slow drift
    noise = rng.normal(size=(200, 5))  # no drift
    table = np.concatenate([walks, noise], axis=1)
    slow = 0
    for d in range(8):
        column = table[:, d]
        slow += np.corrcoef(column[:-1], column[1:])[0, 1] > positional.SLOW_DRIFT
    assert slow == 3
    assert positional.slow_drift_share(table) == pytest.approx(slow / 8)


@pytest.mark.parametrize("bit", [1, 2, 3])
def test_smooth_bit_is_above_half_exactly_where_the_bit_is_one(bit):
    positions = np.arange(64)
    curve = positional.smooth_bit(positions, bit)
    for p in positions:
        assert (curve[p] > 0.5) == bool((p // 2**bit) % 2), p
    np.testing.assert_allclose(positional.smooth_bit(positions + 2 ** (bit + 1), bit), curve)
    assert curve.max() <= 1.0 and curve.min() >= 0.0


@pytest.mark.parametrize("offset", [1, 3, 10])
def test_rotation_by_loops(offset):
    d = 8
    rotation = positional.rotation_matrix(offset, d)
    for i in range(d // 2):
        angle = offset / 10000 ** (2 * i / d)
        block = rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2]
        np.testing.assert_allclose(
            block, [[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]]
        )
    assert np.count_nonzero(rotation) == 2 * d  # nothing outside the 2 × 2 blocks
    encoding = pe_loop(12 + offset, d)
    check = positional.rotation_check(offset, d, n_positions=12)
    for p in range(12):
        rotated = [sum(rotation[r, c] * encoding[p, c] for c in range(d)) for r in range(d)]
        np.testing.assert_allclose(check.rotated[p], rotated, atol=1e-12)
        np.testing.assert_allclose(rotated, encoding[p + offset], atol=1e-9)
    np.testing.assert_allclose(check.original, encoding[:12], atol=1e-12)
    np.testing.assert_allclose(check.shifted, encoding[offset:], atol=1e-12)
    assert check.max_abs_error < 1e-9
    np.testing.assert_allclose(check.angles, check.frequencies * offset)
    row = positional.rotation_rows(check, 2, [1])[0]
    assert row["PE(p+k)"] == f"({encoding[2 + offset, 2]:+.6f}, {encoding[2 + offset, 3]:+.6f})"


def test_similarities_and_distance_profile_by_loops():
    vectors = np.random.default_rng(1).normal(size=(6, 4))
    vectors[2] = 0.0
    units = positional.unit_rows(vectors)
    dot = positional.similarity_matrix(vectors, "dot")
    cos = positional.similarity_matrix(vectors, "cosine")
    for p in range(6):
        norm = math.sqrt(sum(v * v for v in vectors[p]))
        np.testing.assert_allclose(units[p], vectors[p] / norm if norm else 0.0)
        for q in range(6):
            assert dot[p, q] == pytest.approx(sum(vectors[p] * vectors[q]))
            assert cos[p, q] == pytest.approx(cosine_loop(vectors[p], vectors[q]))
    sim = np.random.default_rng(2).random((5, 5))
    means, spreads = positional.distance_profile(sim)
    for k in range(5):
        pairs = [sim[p, p + k] for p in range(5 - k)]
        assert means[k] == pytest.approx(np.mean(pairs)) and spreads[k] == pytest.approx(
            np.std(pairs)
        )
    # R² of predicting sim[p, q] (p ≠ q) by the mean at its distance |p − q| (upper pairs only).
    values, predicted = [], []
    for p in range(5):
        for q in range(5):
            if p != q:
                values.append(sim[p, q])
                predicted.append(means[abs(p - q)])
    values, predicted = np.array(values), np.array(predicted)
    r2 = 1 - ((values - predicted) ** 2).sum() / ((values - values.mean()) ** 2).sum()
    assert positional.explained_by_distance(sim) == pytest.approx(r2)


def test_lag_one_correlations_are_pearson_of_neighbouring_positions():
    rng = np.random.default_rng(4)
    table = rng.normal(size=(12, 5)).cumsum(axis=0)  # random walks: slow drift
    table[:, 1] = rng.normal(size=12)  # noise: no drift
    table[:, 3] = 2.0  # constant: no correlation to speak of
    found = positional.lag_one_correlations(table)
    for d in (0, 1, 2, 4):
        pairs = [(table[p, d], table[p + 1, d]) for p in range(11)]
        expected = np.corrcoef(np.array(pairs).T)[0, 1]
        assert found[d] == pytest.approx(expected)
    assert found[3] == 0.0
    smooth = np.sin(np.linspace(0, 1, 50))[:, None]  # a slow curve drifts slowly
    assert positional.lag_one_correlations(smooth)[0] > positional.SLOW_DRIFT


def test_random_cosines_and_spread():
    dots = positional.random_unit_dot_products(50, n_pairs=3000, seed=1)
    assert np.all(np.abs(dots) <= 1.0) and abs(dots.mean()) < 0.01
    assert dots.var() == pytest.approx(1 / 50, rel=0.1)
    mean, var = positional.spread(np.array([1.0, 2.0, 4.0]))
    assert (mean, var) == (
        pytest.approx(7 / 3),
        pytest.approx(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 3),
    )
    identity = np.eye(5) * 3.0  # orthogonal rows: distinct rows have cosine 0
    assert np.all(positional.row_pair_cosines(identity, n_pairs=200) == 0.0)
    table = np.random.default_rng(4).normal(size=(4, 3))
    allowed = {round(cosine_loop(a, b), 9) for a in table for b in table}
    got = positional.row_pair_cosines(table, table * 2.0, n_pairs=50)
    assert {round(c, 9) for c in got} <= allowed


def test_recover_token_and_position_by_brute_force():
    rng = np.random.default_rng(5)
    words, positions = rng.normal(size=(9, 6)), rng.normal(size=(7, 6))
    ids = np.array([4, 0, 4, 8])
    got = positional.recover_token_and_position(words, positions, ids)
    for p, token in enumerate(ids):
        x = words[token] + positions[p]
        to_words = [cosine_loop(x, w) for w in words]
        to_positions = [cosine_loop(x, q) for q in positions]
        assert got.cos_token[p] == pytest.approx(to_words[token])
        assert got.cos_position[p] == pytest.approx(to_positions[p])
        assert got.token_rank[p] == 1 + sum(c > to_words[token] for c in to_words)
        assert got.position_rank[p] == 1 + sum(c > to_positions[p] for c in to_positions)
        assert got.best_other_token[p] == pytest.approx(
            max(c for r, c in enumerate(to_words) if r != token)
        )
        assert got.best_other_position[p] == pytest.approx(
            max(c for r, c in enumerate(to_positions) if r != p)
        )


def test_permutation_experiment_by_loops(tiny):
    trace = tiny.run("the river bank flows money grows")
    ids = np.array(trace.input_ids)
    order = positional.shuffle_order(len(ids), 2, None, trace.special)
    n = len(ids)
    assert order[0] == 0 and order[-1] == n - 1 and sorted(order) == list(range(n))
    assert not np.array_equal(order, np.arange(n))
    np.testing.assert_allclose(
        positional.attention_from_ids(tiny, ids), trace.attentions, atol=1e-6
    )
    for with_positions in (True, False):
        result = positional.permutation_experiment(
            tiny, trace.tokens, ids, trace.special, with_positions, seed=2
        )
        assert result.tokens == trace.tokens
        assert result.shuffled_tokens == tuple(trace.tokens[i] for i in order)
        shuffled = positional.attention_from_ids(tiny, ids[order], with_positions)
        original = positional.attention_from_ids(tiny, ids, with_positions)
        for i in range(n):  # A'[i, j] is between the tokens originally at order[i], order[j]
            for j in range(n):
                np.testing.assert_array_equal(
                    result.unshuffled[:, :, order[i], order[j]], shuffled[:, :, i, j]
                )
        for layer in range(tiny.n_layers):
            diff = np.abs(original[layer].astype(np.float64) - result.unshuffled[layer]).max()
            assert result.max_abs_diff_per_layer[layer] == pytest.approx(diff)
        assert result.head_diff(1, 0) == pytest.approx(
            np.abs(original[1, 0] - result.unshuffled[1, 0]).max()
        )
        if with_positions:
            assert result.max_abs_diff > 1e-3
        else:
            assert result.max_abs_diff < 1e-5  # without positions a shuffle only permutes attention
    capped = positional.permutation_experiment(
        tiny, trace.tokens, ids, trace.special, True, max_tokens=5
    )
    assert capped.tokens == (*trace.tokens[:4], trace.tokens[-1])


# ---- core.embeddings ---------------------------------------------------------------------------


def pca_by_svd(vectors: np.ndarray, k: int) -> np.ndarray:
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:k].T


def assert_same_up_to_sign(got: np.ndarray, expected: np.ndarray) -> None:
    for c in range(expected.shape[1]):
        sign = np.sign(got[:, c] @ expected[:, c]) or 1.0
        np.testing.assert_allclose(got[:, c] * sign, expected[:, c], atol=1e-8)


def test_pca_projections_equal_the_svd():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(9, 5)) * [5.0, 3.0, 2.0, 1.0, 0.5]
    assert_same_up_to_sign(embeddings.project(vectors, "pca", 2), pca_by_svd(vectors, 2))
    ids = np.array([3, 1, 3, 2, 1])
    rows = rng.normal(size=(5, 4))
    rows[2], rows[4] = rows[0], rows[1]  # equal ids, equal static rows
    unique = embeddings.project_unique(rows, ids)
    np.testing.assert_array_equal(unique[0], unique[2])
    assert_same_up_to_sign(unique[[1, 3, 0]], pca_by_svd(rows[[1, 3, 0]], 2))
    hidden = rng.normal(size=(3, 4, 6))
    paths = embeddings.trajectories(hidden, np.array([1, 3]))
    # by hand: unit rows, each state's mean row taken away, one plane from the SVD of the
    # followed rows (1 and 3) at every state, every row projected onto it
    directions = hidden / np.linalg.norm(hidden, axis=-1, keepdims=True)
    centred = directions - directions.mean(axis=1, keepdims=True)
    fit = np.concatenate([centred[state, [1, 3]] for state in range(3)])  # (6, 6)
    _, _, vt = np.linalg.svd(fit - fit.mean(axis=0), full_matrices=False)
    expected = [
        (centred[state, i] - fit.mean(axis=0)) @ vt[:2].T for state in range(3) for i in range(4)
    ]
    assert_same_up_to_sign(paths.reshape(12, 2), np.array(expected))
    plane = embeddings.shared_plane(hidden[0], hidden[1])
    both = pca_by_svd(np.concatenate([hidden[0], hidden[1]]), 2)
    assert_same_up_to_sign(np.concatenate([plane.coords_first, plane.coords_second]), both)
    for i in range(4):
        assert plane.cosines[i] == pytest.approx(cosine_loop(hidden[0, i], hidden[1, i]))
    assert plane.mean_cosine == pytest.approx(np.mean(plane.cosines))
    assert embeddings.project(vectors[:1], "pca").tolist() == [[0.0, 0.0]]
    assert embeddings.tsne_perplexity(10) == pytest.approx(3.0)
    assert embeddings.tsne_perplexity(1000) == embeddings.TSNE_PERPLEXITY


def test_cosine_tables_and_neighbours_by_loops():
    rng = np.random.default_rng(8)
    vectors = rng.normal(size=(4, 5))
    table = positional.similarity_matrix(vectors, "cosine")
    tables = np.stack([table, positional.similarity_matrix(vectors[::-1], "cosine")])
    for a in range(4):
        for b in range(4):
            assert table[a, b] == pytest.approx(cosine_loop(vectors[a], vectors[b]))
    off = [table[a, b] for a in range(4) for b in range(4) if a != b]
    np.testing.assert_allclose(embeddings.mean_off_diagonal(tables), [np.mean(off)] * 2)
    assert np.isnan(embeddings.mean_off_diagonal(np.ones((1, 1))))
    vocabulary = rng.normal(size=(12, 5))
    unit_table = positional.unit_rows(vocabulary)
    allowed = np.ones(12, dtype=bool)
    allowed[[2, 7]] = False
    ids, cos = embeddings.nearest_words(vectors, unit_table, k=3, allowed=allowed)
    for q in range(4):
        ranked = sorted(
            (-cosine_loop(vectors[q], vocabulary[r]), r) for r in range(12) if allowed[r]
        )
        assert ids[q].tolist() == [r for _, r in ranked[:3]]
        np.testing.assert_allclose(cos[q], [-c for c, _ in ranked[:3]])
    assert embeddings.word_mask(["[PAD]", "bank", "[unused7]", "##s", "[x"]).tolist() == [
        False,
        True,
        False,
        True,
        True,
    ]


def test_points_gathered_from_traces(tiny):
    sentences = ["the river bank flows", "money grows a bank"]
    traces = [tiny.run(s) for s in sentences]
    points = embeddings.gather_points(traces, sentences)
    expected = [
        (s, p)
        for s, t in enumerate(traces)
        for p, tok in enumerate(t.tokens)
        if tok not in ("[CLS]", "[SEP]")
    ]
    assert points.n_points == points.n_total == len(expected) == 8
    for m, (s, p) in enumerate(expected):
        assert points.tokens[m] == traces[s].tokens[p]
        assert (points.sentence[m], points.position[m]) == (s, p)
        np.testing.assert_array_equal(points.static[m], traces[s].static[p])
        np.testing.assert_array_equal(points.hidden[:, m], traces[s].hidden_states[:, p])
        assert points.token_ids[m] == traces[s].input_ids[p]
    bank = embeddings.occurrences(points, "bank")
    assert bank.tolist() == [2, 7]
    assert embeddings.pick_occurrences(points, "bank", 1).tolist() == [2]
    assert embeddings.sentence_sizes(points) == [4, 4]
    assert embeddings.word_counts(points)["bank"] == (2, 2)
    layers = embeddings.cosine_by_layer(points, bank)
    assert layers.shape == (tiny.n_layers + 2, 2, 2)
    assert layers[0, 0, 1] == pytest.approx(1.0)  # the same row of the word-piece table
    assert layers[-1, 0, 1] == pytest.approx(
        cosine_loop(points.hidden[-1, 2], points.hidden[-1, 7])
    )
    capped = embeddings.cap_points(points, np.array([7]), cap=3)
    assert capped.n_points == 3 and 7 in [i for i in range(8) if points.tokens[i] in capped.tokens]
    assert "bank" in capped.tokens and capped.n_total == 8
    sentences_in, notes = embeddings.split_sentences(
        "a\n\n b \n" + "x" * 20, max_sentences=2, max_chars=5
    )
    assert sentences_in == ["a", "b"] and len(notes) == 1


# ---- core.text ----------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, 1, 4, 7, 10, 30])
@pytest.mark.parametrize(("a", "b"), [(0, 0), (3, 12), (12, 3), (6, 6), (5, 20)])
def test_truncate_longest_first_by_brute_force(a, b, budget):
    """Pieces come off the end of the longer sentence, one at a time, until both fit; on a tie
    the sentence that was shorter (the first, if they were equal) loses one. Checked against
    transformers' own tokenizer in tests/test_parity.py."""
    keep_a, keep_b = a, b
    first_was_short = a <= b
    while keep_a + keep_b > budget:
        if keep_a > keep_b or (keep_a == keep_b and first_was_short):
            keep_a -= 1
        else:
            keep_b -= 1
    assert truncate_longest_first(list(range(a)), list(range(b)), budget) == (keep_a, keep_b)


def test_pick_occurrences_round_robin_over_sentences(tiny):
    """Rank 0 of every sentence first (so each sense is present), then rank 1, …; indices sorted."""
    sentences = ["the bank of the river the", "money grows the"]
    points = embeddings.gather_points([tiny.run(s) for s in sentences], sentences)
    the = embeddings.occurrences(points, "the")
    assert the.tolist() == [0, 3, 5, 8]  # three in sentence 0, one in sentence 1
    expected_order = [0, 8, 3, 5]  # first of each sentence, then the second of sentence 0, …
    for limit in range(1, 5):
        picked = embeddings.pick_occurrences(points, "the", limit)
        assert picked.tolist() == sorted(expected_order[:limit]), limit


def test_permutation_grid_carries_every_heads_weights_and_difference(tiny):
    """The word-order heatmaps switched in the browser: each head's store holds that head's
    put-back weights and, under its title, its own max |Δ| to the original, computed here."""
    import base64
    import html
    import json
    import re

    trace = tiny.run("the river bank flows money grows")
    ids = np.array(trace.input_ids)
    result = positional.permutation_experiment(tiny, trace.tokens, ids, trace.special, True, seed=2)
    grid = positional_charts.permutation_grid(result, True, "with positions", 1, 0, every_head=True)
    markup = grid.figure
    n_heads, n = tiny.n_heads, len(ids)
    assert f'data-every-head-of="{n_heads}"' in markup
    assert f'data-shown="{1 * n_heads + 0}"' in markup
    store_id = re.search(r'data-store="([0-9a-f]+)"', markup)[1]
    every = grid.stores()
    assert f'data-store="{store_id}"' in every  # the stores the figure names
    stores = json.loads(html.unescape(re.search(r'data-heads="([^"]*)"', every)[1]))
    original = positional.attention_from_ids(tiny, ids, True)
    for layer in range(tiny.n_layers):
        for head in range(n_heads):
            store = stores[str(layer * n_heads + head)]
            counts = np.frombuffer(base64.b64decode(store["weights"]), dtype="<u2")
            np.testing.assert_allclose(
                counts.reshape(n, n) / 10_000, result.unshuffled[layer, head], atol=1e-4
            )
            delta = np.abs(original[layer, head] - result.unshuffled[layer, head]).max()
            assert store["title"] == f"with positions: shuffled, put back (L{layer} H{head})"
            assert store["note"] == f"max |Δ| to the original: {delta:.1e}"


def test_sense_split_averages_pairs_by_sense_and_leaves_unknown_senses_out():
    # 4 occurrences: two river, one money, one of unknown sense; one stage
    table = np.array(
        [
            [1.0, 0.9, 0.5, 0.1],
            [0.9, 1.0, 0.7, 0.2],
            [0.5, 0.7, 1.0, 0.3],
            [0.1, 0.2, 0.3, 1.0],
        ]
    )[None]  # (1, 4, 4)
    split = embeddings.sense_split(table, ["river", "river", "money", None])
    np.testing.assert_allclose(split.same, [0.9])  # the one river-river pair
    np.testing.assert_allclose(split.other, [(0.5 + 0.7) / 2])  # river-money pairs
    assert split.measured
    lonely = embeddings.sense_split(table, ["river", "money", None, None])  # no same-sense pair
    assert np.isnan(lonely.same).all() and not lonely.measured


def test_the_sentences_score_terms_read_the_first_position_rows(tiny):
    """ui.positional_runs.score_terms: word row + the position row each piece is read with."""
    from ui import positional_runs

    trace = tiny.run("the cat sat on the mat")
    terms = positional_runs.score_terms(tiny, trace)
    table = tiny.position_vectors()  # (max_positions, d_model)
    n = trace.n_tokens
    assert terms.total.shape == (n, n)
    for i, j in ((0, 0), (1, n - 1), (n - 1, 2)):
        x_i, x_j = trace.static[i] + table[i], trace.static[j] + table[j]
        assert terms.total[i, j] == pytest.approx(float(x_i @ x_j), rel=1e-5)
        assert terms.position_position[i, j] == pytest.approx(float(table[i] @ table[j]), rel=1e-5)
