"""core.positional, core.embeddings, their figures, and the two pages that show them."""

from __future__ import annotations

import json
import math
import re
from urllib.parse import quote

import conftest
import numpy as np
import pytest
from conftest import BAD_INPUTS, assert_no_exception, drawn_figures, each_tab, run_page
from hypothesis import given, settings
from hypothesis import strategies as st
from shown import bar_series, html_figures, shown

from core import embeddings, positional
from ui import display_policy, embeddings_charts, positional_charts

# ---- sinusoidal encoding -----------------------------------------------------------------------


def test_sinusoid_values_at_known_positions():
    encoding = positional.sinusoidal_encoding(12, 4)
    # position 0: every sine is 0 and every cosine is 1
    np.testing.assert_allclose(encoding[0], [0.0, 1.0, 0.0, 1.0], atol=1e-15)
    # d_model = 4: ω_0 = 1, ω_1 = 10000^(-2/4) = 0.01
    np.testing.assert_allclose(encoding[1, :2], [math.sin(1.0), math.cos(1.0)], atol=1e-15)
    np.testing.assert_allclose(
        encoding[10], [math.sin(10), math.cos(10), math.sin(0.1), math.cos(0.1)]
    )
    np.testing.assert_allclose(positional.frequencies(4), [1.0, 0.01])
    np.testing.assert_allclose(positional.wavelengths(4), [2 * math.pi] * 2 + [200 * math.pi] * 2)


def test_sinusoid_rejects_odd_width():
    with pytest.raises(ValueError):
        positional.sinusoidal_encoding(4, 7)


@settings(max_examples=40, deadline=None)
@given(
    offset=st.integers(0, 300),
    half_width=st.integers(1, 128),
    n_positions=st.integers(1, 200),
)
def test_shift_is_one_rotation_for_every_position(offset, half_width, n_positions):
    check = positional.rotation_check(offset, 2 * half_width, n_positions)
    assert check.max_abs_error < 1e-6
    np.testing.assert_allclose(check.rotated, check.shifted, atol=1e-6)
    # R_k is a rotation: orthogonal, determinant 1
    rotation = check.rotation
    np.testing.assert_allclose(rotation @ rotation.T, np.eye(2 * half_width), atol=1e-12)


def test_rotations_compose():
    r3, r4, r7 = (positional.rotation_matrix(k, 16) for k in (3, 4, 7))
    np.testing.assert_allclose(r3 @ r4, r7, atol=1e-12)


def test_rotation_rows_show_the_numbers():
    check = positional.rotation_check(5, 8, 20)
    rows = positional.rotation_rows(check, 3, [0, 3])
    assert rows[0]["R_k·PE(p)"] == rows[0]["PE(p+k)"]
    assert rows[0]["PE(p)"] == f"({math.sin(3):+.6f}, {math.cos(3):+.6f})"


# ---- binary encoding ---------------------------------------------------------------------------


def test_binary_encoding_of_known_positions():
    bits = positional.binary_encoding(16, 4)
    np.testing.assert_array_equal(bits[0], [0, 0, 0, 0])
    np.testing.assert_array_equal(bits[5], [1, 0, 1, 0])  # 5 = 1 + 4, lowest bit first
    np.testing.assert_array_equal(bits[8], [0, 0, 0, 1])
    np.testing.assert_array_equal(bits[15], [1, 1, 1, 1])
    np.testing.assert_array_equal(positional.binary_encoding(16, 4, signed=True)[5], [1, -1, 1, -1])
    assert [positional.n_bits_for(n) for n in (1, 2, 3, 100, 512)] == [1, 1, 2, 7, 9]


def test_smooth_bit_has_the_period_and_phase_of_the_bit():
    positions = np.arange(256)
    bits = positional.binary_encoding(256, 8)
    for bit in range(8):
        np.testing.assert_array_equal(np.round(positional.smooth_bit(positions, bit)), bits[:, bit])


# ---- similarity --------------------------------------------------------------------------------


