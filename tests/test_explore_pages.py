"""The BERT explorer: head statistics, head-view lines, explorer figures, exports, both pages."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
from conftest import BAD_INPUTS, assert_no_exception, run_page
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image
from shown import (
    STORES_ELEMENT,
    bar_series,
    html_figures,
    model_view_tiles,
    sent_array,
    sent_figures,
    shown,
)
from test_html_heatmap import viridis

from core import head_stats
from ui import exports, head_view_charts, heatmaps_charts

HEATMAPS = "views/heatmaps.py"
HEAD_VIEW = "views/head_view.py"
TOKENS = ["[CLS]", "the", "bank", "of", "river", "[SEP]"]
PAIR_SEGMENTS = np.array([0, 0, 0, 0, 1, 1, 1])  # [CLS] a b [SEP] c d [SEP]


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (rows sum to 1)."""
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def random_attention(n_layers: int, n_heads: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return softmax_rows(rng.normal(scale=2.0, size=(n_layers, n_heads, n, n))).astype(np.float32)


# ---- statistics ------------------------------------------------------------------------------
def test_head_that_always_reads_sep_is_a_sink_and_uniform_head_is_not():
    n = len(TOKENS)
    on_sep = np.zeros((n, n))
    on_sep[:, TOKENS.index("[SEP]")] = 1.0  # every query puts all weight on [SEP]
    uniform = np.full((n, n), 1.0 / n)
    weights = np.stack([on_sep, uniform])[None]  # (1, 2, n, n)

    stats = head_stats.head_statistics(weights, TOKENS)

    assert stats.sink.tolist() == [[True, False]]
    np.testing.assert_allclose(stats.on_sep[0], [1.0, 1.0 / n])
    np.testing.assert_allclose(stats.on_cls[0], [0.0, 1.0 / n])
    np.testing.assert_allclose(stats.entropy[0], [0.0, np.log2(n)])


def test_self_previous_and_next_shares_of_shifted_identities():
    n = len(TOKENS)
    previous = np.eye(n, k=-1)  # row i reads key i-1
    previous[0, 0] = 1.0  # the first row has no previous token: it reads itself
    following = np.eye(n, k=1)
    following[-1, -1] = 1.0
    weights = np.stack([np.eye(n), previous, following])[None]  # (1, 3, n, n)

    stats = head_stats.head_statistics(weights, TOKENS)

    # the rows that count are real word pieces beside real word pieces: of the 4 real pieces
    # none of the shifted heads reads itself, and each neighbour pair is read exactly
    np.testing.assert_allclose(stats.on_self[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(stats.on_previous[0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(stats.on_next[0], [0.0, 0.0, 1.0])
    # one layer of three heads: the previous-token head is head 1, the next-token head head 2
    assert stats.top_head("on_previous") == (0, 1) and stats.top_head("on_next") == (0, 2)
    assert stats.mean_over_heads("on_previous") == pytest.approx(1.0 / 3)
    two_layers = head_stats.head_statistics(np.concatenate([weights[:, ::-1], weights]), TOKENS)
    assert two_layers.top_head("on_next") == (0, 0)  # layer 0 holds it first, reversed
    assert two_layers.top_head("on_self") == (0, 2)


def test_statistics_of_a_trace_match_its_array(model):
    trace = model.run("The bank raised its rates.")
    from_trace = head_stats.head_statistics(trace)
    from_array = head_stats.head_statistics(trace.attentions, trace.tokens)
    np.testing.assert_array_equal(from_trace.entropy, from_array.entropy)
    table = from_trace.table()
    assert len(table["layer"]) == model.n_layers * model.n_heads
    assert set(table) >= {"head", "sink head", *head_stats.STAT_LABELS.values()}


def test_statistics_reject_mismatched_tokens():
    with pytest.raises(ValueError, match="one token per row"):
        head_stats.head_statistics(random_attention(1, 1, 4), TOKENS)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (2, 3, len(TOKENS), len(TOKENS)), elements=st.floats(-6, 6)))
def test_without_specials_rows_sum_to_one_over_the_rest(scores):
    weights = softmax_rows(scores)
    special = head_stats.special_mask(TOKENS)

    renormalised = head_stats.without_specials(weights, TOKENS).astype(np.float64)

    assert np.all(renormalised[..., special] == 0.0)
    np.testing.assert_allclose(renormalised.sum(axis=-1), 1.0, atol=1e-5)
    # The ordinary keys keep their proportions: α'_ij / α'_ik = α_ij / α_ik.
    rest = weights[..., ~special]
    np.testing.assert_allclose(
        renormalised[..., ~special], rest / rest.sum(axis=-1, keepdims=True), rtol=1e-4
    )


def test_row_with_all_weight_on_specials_becomes_zero():
    n = len(TOKENS)
    weights = np.zeros((n, n), dtype=np.float32)
    weights[:, 0] = 0.5  # [CLS]
    weights[:, -1] = 0.5  # [SEP]
    weights[2] = np.eye(n)[3]  # only row 2 reads an ordinary token
    renormalised = head_stats.without_specials(weights, TOKENS)
    expected = np.zeros((n, n), dtype=np.float32)
    expected[2, 3] = 1.0
    np.testing.assert_array_equal(renormalised, expected)


# ---- thumbnails ------------------------------------------------------------------------------
def test_block_mean_pool_keeps_small_inputs_and_averages_blocks():
    small = random_attention(2, 2, 10)
    np.testing.assert_array_equal(head_stats.block_mean_pool(small, 48), small)

    matrix = np.arange(100, dtype=np.float64).reshape(10, 10)
    pooled = head_stats.block_mean_pool(matrix, 4)  # blocks of 3: [0:3] [3:6] [6:9] [9:10]
    assert pooled.shape == (4, 4)
    np.testing.assert_allclose(pooled[0, 0], matrix[:3, :3].mean())
    np.testing.assert_allclose(pooled[3, 1], matrix[9:, 3:6].mean())  # the short last block


def test_thumbnails_of_a_512_token_input_are_downsampled(model):
    trace = model.run(" ".join(["the bank of the river"] * 150))
    assert trace.n_tokens == 512
    thumbs = head_stats.thumbnails(trace)
    assert thumbs.shape[:2] == (model.n_layers, model.n_heads)
    assert thumbs.shape[-1] <= head_stats.THUMBNAIL_SIDE
    assert thumbs.size < 0.02 * trace.attentions.size  # 50 times fewer values than L·H·n²


def test_model_view_is_each_heads_own_image_on_one_colour_scale():
    """Every head one tile, in layer-by-layer order, its image the head's thumbnail painted
    Viridis from 0 to the largest weight of all; only the selected head is framed; on a phone a
    row holds at most six heads (--phone-heads), split evenly."""
    from ui import html_heatmap

    thumbs = random_attention(3, 4, 5, seed=2)  # (L, H, m, m)
    markup = html_heatmap.model_view(thumbs, (1, 2), "All 3 × 4 heads", name="grid")
    tiles = model_view_tiles(markup)
    assert list(tiles) == [(layer, head) for layer in range(3) for head in range(4)]
    assert [key for key, tile in tiles.items() if tile["framed"]] == [(1, 2)]
    zmax = float(np.round(thumbs.astype(np.float64), 3).max())
    for (layer, head), tile in tiles.items():
        expected = viridis(np.round(thumbs[layer, head].astype(np.float64), 3), zmax)
        np.testing.assert_array_equal(tile["pixels"], expected)
    assert '--heads:4;--phone-heads:4"' in markup
    twelve = html_heatmap.model_view(random_attention(1, 12, 2), (0, 0), "t")
    assert '--heads:12;--phone-heads:6"' in twelve  # two rows of six on a phone
    sixteen = html_heatmap.model_view(random_attention(1, 16, 2), (0, 0), "t")
    assert '--phone-heads:6"' in sixteen  # three rows: 6, 6, 4


# ---- head view -------------------------------------------------------------------------------
@pytest.mark.parametrize("which", head_stats.PAIR_FILTERS)
def test_pair_filter_keeps_only_the_chosen_blocks(which):
    n = len(PAIR_SEGMENTS)
    weights = random_attention(1, 2, n)[0]  # (H, n, n), all positive
    lines = head_stats.head_view_lines(weights, PAIR_SEGMENTS, heads=[0, 1], pair=which)

    sentence = np.where(PAIR_SEGMENTS == 0, "A", "B")
    blocks = {f"{sentence[q]}→{sentence[k]}" for q, k in zip(lines.query, lines.key, strict=True)}
    expected = {"A→A", "A→B", "B→A", "B→B"} if which == "All" else {which}
    assert blocks == expected
    mask = head_stats.pair_mask(PAIR_SEGMENTS, which)
    assert len(lines) == 2 * mask.sum()  # every kept cell of both heads, nothing else


def path_lines(path: str) -> list[tuple[int, int]]:
    """(query, key) of each line of a head-view path: "M0,{query}L1,{key}" again and again,
    queries at x = 0, keys at x = 1; head_view_charts.NO_LINES holds none."""
    if path == head_view_charts.NO_LINES:
        return []
    line = r"M0,(\d+)L1,(\d+)"
    assert re.fullmatch(f"(?:{line})+", path), path
    return [(int(query), int(key)) for query, key in re.findall(line, path)]


def test_line_opacities_equal_the_weights_in_data_and_figure():
    n = len(PAIR_SEGMENTS)
    weights = random_attention(1, 3, n, seed=3)[0]
    tokens = [f"t{i}" for i in range(n)]
    lines = head_stats.head_view_lines(weights, PAIR_SEGMENTS, heads=[0, 2])

    np.testing.assert_array_equal(lines.opacity, lines.weight)
    np.testing.assert_array_equal(lines.weight, weights[lines.head, lines.query, lines.key])

    fig = head_view_charts.head_view_figure(lines, tokens, PAIR_SEGMENTS, [0, 2], "t")
    drawn = 0
    for shape in fig.layout.shapes:
        head = int(shape.legendgroup.split()[-1])
        assert shape.line.color == head_view_charts.head_colour(head)
        for query, key in path_lines(shape.path):
            weight = weights[head, query, key]
            # Drawn at √weight (readable when weights are small), batched into buckets: each
            # line is within half a bucket of the square root of its weight.
            assert abs(shape.opacity - weight**0.5) <= head_view_charts.OPACITY_STEP / 2 + 1e-9
            drawn += 1
    assert len(lines) == 2 * n * n
    assert drawn == np.count_nonzero(lines.weight**0.5 >= head_view_charts.OPACITY_STEP / 2)
    assert 0 < drawn < len(lines)  # the faintest lines round to opacity 0 and are left out
    # one legend entry per head, whose click hides the shapes of its group
    assert [(t.name, t.legendgroup) for t in fig.data if t.mode == "lines"] == [
        ("head 0", "head 0"),
        ("head 2", "head 2"),
    ]


def drawn_lines(fig: dict, head: int) -> set[tuple[int, int, int]]:
    """(query, key, opacity level) of head's visible lines in a head-view figure's dict."""
    found = set()
    for shape in fig["layout"].get("shapes", []):
        if shape.get("legendgroup") != f"head {head}" or shape.get("visible") is False:
            continue
        level = round(shape.get("opacity", 1.0) / head_view_charts.OPACITY_STEP)
        found |= {(query, key, level) for query, key in path_lines(shape["path"])}
    return found


def stored_lines(meta: dict, index: int) -> set[tuple[int, int, int]]:
    """(query, key, level) of one head's store, read as HEAD_SWITCH_JS reads packed_lines."""
    raw = base64.b64decode(meta["heads"][index]["lines"])
    start = meta["head_view"]["start"]
    return {(start + raw[i], start + raw[i + 1], raw[i + 2]) for i in range(0, len(raw), 3)}


@pytest.mark.parametrize("stretch", [False, True])
def test_every_head_view_figure_carries_each_heads_lines_as_drawn(stretch):
    """Each (layer, head) store holds the lines head_view_figure draws for that head alone, so a
    head switched in the browser looks as one drawn by the server; the figure first shown is
    head_view_figure's for the slider's head and the extra heads."""
    n_layers, n_heads, n = 3, 4, len(PAIR_SEGMENTS)
    weights = random_attention(n_layers, n_heads, n, seed=5)  # (L, H, n, n)
    tokens = [f"t{i}" for i in range(n)]
    options = {"pair": "A→B", "window": (1, 7), "min_opacity": 0.025, "stretch": stretch}

    def lines_of(layer: int, heads) -> head_stats.HeadViewLines:
        return head_stats.head_view_lines(weights[layer], PAIR_SEGMENTS, heads, **options)

    def title_of(layer: int, head: int) -> str:
        return f"Layer {layer} · head {head} and 0"

    def figure(layer: int, head: int, more: list[int]) -> dict:
        every_layer = [lines_of(at_layer, range(n_heads)) for at_layer in range(n_layers)]
        return head_view_charts.every_head_view_figure(
            every_layer, n_heads, tokens, PAIR_SEGMENTS, layer, head, more, title_of
        ).to_dict()

    fig = figure(layer=1, head=2, more=[0])
    meta = fig["layout"]["meta"]
    for layer in range(n_layers):
        for head in range(n_heads):
            alone = head_view_charts.head_view_figure(
                lines_of(layer, [head]), tokens, PAIR_SEGMENTS, [head], "t"
            ).to_dict()
            index = layer * n_heads + head
            assert stored_lines(meta, index) == drawn_lines(alone, head), (layer, head)
            assert meta["heads"][index]["title"] == title_of(layer, head)
    both = head_view_charts.head_view_figure(
        lines_of(1, [0, 2]), tokens, PAIR_SEGMENTS, [0, 2], "t"
    )
    assert drawn_lines(fig, 2) and drawn_lines(fig, 0)
    for head in (0, 2):
        assert drawn_lines(fig, head) == drawn_lines(both.to_dict(), head)
    # a legend entry per group, the slider's head first, then the token columns; the groups'
    # shapes in fixed places, a level each
    levels = head_view_charts.HEAD_VIEW_LEVELS
    assert [t.get("name") for t in fig["data"][:2]] == ["head 2", "head 0"]
    assert [t["mode"] for t in fig["data"][2:]] == ["markers+text"] * 2
    shapes = fig["layout"]["shapes"]
    assert len(shapes) == 2 * levels
    assert [s["legendgroup"] for s in shapes[::levels]] == ["head 2", "head 0"]
    assert [round(s["opacity"] / head_view_charts.OPACITY_STEP) for s in shapes[:levels]] == list(
        range(1, levels + 1)
    )
    assert meta["shown"] == 1 * n_heads + 2  # the head drawn, as HEAD_SWITCH_JS reads it
    # the slider's head among the extra heads: drawn once, by its extra group
    again = figure(layer=0, head=3, more=[3])
    assert again["data"][0]["visible"] is False
    assert all(s["visible"] is False for s in again["layout"]["shapes"][:levels])
    assert drawn_lines(again, 3) == stored_lines(again["layout"]["meta"], 3)


def test_line_filters_window_token_threshold_and_stretch():
    n = 10
    weights = random_attention(1, 2, n, seed=5)[0]
    segments = np.zeros(n, dtype=int)

    windowed = head_stats.head_view_lines(weights, segments, [0, 1], window=(3, 7))
    assert windowed.query.min() >= 3 and windowed.key.max() < 7
    assert len(windowed) == 2 * 4 * 4

    focused = head_stats.head_view_lines(weights, segments, [1], token=4, token_side="key")
    assert set(focused.key) == {4} and set(focused.head) == {1} and len(focused) == n

    light = head_stats.head_view_lines(weights, segments, [0], min_opacity=0.1)
    assert light.weight.min() >= 0.1
    assert len(light) + light.dropped_light == n * n

    stretched = head_stats.head_view_lines(weights, segments, [0, 1], stretch=True)
    for head in (0, 1):
        of_head = stretched.head == head
        np.testing.assert_allclose(stretched.opacity[of_head].max(), 1.0)
        np.testing.assert_allclose(
            stretched.opacity[of_head], stretched.weight[of_head] / weights[head].max()
        )


def test_window_around_stays_inside_the_input():
    assert head_stats.window_around(512, 500, 64) == (448, 512)
    assert head_stats.window_around(10, 3, 64) == (0, 10)
    assert head_stats.window_around(100, 20, 64) == (20, 84)


def test_value_weighted_lines_are_the_value_weighted_share(model):
    trace = model.run("Time flies like an arrow.", "Fruit flies like a banana.")
    shares = head_stats.head_view_weights(model, trace, 2, value_weighted=True)
    assert shares.shape == trace.attentions[2].shape
    np.testing.assert_allclose(shares.sum(axis=-1), 1.0, atol=1e-5)
    # Not only rows of 1: each line is ‖α_ij v_j W_Oʰ‖ / Σ_k ‖α_ik v_k W_Oʰ‖ (head 4 by hand).
    w_o = model.attention_weights(2).output.weight.double().numpy()  # (d_model, H·d_head)
    cols = slice(4 * model.d_head, 5 * model.d_head)
    moved = np.array([np.linalg.norm(w_o[:, cols] @ v) for v in trace.values[2, 4]])  # (n,)
    by_hand = trace.attentions[2, 4] * moved[None, :]  # (n, n): row i, key j
    np.testing.assert_allclose(shares[4], by_hand / by_hand.sum(axis=1, keepdims=True), rtol=1e-4)
    plain = head_stats.head_view_weights(model, trace, 2, value_weighted=False)
    np.testing.assert_array_equal(plain, trace.attentions[2])
    assert not np.allclose(shares, plain)


def test_head_view_labels_are_escaped_text():
    tokens = ["[CLS]", "<b>", "&", "</script>", "[SEP]"]
    weights = random_attention(1, 1, len(tokens))[0]
    lines = head_stats.head_view_lines(weights, np.zeros(len(tokens), dtype=int), [0])
    fig = head_view_charts.head_view_figure(lines, tokens, np.zeros(5, dtype=int), [0], "t", 1)
    labels = [t for trace in fig.data if trace.mode == "markers+text" for t in trace.text]
    assert "<b>▶ &#60;b&#62;</b>" in labels  # the highlighted token: our markup, its text escaped
    others = [shown(label) for label in labels if not label.startswith("<b>▶")]
    assert "</script>" in others and "&" in others


def test_shared_pieces_put_content_words_first():
    a = ["[CLS]", "she", "sat", "on", "the", "bank", ".", "[SEP]"]
    b = ["[CLS]", "the", "bank", "lends", ".", "[SEP]"]
    assert head_stats.shared_pieces(a, b) == ["bank", "the", "."]
    assert head_stats.shared_pieces(a, ["[CLS]", "[SEP]"]) == []


def test_compare_rows_figure_marks_the_word():
    fig = heatmaps_charts.compare_rows_figure(
        [np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])],
        [["a", "<i>"], ["x", "y", "z"]],
        [1, 2],
        ["left", "right"],
        "“<i>” twice",
    )
    assert [len(bar.y) for bar in fig.data] == [2, 3]
    colours = fig.data[0].marker.color
    assert colours[1] != colours[0]
    assert shown(fig.layout.title.text) == "“<i>” twice"
    assert [shown(t) for t in fig.layout.xaxis.ticktext] == ["a", "<i>"]  # escaped once, not twice


def test_head_stat_grid_marks_sink_heads():
    sink = np.array([[True, False, False], [False, False, True]])
    stat = np.array([[0.05, 0.5, 0.95], [0.62, 1.0, 0.3]])
    fig = heatmaps_charts.head_stat_grid(stat, sink, "t", "share", zmax=1.0)
    marked = next(t for t in fig.data if getattr(t, "mode", "") == "markers")
    rows, cols = np.round(np.array(marked.y) + 0.3), np.round(np.array(marked.x) - 0.36)
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == [
        (0.0, 0.0),
        (1.0, 2.0),
    ]
    assert marked.showlegend and "sink" in marked.name  # the red dots are explained
    # Every cell's number sits on its cell, short enough for a phone, dark on the bright cells.
    numbers = next(t for t in fig.data if getattr(t, "mode", "") == "text")
    cells = {(int(y), int(x)): (text, colour) for x, y, text, colour in zip(
        numbers.x, numbers.y, numbers.text, numbers.textfont.color, strict=True)}  # fmt: skip
    assert cells[(1, 0)][0] == ".62" and cells[(1, 1)][0] == "1.0"  # 3 characters a cell
    assert cells[(0, 2)][1] == "#000000"  # 0.95 is yellow on Viridis: black text
    assert cells[(0, 0)][1] == "#FFFFFF"  # 0.05 is dark purple: white text


# ---- exports ---------------------------------------------------------------------------------
def test_trace_npz_round_trips(model):
    trace = model.run("The bank raised its rates.", causal=True)
    archive = np.load(io.BytesIO(exports.trace_npz(trace)))
    assert tuple(archive["tokens"]) == trace.tokens
    np.testing.assert_array_equal(archive["attentions"], trace.attentions)
    np.testing.assert_array_equal(archive["scores"], trace.scores)
    np.testing.assert_array_equal(archive["hidden_states"], trace.hidden_states)
    assert bool(archive["causal"]) and bool(archive["scale"])


# ---- the pages, headless ---------------------------------------------------------------------
def chart_specs(at) -> list[dict]:
    return sent_figures(at)


def titles(at) -> list[str]:
    return [spec["layout"].get("title", {}).get("text", "") for spec in chart_specs(at)]


@pytest.mark.parametrize("page", [HEATMAPS, HEAD_VIEW])
@pytest.mark.parametrize("pair", [None, "Fruit flies like a banana."], ids=["single", "pair"])
def test_pages_with_and_without_a_pair(page, pair):
    at = run_page(page, text="Time flies like an arrow.", pair=pair)
    assert_no_exception(at)
    assert at.get("plotly_chart"), "the page must draw its figures"
    example_offered = any(button.key == "hv_example" for button in at.button)
    assert example_offered == (page == HEAD_VIEW and pair is None)


def test_head_view_draws_the_pair_and_filters_blocks():
    at = run_page(HEAD_VIEW, text="Time flies like an arrow.", pair="Fruit flies like a banana.")
    labels = next(s for s in chart_specs(at)[0]["data"] if s.get("mode") == "markers+text")
    assert [shown(t) for t in labels["text"][-3:]] == ["banana", ".", "[SEP]"]
    at.slider(key="head").set_value(
        0
    ).run()  # L0 H0 reads across the pair; the opening head (the token before) does not
    at.radio(key="hv_pair").set_value("A→B").run()
    assert_no_exception(at)
    drawn = line_ends(chart_specs(at)[0])
    assert drawn and all(query <= 7 < key for query, key in drawn)  # A = tokens 0..7
    at.slider(key="layer").set_value(3).run()
    at.slider(key="head").set_value(5).run()
    assert titles(at)[0].startswith("Layer 3 · head 5")
    at.selectbox(key="hv_token").set_value(2).run()  # "flies" in the first sentence
    assert {query for query, _ in line_ends(chart_specs(at)[0])} == {2}
    at.toggle(key="hv_value").set_value(True).run()
    assert_no_exception(at)
    assert "‖α·v·W_O‖" in titles(at)[0]


def test_head_view_keeping_a_token_adds_no_element_and_the_figure_comes_first():
    """Every control of the head view is there before a token is kept (its "Its lines" radio
    greyed): keeping one changes the radio's state, not the page's elements, so nothing above
    or beside the figure moves. The figure is the page's first element after its intro."""
    at = run_page(HEAD_VIEW, text="Time flies like an arrow.")

    def widget_keys(at) -> list[str]:
        return [
            w.key
            for kind in ("slider", "multiselect", "selectbox", "radio", "toggle")
            for w in at.get(kind)
        ]

    assert at.radio(key="hv_side").disabled
    before = widget_keys(at)
    at.selectbox(key="hv_token").set_value(2).run()
    assert_no_exception(at)
    assert not at.radio(key="hv_side").disabled
    assert widget_keys(at) == before
    assert {query for query, _ in line_ends(chart_specs(at)[0])} == {2}
    # the figure and its controls share the page's first row of columns
    figure_column = at.columns[0]
    assert [c.key for c in figure_column.get("plotly_chart")] == ["hv_figure"]
    assert {"layer", "head", "hv_heads", "hv_token", "hv_side"} <= {
        w.key
        for kind in ("slider", "multiselect", "selectbox", "radio")
        for w in at.columns[1].get(kind)
    }


def test_head_view_through_the_server_draws_the_chosen_heads_lines(model, monkeypatch):
    """A model too large to switch in the browser: the page draws only the sliders' head, and
    its lines and count are those of head_view_lines on that layer, computed here."""
    from ui import display_policy

    monkeypatch.setattr(display_policy, "SWITCH_IN_BROWSER_UP_TO_WEIGHTS", 0)
    text = "Time flies like an arrow."
    at = run_page(HEAD_VIEW, text=text)
    at.slider(key="layer").set_value(3).run()
    at.slider(key="head").set_value(5).run()
    assert_no_exception(at)
    assert titles(at)[0].startswith("Layer 3 · head 5")
    spec = chart_specs(at)[0]
    assert "heads" not in (spec["layout"].get("meta") or {})  # no store: nothing to switch
    trace = model.run(text)
    expected = head_stats.head_view_lines(
        trace.attentions[3],
        trace.segments,
        [5],
        min_opacity=0.025,  # the page's 2.5 %
    )
    assert line_ends(spec) == set(zip(expected.query.tolist(), expected.key.tolist(), strict=True))
    assert any(f"Lines drawn: {len(expected):,}" in c.value for c in at.caption)


def line_ends(spec: dict) -> set[tuple[int, int]]:
    """(query, key) of every line in a head-view figure spec."""
    return {
        line for shape in spec["layout"].get("shapes", []) for line in path_lines(shape["path"])
    }


# ---- the head view opens on the head its takeaway names ------------------------------------------
def boldest_head(trace) -> tuple[int, int]:
    """(layer, head) holding the largest weight from one ordinary piece to another (no special
    piece, no piece on itself), found here head by head in float64."""
    weights = np.asarray(trace.attentions, dtype=np.float64)  # (L, H, n, n)
    ordinary = ~np.asarray(trace.special, dtype=bool)  # (n,)
    allowed = np.outer(ordinary, ordinary) & ~np.eye(len(ordinary), dtype=bool)  # (n, n)
    queries, keys = np.nonzero(allowed)
    per_head = weights[:, :, queries, keys].max(axis=-1)  # (L, H) each head's boldest line
    layer, head = np.unravel_index(int(np.argmax(per_head)), per_head.shape)
    return int(layer), int(head)


def opened_on(at) -> tuple[int, int]:
    """The Layer and Head sliders' values, read after checking the figure drew that head."""
    assert_no_exception(at)
    sliders = {s.key: s.value for s in at.slider}
    layer, head = sliders["layer"], sliders["head"]
    assert titles(at)[0].startswith(f"Layer {layer} · head {head}"), titles(at)[0]
    return layer, head


def test_head_view_opens_on_the_head_its_takeaway_names(model):
    """MiniLM, reached from Heatmaps (the page before, its shared sliders left at 0): the view
    opens on the boldest line's head, and the takeaway says so; a link's head wins."""
    from conftest import takeaway_text

    text = "Time flies like an arrow."
    layer, head = boldest_head(model.run(text))
    assert (layer, head) != (0, 0)  # else opening there would prove nothing
    at = run_page(HEATMAPS, text=text)
    assert {s.key: s.value for s in at.slider if s.key in ("layer", "head")} == {
        "layer": 0,
        "head": 0,
    }
    at.switch_page(HEAD_VIEW).run()
    assert opened_on(at) == (layer, head)
    said = takeaway_text(at)
    assert f"L{layer} H{head}'s" in said
    assert f"the figure opens on that head (layer {layer}, head {head})" in said
    link = run_page(HEAD_VIEW, text=text, query={"layer": "3", "head": "0"})
    assert opened_on(link) == (3, 0)
    assert f"set Layer to {layer} and Head to {head} to see it in the figure" in takeaway_text(link)


def test_a_decoder_head_view_opens_on_its_boldest_head_and_keeps_a_moved_slider(local_folders):
    """A tiny random GPT-2: the view opens on its takeaway's head; a new sentence moves sliders
    the visitor left alone to that sentence's head, and leaves a slider the visitor moved."""
    from conftest import takeaway_text
    from family_pages import TEXT, family_folder, run_on

    from ui import models, traces

    folder = family_folder("gpt2")
    decoder = models.load_model(str(folder))
    first, second = TEXT, "Time flies like an arrow."
    first_head, second_head = (boldest_head(traces.trace(decoder, t)) for t in (first, second))
    assert len({first_head, second_head, (0, 0)}) == 3, "sentences that tell the rules apart"
    at = run_on(folder, HEAD_VIEW)
    assert opened_on(at) == first_head
    assert "the figure opens on that head (layer {}, head {})".format(*first_head) in takeaway_text(
        at
    )
    at.session_state["text"] = second
    at.run()
    assert opened_on(at) == second_head  # left alone: they follow the sentence
    moved = (second_head[0], (second_head[1] + 1) % decoder.n_heads)
    at.slider(key="head").set_value(moved[1]).run()
    at.session_state["text"] = first
    at.run()
    assert opened_on(at) == moved  # the visitor's place stays
    assert "set Layer to {} and Head to {}".format(*first_head) in takeaway_text(at)


def test_a_head_view_of_words_names_a_line_it_draws(local_folders):
    """A tiny GPT-2 with word pieces merged into words (its sentence splits words): the takeaway's
    boldest line joins two words the figure draws, and the figure's title, which finds its
    head's boldest drawn line from the lines themselves, names the same line and weight; with a
    token kept, the title says the line is that token's."""
    from conftest import takeaway_text
    from family_pages import family_folder, run_on

    at = run_on(family_folder("gpt2"), HEAD_VIEW, state={"words": True})
    layer, head = opened_on(at)
    said = shown(takeaway_text(at))
    found = re.search(
        r"L(\d+) H(\d+)'s (.+?) → (.+?), (\d\.\d\d)(?: \(one of [^)]*\))?: the figure opens", said
    )
    assert found and (int(found[1]), int(found[2])) == (layer, head), said
    assert "between two ordinary words" in said, said
    title = titles(at)[0]
    line = f"{found[3]} → {found[4]}, {found[5]}"
    assert f"boldest line between ordinary words: {line}" in title, title
    kept = run_on(family_folder("gpt2"), HEAD_VIEW, state={"words": True, "hv_token": 1})
    assert "boldest of " in titles(kept)[0] and "'s lines: " in titles(kept)[0], titles(kept)[0]


def test_heatmaps_follow_layer_and_head_and_compare_bank(model):
    text = "The bank raised its rates."
    at = run_page(HEATMAPS, text=text)
    at.slider(key="layer").set_value(4).run()
    at.slider(key="head").set_value(7).run()
    assert_no_exception(at)
    # one head up close: the Overview's square HTML grid, every cell numbered (≤ 12 pieces)
    close = html_figures(at)["hm_heatmap"]
    assert close["kind"] == "ae-heatmap" and not close["image"]
    assert close["title"] == "Layer 4, head 7: attention weights" and close["note"] == ""
    trace = model.run(text)
    assert close["rows"] == close["columns"] == list(trace.tokens)
    np.testing.assert_allclose(
        np.reshape(close["numbers"], (trace.n_tokens, trace.n_tokens)),
        trace.attentions[4, 7],
        atol=0.0051,  # two decimals
    )
    assert at.selectbox(key="hm_word").value == "bank"
    assert any("“bank”" in title for title in titles(at))
    at.toggle(key="hm_renorm").set_value(True).run()
    close = html_figures(at)["hm_heatmap"]
    assert (close["title"], close["note"]) == (
        "Layer 4, head 7: attention weights",
        "without special pieces",
    )


def unpacked_rows(packed: str, cols: int) -> list[list[float]]:
    """charts.packed_weights -> rows of cols weights, read as HEAD_SWITCH_JS reads them
    (little-endian uint16 counts of 1/10,000)."""
    import base64

    counts = np.frombuffer(base64.b64decode(packed), dtype="<u2").astype(np.float64)
    return (counts.reshape(-1, cols) / 10_000).tolist()


def test_heatmaps_special_token_bars_are_each_layers_mean_over_heads_and_word_rows(model):
    """Section 3's bars: per layer, the weight real word pieces give [CLS] and [SEP], averaged
    over every head and every word-piece row, written out with loops."""
    text = "The bank raised its rates."
    at = run_page(HEATMAPS, text=text)
    assert_no_exception(at)
    bars = html_figures(at)["hm_sinks"]
    assert bars["rows"] == [f"layer {k}" for k in range(model.n_layers)]
    trace = model.run(text)
    rows = [i for i, t in enumerate(trace.tokens) if t not in ("[CLS]", "[SEP]")]
    for name, piece in (("on [CLS]", "[CLS]"), ("on [SEP]", "[SEP]")):
        keys = [j for j, t in enumerate(trace.tokens) if t == piece]
        expected = [
            np.mean(
                [
                    sum(float(trace.attentions[layer, head, i, j]) for j in keys)
                    for head in range(model.n_heads)
                    for i in rows
                ]
            )
            for layer in range(model.n_layers)
        ]
        np.testing.assert_allclose(bar_series(bars)[name], expected, atol=0.0051)


def every_head_figures(at) -> dict[str, dict]:
    """The Attention heatmaps page's figures that follow the sliders, by kind: section 4's
    plotly rows, the up-close HTML heatmap as html_figures reads it, and the HTML model view's
    markup."""
    kinds = {}
    for spec in chart_specs(at):
        meta = spec["layout"].get("meta") or {}
        if "bar_lengths" in meta:
            kinds["rows"] = spec
    kinds["heatmap"] = html_figures(at)["hm_heatmap"]
    (kinds["grid"],) = [
        e.proto.body for e in at.get("html") if 'data-figure="hm_grid"' in e.proto.body
    ]
    return kinds


def words_without_specials(text: str, layer: int, head: int) -> np.ndarray:
    """(w, w) one head between words, [CLS]/[SEP] columns dropped and rows renormalised, by
    explicit loops: a ## piece joins the word before it; keys sum, queries average."""
    import core

    trace = core.load_model().run(text)
    groups: list[list[int]] = []
    for position, piece in enumerate(trace.tokens):
        if groups and piece.startswith("##"):
            groups[-1].append(position)
        else:
            groups.append([position])
    attn_weights = trace.attentions[layer, head].astype(np.float64)
    merged = np.zeros((len(groups), len(groups)))
    for row, queries in enumerate(groups):
        for col, keys in enumerate(groups):
            merged[row, col] = sum(attn_weights[q, k] for q in queries for k in keys) / len(queries)
    for col, keys in enumerate(groups):
        if trace.tokens[keys[0]] in ("[CLS]", "[SEP]"):
            merged[:, col] = 0.0
    return merged / merged.sum(axis=1, keepdims=True)


def test_heatmaps_send_every_head_as_the_server_draws_it():
    """Up to ~128 pieces the sliders switch heads in the browser, from stores the run sends.
    Store l·H + h must be exactly what the server draws when the sliders say (l, h): the
    up-close heatmap (here between words, [CLS]/[SEP] hidden: both switches change the
    numbers) and the shared word's rows in both sentences of section 4."""
    text = "Unbelievably, the riverbank flooded."
    at = run_page(HEATMAPS, text=text)
    at.toggle(key="words").set_value(True)
    at.toggle(key="hm_renorm").set_value(True).run()
    assert_no_exception(at)
    sent = every_head_figures(at)  # as sent with the sliders at layer 0, head 0
    assert set(sent) == {"grid", "heatmap", "rows"}
    n_heads = int(re.search(r'data-every-head-of="(\d+)"', sent["grid"]).group(1))
    for layer, head in ((0, 0), (2, 5), (5, n_heads - 1)):
        at.slider(key="layer").set_value(layer)
        at.slider(key="head").set_value(head).run()
        drawn = every_head_figures(at)
        index = layer * n_heads + head
        assert drawn["rows"]["data"][0]["meta"] == index  # what the browser script checks
        framed = [key for key, tile in model_view_tiles(drawn["grid"]).items() if tile["framed"]]
        assert framed == [(layer, head)] and f'data-shown="{index}"' in drawn["grid"]

        heatmap = drawn["heatmap"]  # the HTML grid the server drew for (layer, head)
        store = sent["heatmap"]["heads"][str(index)]
        assert (
            store["title"] == heatmap["title"] == f"Layer {layer}, head {head}: attention weights"
        )
        assert store["note"] == heatmap["note"] == "between words, without special pieces"
        n = len(heatmap["rows"])
        drawn_weights = np.reshape(heatmap["numbers"], (n, n))  # two decimals per cell
        stored = np.asarray(unpacked_rows(store["weights"], n))
        np.testing.assert_allclose(stored, drawn_weights, atol=0.0051)

        rows = drawn["rows"]
        store = sent["rows"]["layout"]["meta"]["heads"][index]
        assert store["title"] == rows["layout"]["title"]["text"]
        assert shown(store["title"]).endswith(f"looks: layer {layer}, head {head}")
        bars = [sent_array(trace["y"]) for trace in rows["data"]]
        for packed, y in zip(store["bars"], bars, strict=True):
            np.testing.assert_array_equal(unpacked_rows(packed, len(y))[0], y)
        if (layer, head) == (2, 5):  # the numbers themselves, written out with loops
            np.testing.assert_allclose(stored, words_without_specials(text, layer, head), atol=6e-5)
    # the stores are not all alike: the last head shown differs from head (0, 0)
    assert not np.array_equal(unpacked_rows(sent["heatmap"]["heads"]["0"]["weights"], n), stored)


def test_heatmaps_up_close_through_the_server_and_at_length(model, monkeypatch):
    """A model too large to switch in the browser: the up-close grid carries the sliders' head
    alone; past 12 pieces it is one image, its colours Viridis over the head's own weights."""
    from ui import display_policy

    text = " ".join(["The river bank was quiet after the storm."] * 2)  # 20 pieces
    monkeypatch.setattr(display_policy, "SWITCH_IN_BROWSER_UP_TO_WEIGHTS", 0)
    at = run_page(HEATMAPS, text=text)
    at.slider(key="layer").set_value(3).run()
    at.slider(key="head").set_value(2).run()
    assert_no_exception(at)
    close = html_figures(at)["hm_heatmap"]
    n_heads = model.n_heads
    assert list(close["heads"]) == [str(3 * n_heads + 2)]  # the one head shown, nothing else
    assert close["image"] is False and close["title"] == "Layer 3, head 2: attention weights"
    trace = model.run(text)
    weights = np.asarray(unpacked_rows(close["heads"][str(3 * n_heads + 2)]["weights"], 20))
    np.testing.assert_allclose(weights, trace.attentions[3, 2], atol=6e-5)
    (body,) = [e.proto.body for e in at.get("html") if 'data-figure="hm_heatmap"' in e.proto.body]
    pixels = re.search(r'class="ae-cells"[^>]*src="data:image/png;base64,([^"]+)"', body).group(1)
    image = np.asarray(Image.open(io.BytesIO(base64.b64decode(pixels))).convert("RGB"))
    assert image.shape == (20, 20, 3)  # one pixel per cell
    zmax = float(close["heads"][str(3 * n_heads + 2)]["zmax"])
    expected = viridis(np.round(trace.attentions[3, 2].astype(np.float64), 4), zmax)
    np.testing.assert_array_equal(image, expected)


def test_hostile_sentences_reach_the_stores_beside_a_figure_as_text_only():
    """Section 4's shared word piece is in every stored title of its figure, sent beside it
    (display.stores_aside): with hostile sentences in both boxes it stays text there."""
    bad = BAD_INPUTS["html"]
    at = run_page(HEATMAPS, text="The bank.", query={"hm_a": bad, "hm_b": bad})
    assert_no_exception(at)
    bodies = [
        body for body in (e.proto.body for e in at.get("html")) if 'class="ae-stores"' in body
    ]
    assert len(bodies) == 2  # section 4's, and the up-close heatmap's (sent after it)
    for body in bodies:
        assert STORES_ELEMENT.fullmatch(body), body[:200]  # one div, its JSON escaped
    rows = next(s for s in sent_figures(at) if "bar_lengths" in (s["layout"].get("meta") or {}))
    word = at.selectbox(key="hm_word").value
    assert word in BAD_INPUTS["html"]  # a piece of the hostile text
    n_heads = rows["layout"]["meta"]["every_head_of"]
    for index, store in enumerate(rows["layout"]["meta"]["heads"]):
        layer, head = divmod(index, n_heads)
        assert shown(store["title"]) == f"Where “{word}” looks: layer {layer}, head {head}"


@pytest.mark.parametrize("page", [HEATMAPS, HEAD_VIEW])
@pytest.mark.parametrize("bad", ["empty", "control", "html", "emoji_cjk_rtl", "ten_thousand"])
def test_pages_with_bad_input(page, bad):
    at = run_page(page, text=BAD_INPUTS[bad])
    assert_no_exception(at)
    spec_text = json.dumps(chart_specs(at))
    assert "<script>" not in spec_text and "&#38;#" not in spec_text  # escaped exactly once
    if bad in ("empty", "control"):
        assert at.info, "an unreadable input gets a message"


def test_pages_at_512_tokens_say_what_they_leave_out():
    text = " ".join(["The river bank was quiet after the storm."] * 80)
    heatmaps = run_page(HEATMAPS, text=text)
    assert_no_exception(heatmaps)
    assert any("mean weight of blocks" in c.value for c in heatmaps.caption)
    head_view = run_page(HEAD_VIEW, text=text)
    assert_no_exception(head_view)
    assert any("only tokens 0–63 of 512" in c.value for c in head_view.caption)
    assert all(max(pair) <= 63 for pair in line_ends(chart_specs(head_view)[0]))
    for at in (heatmaps, head_view):
        payload = sum(len(chart.proto.spec) for chart in at.get("plotly_chart"))
        assert payload < 20e6, f"{payload / 1e6:.1f} MB of figures"


# ---- the pages, in a real browser ------------------------------------------------------------
# The head view's lines as drawn now: (query, key) of every line of every path shape.
DRAWN_LINES_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')]
  .filter(gd => gd.layout && gd.layout.meta && gd.layout.meta.hover_lines)
  .flatMap(gd => gd.layout.shapes.filter(shape => shape.visible !== false))
  .flatMap(shape => [...shape.path.matchAll(/M0,(\\d+)L1,(\\d+)/g)])
  .map(match => [Number(match[1]), Number(match[2])])
"""


def lines_on_screen(page) -> set[tuple[int, int]]:
    return {tuple(line) for line in page.evaluate(DRAWN_LINES_JS)}


@pytest.mark.browser
def test_browser_both_pages_change_layer_and_head(server, browser):
    from tests.support.browser import page_exceptions, wait_idle

    def figure_titles(page) -> list[str]:
        return page.evaluate(  # SVG text has no innerText: read textContent; and HTML figures'
            "() => [...document.querySelectorAll('.js-plotly-plot .gtitle, .ae-heatmap .ae-title')]"
            ".map(e => e.textContent)"
        )

    url = server.url  # the shared server (conftest.py); browser: this module's
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    for path, opened, expected in (
        ("/heatmaps?", "Layer 0, head 0", ("Layer 1, head 0", "Layer 1, head 1")),
        (
            "/head_view?layer=2&head=3&",
            "Layer 2 · head 3",
            ("Layer 3 · head 3", "Layer 3 · head 4"),
        ),
    ):
        page.goto(f"{url}{path}text=Time+flies+like+an+arrow.")
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=90_000)
        wait_idle(page, 90_000)
        assert any(t.startswith(opened) for t in figure_titles(page)), "the link's view"
        sliders = page.locator('[data-testid="stSlider"] input[type="range"]')
        for index, title in enumerate(expected):  # layer slider first, then head
            sliders.nth(index).focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_function(
                "t => [...document.querySelectorAll('.js-plotly-plot .gtitle, .ae-title')]"
                ".some(e => e.textContent.startsWith(t))",
                arg=title,
                timeout=60_000,
            )
            wait_idle(page, 60_000)
        assert any(t.startswith(expected[1]) for t in figure_titles(page))
        if path.startswith("/heatmaps"):  # section 4's figure switched too, from its own stores
            assert any(t.endswith("looks: layer 1, head 1") for t in figure_titles(page))
        assert page_exceptions(page) == []
    # Pointing at a token's dot on the left keeps only its outgoing lines, in the browser, and
    # moves nothing; pointing away brings every line back.
    figure = page.locator("[data-testid='stMain'] .js-plotly-plot").first
    every_line, where = lines_on_screen(page), figure.bounding_box()
    assert {query for query, _ in every_line} > {2}
    traces = page.locator(".js-plotly-plot .scatterlayer .trace")
    dot = traces.nth(traces.count() - 2).locator("path.point").nth(2)  # "flies", query side
    box = dot.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)  # plotly turns a hover followed by a click into a selection
    page.wait_for_function(f"() => ({DRAWN_LINES_JS})().every(([q]) => q === 2)", timeout=10_000)
    assert lines_on_screen(page) == {(q, k) for q, k in every_line if q == 2}
    assert figure.bounding_box() == where
    page.mouse.move(where["x"] + where["width"] + 40, y)  # off the figure
    page.wait_for_function(f"n => ({DRAWN_LINES_JS})().length === n", arg=len(every_line))
    # Clicking it keeps its lines through a run; every control was already there, so the
    # figure stays where it was.
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_function(
        "() => document.querySelector('.js-plotly-plot')?.textContent.includes('▶ flies')",
        timeout=60_000,
    )
    wait_idle(page, 60_000)
    assert "hv_token=2" in page.url
    assert figure.bounding_box() == where
    # Without a second sentence the head view offers the example pair; one click loads it.
    page.get_by_role("button", name="Use “Time flies like an arrow.”").click()
    page.wait_for_function(
        "() => document.querySelector('.js-plotly-plot')?.textContent.includes('banana')",
        timeout=60_000,
    )
    wait_idle(page, 60_000)
    assert page_exceptions(page) == []


# Every visible line of the Head view's figure as plotly holds it now (after any switch in the
# browser): head name, opacity level and (query, key) of each line, read from its path shapes.
HEAD_VIEW_DRAWN_JS = """
step => {
  const gd = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
  const lines = [];
  for (const shape of gd.layout.shapes || []) {
    if (shape.visible === false) continue;
    for (const [, query, key] of shape.path.matchAll(/M0,(\\d+)L1,(\\d+)/g))
      lines.push([shape.legendgroup, Math.round(shape.opacity / step), query, key]);
  }
  return {title: gd.layout.title.text, lines: lines};
}
"""


@pytest.mark.browser
def test_browser_head_view_switches_layer_and_head_in_the_browser(server, browser, model):
    """The Layer and Head sliders redraw the Head view with no server run, and the lines drawn
    are the ones the server draws for that layer and heads (head_view_figure, computed here),
    with an extra head chosen too, and with the slider on that extra head (drawn once)."""
    from tests.support.browser import RunWatcher, page_exceptions, wait_idle

    trace = model.run("Time flies like an arrow.")
    n_heads = model.n_heads
    opens = boldest_head(trace)  # the sliders' defaults on this page

    def server_lines(layer: int, heads: list[int]) -> set[tuple]:
        lines = head_stats.head_view_lines(
            trace.attentions[layer],
            trace.segments,
            heads,
            min_opacity=0.025,  # the page's 2.5 %
        )
        fig = head_view_charts.head_view_figure(lines, trace.tokens, trace.segments, heads, "t")
        return {
            (f"head {head}", level, q, k)
            for head in heads
            for q, k, level in drawn_lines(fig.to_dict(), head)
        }

    page = browser.new_page(viewport={"width": 1300, "height": 1400})
    runs = RunWatcher(page)
    sliders = page.locator('[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]')
    # each link names layer 0 and head 0: without them the view opens on its takeaway's head
    for query, more, steps in (
        ("layer=0&head=0&", [], ((0, (1, 0)), (1, (1, 1)), (0, (2, 1)))),
        (
            "layer=0&head=0&hv_heads=head+2&",
            [2],
            ((1, (0, 1)), (1, (0, 2)), (1, (0, 3)), (0, (1, 3))),
        ),
    ):
        page.goto(f"{server.url}/head_view?{query}text=Time+flies+like+an+arrow.")
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=90_000)
        wait_idle(page, 90_000)
        for slider, (layer, head) in steps:
            mark = runs.mark()
            sliders.nth(slider).focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_function(  # the layout's meta names the head shown (HEAD_SWITCH_JS)
                "i => document.querySelector('.js-plotly-plot').layout.meta.shown === i",
                arg=layer * n_heads + head,
                timeout=30_000,
            )
            title = page.evaluate(HEAD_VIEW_DRAWN_JS, head_view_charts.OPACITY_STEP)["title"]
            assert title.startswith(f"\x3cb>Layer {layer} · head"), title
            drawn = page.evaluate(HEAD_VIEW_DRAWN_JS, head_view_charts.OPACITY_STEP)["lines"]
            shown = {(name, level, int(q), int(k)) for name, level, q, k in drawn}
            assert len(shown) == len(drawn), "a line drawn twice"
            assert shown == server_lines(layer, sorted({head, *more})), (layer, head, more)
            assert runs.settled_since(mark) is None, "the switch went through the server"
            # the link keeps both (a slider at its default, the opening head, is left out of it)
            kept = [
                f"{name}={value}"
                for name, value, default in (("layer", layer, opens[0]), ("head", head, opens[1]))
                if value != default
            ]
            page.wait_for_function(
                "kept => kept.every(k => location.search.includes(k))", arg=kept, timeout=10_000
            )
    # A click on the legend hides the head's lines (its shapes share the entry's legendgroup),
    # and they stay hidden on another layer of the same head, drawn from that layer's store.
    hidden_js = """() => document.querySelector('.js-plotly-plot').layout.shapes
        .filter(s => s.legendgroup === 'head 3').map(s => [s.visible, s.path])"""
    page.locator(".js-plotly-plot .legend .traces").first.click()
    page.wait_for_function(f"() => ({hidden_js})().every(([v]) => v === 'legendonly')")
    before = page.evaluate(hidden_js)
    sliders.nth(0).focus()
    page.keyboard.press("ArrowLeft")  # layer 1 -> 0, head 3 and the extra head 2
    page.wait_for_function(
        "i => document.querySelector('.js-plotly-plot').layout.meta.shown === i", arg=3
    )
    after = page.evaluate(hidden_js)
    assert all(visible == "legendonly" for visible, _ in after)
    assert [path for _, path in after] != [path for _, path in before]
    assert server_lines(0, [3]) == {
        ("head 3", level, q, k)
        for level, (_, path) in enumerate(after, start=1)
        for q, k in path_lines(path)
    }
    # The extra head hidden too, then the Head slider moved: a new head comes in, shown; the
    # extra head's lines stay hidden with its legend entry.
    visibility_js = """() => { const gd = document.querySelector('.js-plotly-plot');
        const entries = {}; gd.data.slice(0, 2).forEach(t => { entries[t.name] = t.visible; });
        const shapes = {}; gd.layout.shapes.forEach(s => {
            (shapes[s.legendgroup] = shapes[s.legendgroup] || new Set()).add(String(s.visible)); });
        return {entries, shapes: Object.fromEntries(
            Object.entries(shapes).map(([group, seen]) => [group, [...seen]]))}; }"""
    page.locator(".js-plotly-plot .legend .traces").nth(1).click()  # "head 2"
    page.wait_for_function(f"() => ({visibility_js})().entries['head 2'] === 'legendonly'")
    sliders.nth(1).focus()
    page.keyboard.press("ArrowRight")  # head 3 -> 4 on layer 0
    page.wait_for_function(
        "i => document.querySelector('.js-plotly-plot').layout.meta.shown === i", arg=4
    )
    assert page.evaluate(visibility_js) == {
        "entries": {"head 4": True, "head 2": "legendonly"},
        "shapes": {"head 4": ["true"], "head 2": ["legendonly"]},
    }
    assert page_exceptions(page) == []
    page.close()