def test_sinusoid_similarity_depends_on_distance_only():
    similarity = positional.similarity_matrix(positional.sinusoidal_encoding(64, 32), "dot")
    assert positional.explained_by_distance(similarity) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(np.diag(similarity), 16.0)  # d/2 pairs of sin² + cos²
    cosine = positional.similarity_matrix(positional.sinusoidal_encoding(64, 32), "cosine")
    np.testing.assert_allclose(np.diag(cosine), 1.0)
    means, spreads = positional.distance_profile(similarity)
    assert means[0] == pytest.approx(16.0) and spreads.max() < 1e-9


def test_random_similarity_is_not_explained_by_distance():
    noise = np.random.default_rng(1).standard_normal((64, 32))
    assert positional.explained_by_distance(positional.similarity_matrix(noise, "cosine")) < 0.3


# ---- near-orthogonality ------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [8, 64, 384, 1024])
def test_random_unit_dot_products_have_variance_one_over_n(dim):
    dots = positional.random_unit_dot_products(dim, n_pairs=8_000, seed=dim)
    mean, variance = positional.spread(dots)
    # the sample variance of 8,000 near-Gaussian values is off by ~1.6 % (√(2/N)): allow 5x that
    assert variance == pytest.approx(1 / dim, rel=0.08)
    assert abs(mean) < 4 * math.sqrt(variance / len(dots))


def test_real_token_and_position_rows_are_nearly_perpendicular(model):
    cosines = positional.row_pair_cosines(model.word_vectors(), model.position_vectors())
    mean, variance = positional.spread(cosines)
    assert abs(mean) < 0.1 and variance < 5 / model.d_model
    same_table = positional.row_pair_cosines(model.position_vectors(), n_pairs=500)
    assert np.all(same_table < 1.0 - 1e-6), "a row must never be paired with itself"


def test_token_and_position_are_recoverable_after_adding(model):
    ids = model.encode("the bank of the river flooded the old town").input_ids
    recovery = positional.recover_token_and_position(
        model.word_vectors(), model.position_vectors(), ids
    )
    np.testing.assert_array_equal(recovery.token_rank, 1)
    assert np.all(recovery.cos_token > recovery.best_other_token)
    rng = np.random.default_rng(0)  # random tables in 512 dimensions: both parts come back too
    words, places = rng.standard_normal((1000, 512)), rng.standard_normal((64, 512))
    recovery = positional.recover_token_and_position(words, places, rng.integers(0, 1000, 40))
    np.testing.assert_array_equal(recovery.token_rank, 1)
    np.testing.assert_array_equal(recovery.position_rank, 1)


# ---- the permutation experiment ----------------------------------------------------------------


def test_shuffle_keeps_the_special_pieces_and_moves_the_rest():
    for n in (3, 4, 5, 20):
        ends = np.isin(np.arange(n), [0, n - 1])  # [CLS] … [SEP]
        order = positional.shuffle_order(n, 0, None, ends)
        assert order[0] == 0 and order[-1] == n - 1
        assert sorted(order) == list(range(n))
        if n >= 4:
            assert not np.array_equal(order, np.arange(n))
    # GPT-2 adds no piece: the first and last word pieces move like the others (some seed moves
    # each), and a leading <s> alone stays
    plain = [positional.shuffle_order(6, seed, None, np.zeros(6, bool)) for seed in range(10)]
    assert any(order[0] != 0 for order in plain) and any(order[-1] != 5 for order in plain)
    leading = np.isin(np.arange(6), [0])
    llama = [positional.shuffle_order(6, seed, None, leading) for seed in range(10)]
    assert all(order[0] == 0 for order in llama) and any(order[-1] != 5 for order in llama)


def test_without_positions_a_shuffle_only_permutes_attention(model):
    encoded = model.encode("the quick brown fox jumps over the lazy dog by the river")
    off = positional.permutation_experiment(
        model, encoded.tokens, encoded.input_ids, encoded.special, positions=False
    )
    assert off.max_abs_diff < 1e-5, off.max_abs_diff_per_layer
    assert len(off.max_abs_diff_per_layer) == model.n_layers
    on = positional.permutation_experiment(
        model, encoded.tokens, encoded.input_ids, encoded.special, positions=True
    )
    assert on.max_abs_diff > 1e-2, on.max_abs_diff_per_layer
    assert on.shuffled_tokens[0] == "[CLS]" and on.shuffled_tokens[-1] == "[SEP]"
    assert sorted(on.shuffled_tokens) == sorted(on.tokens)


def test_permutation_experiment_caps_long_inputs(model):
    encoded = model.encode("word " * 600)
    result = positional.permutation_experiment(
        model, encoded.tokens, encoded.input_ids, encoded.special, positions=False, max_tokens=20
    )
    assert len(result.tokens) == 20 and result.tokens[-1] == "[SEP]"
    assert result.original.shape[-1] == 20


# ---- geometry ----------------------------------------------------------------------------------


def test_pca_of_a_flat_point_set_keeps_its_distances():
    rng = np.random.default_rng(0)
    flat = rng.standard_normal((30, 2)) * [5.0, 1.0]  # a plane with a known long axis
    basis = np.linalg.qr(rng.standard_normal((6, 2)))[0].T  # (2, 6) orthonormal rows
    points = flat @ basis + 3.0  # the plane placed inside 6 dimensions, shifted
    coords = embeddings.project(points, "pca", 2)

    def distances(x):
        return np.linalg.norm(x[:, None] - x[None, :], axis=-1)

    np.testing.assert_allclose(distances(coords), distances(flat), atol=1e-9)
    assert coords[:, 0].var() > coords[:, 1].var()  # the first axis is the long one


def test_pca_of_points_on_a_line():
    t = np.linspace(-2, 2, 9)
    direction = np.array([3.0, 4.0, 0.0]) / 5.0
    coords = embeddings.project(t[:, None] * direction, "pca", 2)
    np.testing.assert_allclose(np.abs(coords[:, 0]), np.abs(t), atol=1e-9)
    np.testing.assert_allclose(coords[:, 1], 0.0, atol=1e-9)


@pytest.mark.parametrize("m", [0, 1, 2, 3, 5, 40])
@pytest.mark.parametrize("method", ["pca", "tsne"])
def test_projection_of_few_points_never_fails(m, method):
    vectors = np.random.default_rng(m).standard_normal((m, 16))
    for n_components in (2, 3):
        coords = embeddings.project(vectors, method, n_components)
        assert coords.shape == (m, n_components) and np.all(np.isfinite(coords))
    assert embeddings.tsne_perplexity(m) < max(m, 2)


def test_equal_static_vectors_project_to_one_point():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((10, 8))
    ids = np.array([1, 4, 1, 7, 4, 2, 1, 9])
    for method in ("pca", "tsne"):
        coords = embeddings.project_unique(table[ids], ids, method)
        np.testing.assert_array_equal(coords[0], coords[2])
        np.testing.assert_array_equal(coords[0], coords[6])
        assert not np.array_equal(coords[0], coords[1])


def test_trajectories_share_one_plane():
    rng = np.random.default_rng(0)
    hidden = np.repeat(rng.standard_normal((1, 12, 10)), 4, axis=0)  # the same vectors at 4 stages
    coords = embeddings.trajectories(hidden, np.array([0, 5]), 2)
    assert coords.shape == (4, 12, 2)
    np.testing.assert_allclose(coords[0], coords[3], atol=1e-12)


def test_nearest_vocabulary_words_start_with_the_word_itself(model):
    unit_table = positional.unit_rows(model.word_vectors()).astype(np.float32)
    for word in ("bank", "river", "monitor", "the"):
        row = model.tokenizer.id_of(word)
        ids, cosines = embeddings.nearest_words(model.word_vectors()[row], unit_table, k=5)
        assert ids[0, 0] == row, [model.tokenizer.token_of(i) for i in ids[0]]
        assert cosines[0, 0] == pytest.approx(1.0, abs=1e-5)
        assert np.all(np.diff(cosines[0]) <= 0)


def test_nearest_words_respect_the_allowed_mask():
    table = positional.unit_rows(np.eye(4)[[0, 1, 2, 3, 0]] + 0.01)
    ids, _ = embeddings.nearest_words(table[0], table, k=2, allowed=np.array([0, 1, 1, 1, 1], bool))
    assert 0 not in ids[0] and ids[0, 0] == 4
    assert embeddings.word_mask(["[PAD]", "bank", "[unused3]", "[", "##s"]).tolist() == [
        False,
        True,
        False,
        True,
        True,
    ]


def _points(model, sentences):
    return embeddings.gather_points([model.run(s) for s in sentences], sentences)


def test_points_cosines_and_capping(model):
    sentences = ["the bank of the river", "the bank lends money", "a bank"]
    points = _points(model, sentences)
    assert "[CLS]" not in points.tokens and points.n_points == 12  # "lends" = lend ##s
    chosen = embeddings.occurrences(points, "bank")
    assert len(chosen) == 3
    tables = embeddings.cosine_by_layer(points, chosen)
    assert tables.shape == (model.n_layers + 2, 3, 3)
    np.testing.assert_allclose(tables[0], 1.0, atol=1e-6)  # one static vector for every "bank"
    assert embeddings.mean_off_diagonal(tables)[-1] < 0.99  # context pulled them apart
    capped = embeddings.cap_points(points, chosen, cap=5)
    assert capped.n_points == 5 and capped.n_total == 12
    assert len(embeddings.occurrences(capped, "bank")) == 3
    assert embeddings.word_counts(points)["bank"] == (3, 3)
    np.testing.assert_array_equal(embeddings.pick_occurrences(points, "bank", 2), chosen[:2])
    np.testing.assert_array_equal(embeddings.pick_occurrences(points, "the", 2), [0, 5])


def test_split_sentences_caps_lines_and_length():
    text = "\n".join(["one"] * 20 + [""] * 3)
    sentences, notes = embeddings.split_sentences(text, max_sentences=5)
    assert sentences == ["one"] * 5 and notes
    sentences, notes = embeddings.split_sentences("x" * 50, max_chars=10)
    assert sentences == ["x" * 10] and notes
    assert embeddings.split_sentences(" \n\t\n") == ([], [])


def test_shared_plane_of_identical_vectors():
    vectors = np.random.default_rng(0).standard_normal((7, 12))
    comparison = embeddings.shared_plane(vectors, vectors)
    np.testing.assert_allclose(comparison.coords_first, comparison.coords_second)
    assert comparison.mean_cosine == pytest.approx(1.0)


# ---- figures -----------------------------------------------------------------------------------


def test_projection_figure_escapes_user_text():
    coords = np.zeros((2, 2))
    fig = embeddings_charts.projection_figure(
        coords, ["<b>x", "ok"], np.array([0, 0]), ["<script>alert(1)</script>"], np.array([0]), "t"
    )
    spec = fig.to_json()
    assert "<script>" not in spec and "<b>x" not in spec.replace("\\u003c", "<")
    ours = ("<b>", "</b>", "<br>")  # the figure's own markup around the escaped text
    hovers = [h for trace in fig.data for h in trace.hovertext]
    for tag in ours:
        hovers = [h.replace(tag, "|") for h in hovers]
    # the followed token's hover: the token as text, then its group (no sense known: "s1")
    assert "|<b>x| · s1|" in [shown(h).split("s1 · <script>")[0] for h in hovers]
    assert all(shown(h).endswith("s1 · <script>alert(1)</script>") for h in hovers)
    assert "<script>" not in fig.to_json()


def test_position_heatmap_thins_long_inputs():
    fig = positional_charts.position_heatmap(positional.sinusoidal_encoding(512, 64), "t")
    assert len(fig.data[0].y) <= display_policy.HEATMAP_AXIS_UP_TO
    assert fig.data[0].y[0] == 0


# ---- pages -------------------------------------------------------------------------------------


# Every figure of the page, by the tab that draws it (views/positional.py, SECTIONS).
POSITIONAL_FIGURES = {
    "1 · Sinusoid": {"pos_sinusoid", "pos_curves"},
    "2 · Binary": {"pos_binary", "pos_bitcurve"},
    "3 · Learned": {"pos_learned", "pos_sinusoid_same"},
    "4 · Near positions": {
        "pos_sim_sinusoidal",
        "pos_sim_binary (±1 bits)",
        "pos_sim_learned",
        "pos_profile",
    },
    "5 · Rotation": {"pos_pair_sine and cosine", "pos_pair_sines only"},
    "6 · Adding": {"pos_random", "pos_real"},
    "7 · Word order": {
        "pos_perm_layers",
        *(
            f"pos_perm_{label}_{what}"
            for label in ("positions removed", "with positions")
            for what in ("original", "shuffled, put back")
        ),
    },
}


def open_tab(at, label: str):
    """The positional page rerun with one tab open, as a click on it does."""
    return conftest.open_tab(at, "pos_section", label)


def test_positional_page_draws_one_tab_at_a_time():
    at = run_page("views/positional.py", text="The cat sat on the mat by the door.")
    assert_no_exception(at)
    assert [tab.label for tab in at.tabs] == list(POSITIONAL_FIGURES)
    for label, figures in POSITIONAL_FIGURES.items():
        open_tab(at, label)
        assert_no_exception(at)
        # this tab's figures and no other tab's: a closed tab sends nothing to the browser
        assert drawn_figures(at) == figures, label
        if label == "4 · Near positions":
            assert at.metric[0].value == "1.00"  # the sinusoid: a function of distance alone
        if label == "7 · Word order":  # HTML figures: the tab loads no plotly.js
            assert not at.get("plotly_chart")
            # the put-back heatmaps give the head's max |Δ| under their title
            deltas = {
                name: float(re.search(r"max \|Δ\| to the original: ([0-9.e+-]+)", fig["note"])[1])
                for name, fig in html_figures(at).items()
                if "put back" in name
            }
            assert deltas["pos_perm_positions removed_shuffled, put back"] < 1e-4  # a bag of words
            assert deltas["pos_perm_with positions_shuffled, put back"] > 1e-2
            # and the bars per layer say the same, on a log scale: ~1e-7 against ~0.1 or more
            bars = bar_series(html_figures(at)["pos_perm_layers"])
            assert bars["positions removed"].max() < 1e-4 < 1e-2 < bars["with positions"].min()
    # each encoding tab draws the two sliders that size it, and they keep their place from tab
    # to tab: set in tab 1, tab 5 follows; the sentence tabs have none
    open_tab(at, "1 · Sinusoid")
    at.slider(key="pos_length").set_value(40).run()
    open_tab(at, "7 · Word order")
    assert "pos_length" not in {slider.key for slider in at.slider}
    open_tab(at, "5 · Rotation")
    assert at.slider(key="pos_length").value == 40
    assert "p = 0 … 39" in " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("name", ["empty", "html", "ten_thousand"])
def test_positional_page_bad_input(name):
    at = run_page("views/positional.py", text=BAD_INPUTS[name])
    assert_no_exception(at)
    for label in ("6 · Adding", "7 · Word order"):  # the tabs that read the sidebar sentence
        open_tab(at, label)
        assert_no_exception(at)
        if name == "empty":
            assert any("empty" in info.value for info in at.info)
        if name == "ten_thousand":  # cut to 512 word pieces, and said so above the tabs
            assert "512" in " ".join(c.value for c in [*at.caption, *at.info, *at.warning])


# Every figure of Embedding projections, by the tab that draws it (views/embeddings.py, SECTIONS);
# the split by sense is the page's payoff, above the tabs, so every tab sends it.
PAYOFF = {"emb_senses", "emb_sense_match"}
EMBEDDING_FIGURES = {
    "1 · Before and after": {*PAYOFF, "emb_static", "emb_context"},
    "2 · Path": {*PAYOFF, "emb_paths"},
    "3 · Nearest in context": PAYOFF,  # and a table
    "4 · Occurrences": {*PAYOFF, "emb_cosine", "emb_cos_lines"},
    "5 · √d_k switch": {*PAYOFF, "emb_compare_fig"},  # the comparison, switched on from the start
}


def open_embedding_tab(at, label: str):
    return conftest.open_tab(at, "emb_section", label)


def test_embeddings_page_draws_one_tab_at_a_time():
    at = run_page("views/embeddings.py")
    assert_no_exception(at)
    conftest.assert_each_tab_draws(at, "views/embeddings.py", EMBEDDING_FIGURES)


def test_embeddings_page_labels_bank_by_sense_and_measures_the_split(model):
    """The followed word's stars are one trace per sense, named and labelled by it (river,
    money); the split's bars are the mean cosines of same-sense and cross-sense pairs of
    occurrences, computed here from each example sentence run on its own."""
    at = run_page("views/embeddings.py")
    assert_no_exception(at)
    assert at.selectbox(key="emb_word").value == "bank"
    context = next(
        json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key == "emb_context"
    )
    stars = {t["name"]: t for t in context["data"] if t.get("mode") == "markers+text"}
    assert set(stars) == {"bank · river", "bank · money"}
    for name, trace in stars.items():  # one label per sense, on its first point
        assert [shown(label) for label in trace["text"]] == [name.split(" · ")[1], ""]
    assert [t["name"] for t in context["data"]][0] == "other tokens"  # one grey trace, first
    # the static table: every bank one point, its word written once
    static = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key == "emb_static")
    texts = [
        label for t in static["data"] if t.get("mode") == "markers+text" for label in t["text"]
    ]
    assert sorted(texts) == ["", "", "", "bank"]

    senses = {"river": [], "money": []}
    for sentence, sense in (
        ("I sat on the bank of the river and watched the water.", "river"),
        ("The bank raised its interest rates again.", "money"),
        ("We pulled the canoe up onto the muddy bank.", "river"),
        ("She paid the cheque in at the bank on Monday.", "money"),
    ):
        trace = model.run(sentence)
        senses[sense].append(trace.hidden_states[:, trace.tokens.index("bank")].astype(np.float64))
    unit = {
        k: [v / np.linalg.norm(v, axis=-1, keepdims=True) for v in vs] for k, vs in senses.items()
    }
    pairs_alike = [unit["river"], unit["money"]]  # each: the two occurrences of one sense
    same = np.mean([(first * second).sum(-1) for first, second in pairs_alike], axis=0)
    other = np.mean([(a * b).sum(-1) for a in unit["river"] for b in unit["money"]], axis=0)
    bars = bar_series(html_figures(at)["emb_senses"])
    np.testing.assert_allclose(bars["same sense"], [1.0, *same], atol=6e-4)
    np.testing.assert_allclose(bars["other sense"], [1.0, *other], atol=6e-4)
    assert same[-1] > other[-1]  # after the last layer the senses have split
    # the verdict is read from each bank's nearest other bank, not from the two means
    banks = [(vector, sense) for sense, vectors in unit.items() for vector in vectors]

    last = 0  # banks whose nearest other bank after the last layer has their sense
    for a, (vector, sense) in enumerate(banks):
        rivals = [b for b in range(len(banks)) if b != a]
        nearest = max(rivals, key=lambda b: float(vector[-1] @ banks[b][0][-1]))
        last += banks[nearest][1] == sense
    assert last == 4  # measured: every one
    said = conftest.takeaway_text(at)  # the page's first sentence states the last state's split
    assert f"same sense have a mean cosine of {same[-1]:.3f}" in said
    assert (
        f"different senses {other[-1]:.3f}, and for 4 of 4 the nearest other 'bank' has its own "
        "sense (a random pick: 33%): context sorts the occurrences by sense." in said
    )


def test_sentence_table_numbers_the_sentences_their_senses_and_pieces():
    """The sentences' table, in the fold above the figures (sent with the page, a static
    table): number, sentence, the sense the page wrote it for ("—" for the visitor's own), and
    its word pieces without [CLS] and [SEP], counted by transformers' tokenizer."""
    from transformers import AutoTokenizer

    import core

    lines = ["The river bank flooded.", "She paid the cheque in at the bank on Monday."]
    at = run_page("views/embeddings.py")
    at.toggle(key="emb_sidebar").set_value(False)
    at.text_area(key="emb_sentences").set_value("\n".join(lines)).run()
    assert_no_exception(at)
    (table,) = [t.value for t in at.table if "word pieces" in t.value.columns]
    hf = AutoTokenizer.from_pretrained(str(core.load_model().model_dir))
    assert list(table["#"]) == ["s1", "s2"]
    assert [shown(sentence) for sentence in table["sentence"]] == lines
    assert list(table["sense"]) == ["—", "money"]
    assert [int(k) for k in table["word pieces"]] == [len(hf.tokenize(line)) for line in lines]
    assert not at.dataframe  # no scrolling grid's script for a folded detail


def test_embeddings_page_options():
    at = run_page("views/embeddings.py", query={"emb_section": "5 · √d_k switch"})
    at.radio(key="emb_method").set_value("t-SNE")
    at.radio(key="emb_view").set_value("3D")
    assert at.toggle(key="emb_compare").value is True  # the section opens on its comparison
    at.selectbox(key="emb_word").set_value("monitor")
    at.run()
    assert_no_exception(at)
    assert {chart.key for chart in at.get("plotly_chart")} == {"emb_compare_fig"}
    assert any("mean cosine" in m.label for m in at.metric)
    assert len(open_embedding_tab(at, "1 · Before and after").get("plotly_chart")) == 2  # t-SNE
    assert_no_exception(at)


@pytest.mark.parametrize("name", ["empty", "control", "html", "emoji_cjk_rtl", "ten_thousand"])
def test_embeddings_page_bad_input(name):
    at = run_page("views/embeddings.py")
    at.toggle(key="emb_sidebar").set_value(False)
    at.text_area(key="emb_sentences").set_value(BAD_INPUTS[name])
    at.run()
    assert_no_exception(at)
    if name in ("empty", "control"):
        assert at.info, "an unusable input must get a message"
    for opened in each_tab(at, "views/embeddings.py"):  # every section meets the sentences
        assert_no_exception(opened)
    conftest.open_tab(at, "emb_section", "1 · Before and after")
    if name == "ten_thousand":  # cut to 512 word pieces, and said so
        assert "512" in " ".join(c.value for c in at.caption)


def test_embeddings_page_shows_a_markup_word_piece_as_text():
    # "<" is its own word piece and the most frequent one here, so it is the piece followed.
    at = run_page("views/embeddings.py")
    at.toggle(key="emb_sidebar").set_value(False)
    at.text_area(key="emb_sentences").set_value("a < b < c\nd < e\n< f")
    at.run()
    assert_no_exception(at)
    assert at.selectbox(key="emb_word").value == "<"
    followed, specs = [], []
    for label in conftest.section_labels("views/embeddings.py"):
        open_embedding_tab(at, label)
        assert_no_exception(at)
        texts = [*(h.value for h in at.subheader), *(m.value for m in at.markdown)]
        followed += [t for t in texts if "occurrences of" in t or "path of" in t]
        specs += [json.loads(spec.proto.spec) for spec in at.get("plotly_chart")]
    assert len(followed) == 2 and all(shown(t).count("'<'") == 1 for t in followed)
    for spec in specs:
        shown(spec["layout"].get("title", {}).get("text", ""))  # no raw "<" in any title
    (lines,) = [  # tab 4's cosine lines
        spec["data"] for spec in specs if spec["layout"]["title"]["text"] == "Before → after"
    ]
    assert [shown(trace["name"]) for trace in lines] == ["mean over pairs of '<'"]


def test_embeddings_page_samples_long_inputs():
    at = run_page("views/embeddings.py")
    at.text_area(key="emb_sentences").set_value("the bank " * 600 + "\n" + "a river bank " * 400)
    at.run()
    assert_no_exception(at)
    captions = " ".join(c.value for c in at.caption)
    assert "sample" in captions and "followed" in captions
    static = at.get("plotly_chart")[0].proto.spec
    assert static.count('"hovertext"') >= 1 and len(static) < 2_000_000


# ---- a real browser ----------------------------------------------------------------------------


@pytest.mark.browser
def test_both_pages_in_a_browser(server, browser):
    from tests.support.browser import page_exceptions, wait_for_app

    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 1800})
    # the positional tab with four figures and the embeddings tab with two, opened from links
    for path, figures, asks in (
        (f"positional?pos_section={quote('4 · Near positions')}", 4, True),
        (f"embeddings?emb_section={quote('4 · Occurrences')}", 2, False),
    ):
        page.goto(f"{url}/{path}")
        wait_for_app(page)
        if asks:  # the tab's question folds its four figures until answered: skip it
            page.get_by_role("button", name="Show me").click(timeout=60_000)
        page.wait_for_selector(".js-plotly-plot", timeout=60_000)
        # Figures mount one by one once plotly.js has loaded: wait for four, not a fixed time.
        page.wait_for_function(
            f"() => document.querySelectorAll('.js-plotly-plot').length >= {figures}",
            timeout=60_000,
        )
        assert not page_exceptions(page), path
