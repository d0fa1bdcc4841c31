"""The shared figure functions, tested on their data."""

from __future__ import annotations

import csv
import io

import numpy as np
from shown import shown

from ui import charts, display, display_policy, tables


def test_repeated_tokens_keep_their_own_rows():
    tokens = ["[CLS]", "the", "bank", "the", "river", "[SEP]"]
    fig = charts.attention_heatmap(np.eye(6), tokens, tokens, "t")
    assert list(fig.data[0].x) == list(range(6)) and list(fig.data[0].y) == list(range(6))
    assert [
        shown(t) for t in fig.layout.xaxis.ticktext
    ] == tokens  # both "the" labelled, at 1 and 3
    assert list(fig.layout.xaxis.tickvals) == list(range(6))


def test_long_inputs_thin_their_tick_labels_but_keep_every_cell():
    tokens = [f"w{i}" for i in range(512)]
    fig = charts.attention_heatmap(np.full((512, 512), 1 / 512), tokens, tokens, "t")
    assert len(fig.layout.xaxis.ticktext) <= display_policy.MAX_TICK_LABELS
    assert np.asarray(fig.data[0].z).shape == (512, 512)
    assert fig.data[0].customdata is None  # no n² hover strings for long inputs


def test_tokens_are_escaped_for_plotly_labels_and_hover():
    tokens = ["<b>", "x"]
    fig = charts.attention_heatmap(np.eye(2), tokens, tokens, "t")
    assert shown(fig.layout.xaxis.ticktext[0]) == "<b>"
    assert shown(fig.data[0].customdata[0][0][0]) == "<b>"


def test_hover_names_query_and_key():
    fig = charts.attention_heatmap(
        np.array([[0.25, 0.75], [1.0, 0.0]]), ["a", "b"], ["c", "d"], "t"
    )
    assert fig.data[0].customdata[0][1].tolist() == ["a", "d"]  # row 0 is query a, column 1 key d


def test_a_matrix_of_dimensions_is_labelled_d0_to_the_last():
    assert tables.dimension_labels(np.zeros((2, 3))) == ["d0", "d1", "d2"]
    assert tables.dimension_labels(np.zeros((5, 1))) == ["d0"]


def test_matrix_csv_quotes_tokens_and_keeps_numbers():
    csv = tables.matrix_csv(np.array([[0.5, 0.25]]), ['say "hi", ok'], ["a", "b"])
    header, row = csv.strip().split("\n")
    assert header == '"","a","b"'
    assert row == '"say ""hi"", ok",0.5,0.25'


def test_a_label_a_spreadsheet_would_run_as_a_formula_is_written_as_text():
    """A shared link's sentence decides the word pieces in a CSV: none may start a formula
    (read back by Python's csv module, as a spreadsheet would split the cells)."""
    labels = ['=HYPERLINK("http://e/","x")', "+1", "-2", "@SUM(A1)", "bank", "a=b"]
    text = tables.matrix_csv(np.zeros((len(labels), 1)), labels, ["k"])
    rows = list(csv.reader(io.StringIO(text)))
    written = [row[0] for row in rows[1:]]
    assert written == ["'" + label for label in labels[:4]] + ["bank", "a=b"]


def test_label_margin_grows_with_the_widest_label_and_shrinks_when_rotated():
    short, long = ["[CLS]", "a"], ["[CLS]", "straightforward"]
    assert charts.label_margin(long) > charts.label_margin(short)
    assert charts.label_margin(["東"]) > charts.label_margin(["a"])  # a CJK character is an em
    assert charts.label_margin(long, angle=-60) < charts.label_margin(long)
    assert charts.label_margin(long, title=False) < charts.label_margin(long)
    fig = charts.attention_heatmap(np.eye(2), long, long, "t")
    assert fig.layout.margin.l == charts.label_margin(long)
    assert fig.layout.margin.b == charts.label_margin(long, angle=fig.layout.xaxis.tickangle)


def test_a_title_moves_below_the_toolbar_and_the_plot_keeps_its_size_and_place_under_it():
    """Where a title would start inside the toolbar's band, clear_of_toolbar lowers it and grows
    the top margin and the height by the same amount: the plot area is as tall as before and
    starts as far below the title. A figure with room, or no title, is left alone, and a
    second call changes nothing. (The browser check that no title starts under the toolbar
    is in tests/test_browser_devices.py, assert_phone_dark.)"""
    import plotly.graph_objects as go

    for title in ("One line", "Two<br><sup>lines</sup>"):
        fig = go.Figure(layout={"title": {"text": title}, "height": 300, "margin": {"t": 50}})
        charts.clear_of_toolbar(fig)
        grown = fig.layout.margin.t - 50
        assert grown > 0 and fig.layout.height == 300 + grown  # the plot: 250 px, as before
        assert (fig.layout.title.yref, fig.layout.title.y, fig.layout.title.yanchor) == (
            "container",
            1,
            "top",
        )
        # the title starts where the toolbar's band ends, as far above the plot as plotly's
        # "auto" placement put it: 15 px above the middle of the old margin
        assert fig.layout.margin.t - charts.TOOLBAR_PX == 50 / 2 + 15
        before = fig.to_dict()
        charts.clear_of_toolbar(fig)
        assert fig.to_dict() == before
    roomy = go.Figure(layout={"title": {"text": "t"}, "height": 300, "margin": {"t": 100}})
    untitled = go.Figure(layout={"height": 300, "margin": {"t": 20}})
    on_paper = go.Figure(layout={"title": {"text": "t", "yref": "paper", "y": 1}, "height": 300})
    for fig in (roomy, untitled, on_paper):
        before = fig.to_dict()
        assert charts.clear_of_toolbar(fig).to_dict() == before


def test_key_labels_rotate_only_when_they_do_not_fit_upright():
    words = ["time", "flies", "like"]
    assert charts.attention_heatmap(np.eye(3), words, words, "t").layout.xaxis.tickangle == 0
    many = [f"word{i}" for i in range(40)]
    assert charts.attention_heatmap(np.eye(40), many, many, "t").layout.xaxis.tickangle == -60


def test_long_heatmap_fits_its_colour_scale_and_says_so():
    """At 512 keys every weight is ~1/512: a 0-1 scale would paint the map one flat colour."""
    n = 512
    weights = np.full((n, n), 1.0 / n)
    weights[:, 0] += 0.01  # one brighter column, as a sink would be
    weights /= weights.sum(axis=1, keepdims=True)
    fig = charts.attention_heatmap(weights, ["w"] * n, ["w"] * n, "Layer 0, head 0")
    largest = max(max(row) for row in fig.data[0].z)  # the values the browser receives
    assert fig.data[0].zmax == largest < 0.05
    assert "fitted" in fig.layout.title.text and "not 0 to 1" in fig.layout.title.text
    # Labels are thinned to the room the plot has (~14 px each), not 64 piled up.
    plot_px = fig.layout.height - fig.layout.margin.t - 100
    assert len(fig.data[0].z) == n and len(fig.layout.xaxis.tickvals) * 14 <= plot_px + 100
    short = charts.attention_heatmap(np.eye(4) * 0.5, ["a"] * 4, ["a"] * 4, "t")
    assert short.data[0].zmax == 1.0 and "fitted" not in short.layout.title.text


def test_every_head_csv_has_one_row_per_layer_head_and_query():
    import csv
    import io

    rng = np.random.default_rng(2)
    attentions = rng.dirichlet(np.ones(3), size=(2, 2, 3))  # (2, 2, 3, 3)
    labels = ["0 · a,b", '1 · "q"', "2 · =1+1"]
    rows = list(csv.reader(io.StringIO(tables.every_head_csv(attentions, labels))))
    assert rows[0] == ["layer", "head", "query", *labels]
    assert len(rows) == 1 + 2 * 2 * 3
    for row in rows[1:]:
        layer, head, query = int(row[0]), int(row[1]), labels.index(row[2])
        np.testing.assert_allclose(
            [float(v) for v in row[3:]], attentions[layer, head, query], rtol=1e-5
        )


def test_head_switch_script_has_nothing_dompurify_would_take_for_a_tag():
    """DOMPurify (st.html) removes a script whose text has "<" before a letter or "/"."""
    import re

    body = display.HEAD_SWITCH_JS.removeprefix("<script>").removesuffix("</script>")
    assert re.search(r"<[/\w]", body) is None
    assert r"'\x3cb>'" in body  # the bold title tag, escaped for JavaScript


def test_figures_skip_plotly_label_overflow_measuring_and_keep_streamlit_theme():
    # preload.figures_ready (run before a page's first plotly figure) sets the default template.
    # "allow" skips plotly's per-label box measuring on every draw (half a heatmap redraw at 32
    # pieces).
    import plotly.graph_objects as go
    import plotly.io as pio

    from ui import preload

    preload.figures_ready()

    figure = go.Figure(go.Heatmap(z=[[0.1, 0.9]]))
    template = figure.layout.template
    assert template.layout.xaxis.ticklabeloverflow == "allow"
    assert template.layout.yaxis.ticklabeloverflow == "allow"
    # Streamlit's own template is still in the mix, so its light/dark theme still applies.
    assert template.layout.colorway == pio.templates["streamlit"].layout.colorway
    # One registered template: a default written "a+b" is merged again for every figure built
    # (~5 ms each, on the server).
    assert "+" not in pio.templates.default


def test_compact_cell_numbers_fit_four_characters_and_round_honestly():
    # A phone gives an 8-column map ~29 px a cell: 4 characters at 10 px. The number written
    # must still be the value, rounded to what it shows.
    from ui.charts import cell_numbers

    values = np.array([[-0.994, -0.004, 0.62], [-7.17, 10.36, -14.05], [3.0, -0.05, 0.999]])
    for max_chars, expected in (
        (4, ["-.99", ".00", ".62", "-7.2", "10.4", "-14", "3.00", "-.05", "1.00"]),
        (3, ["-1", ".00", ".62", "-7", "10", "-14", "3.0", "-.1", "1.0"]),
    ):
        layer = cell_numbers(values, "RdBu", -15, 15, 2, 10, compact=True, max_chars=max_chars)
        written = list(layer.text)
        assert written == expected, (max_chars, written)
        for text, value in zip(written, values.ravel(), strict=True):
            assert len(text) <= max_chars or text == "-14", text  # no decimal left to drop
            decimals = len(text.split(".")[1]) if "." in text else 0
            assert abs(float(text) - value) <= 0.5 * 10**-decimals + 1e-12, (text, value)
    # Without compact, two decimals everywhere, as before, but never a minus on a zero.
    full = cell_numbers(values, "RdBu", -15.0, 15.0, decimals=2, size=10)
    assert list(full.text)[:4] == ["-0.99", "0.00", "0.62", "-7.17"]


def test_signed_numbers_use_a_true_minus_and_never_print_minus_zero():
    from ui.numbers import signed

    assert signed(-0.49, 2, plus="") == "−0.49"  # U+2212, as in the app's formulas
    assert signed(0.0051) == "+0.005"
    assert signed(0.89, 2, plus="") == "0.89"
    assert signed(-0.004, 2) == signed(0.004, 2) == signed(0.0, 2) == "0.00"
    assert signed(float("nan"), 2) == "undefined"


def test_a_range_in_prose_states_the_smallest_and_largest_number():
    from ui.numbers import extremes, largest, largest_magnitude, mean_of, row_spans, span

    lengths = np.array([[3.25, 1.5, 2.0], [0.75, 9.0, 4.0]])  # (layers, tokens)
    assert extremes(lengths) == (0.75, 9.0)  # over every entry, not the first row
    assert extremes([0.2, 0.05, 0.4]) == (0.05, 0.4)
    assert span(lengths, ".1f") == "0.8–9.0"
    assert span([0.1234, 0.5], ".0%") == "12%–50%"
    assert row_spans(lengths, ".2f") == ["1.50–3.25", "0.75–9.00"]
    assert span([0.501, 0.498], ".2f") == "0.50"  # both ends read the same: said once
    assert largest([0.2, 0.7, 0.1, 0.7]) == (1, 0.7)  # the first of a tie
    assert largest_magnitude(np.array([[0.5, -3.0], [2.0, 1.0]])) == 3.0
    assert abs(mean_of(lengths) - 20.5 / 6) < 1e-12


def test_ranges_shorten_runs_of_three_or_more():
    from ui.numbers import ranges

    assert ranges([5, 0, 1, 2, 3, 7, 8]) == "0–3, 5, 7, 8"
    assert ranges(list(range(12))) == "0–11"
    assert ranges([4]) == "4"


def test_a_fitted_scale_says_so_only_when_its_top_is_not_written_1():
    """Past FITTED_SCALE_FROM keys the colours run up to the largest weight, and the note says
    so; a largest weight written 1 (a decoder's first row, exactly 1 in every head) keeps the
    scale 0 to 1 with no note, never "0 to 1, not 0 to 1"."""
    n = display_policy.FITTED_SCALE_FROM + 16
    weights = np.full((n, n), 1.0 / n)  # (n_q, n_k) even rows
    weights[3, 5] = 0.62
    assert charts.fitted_scale(weights) == (0.62, "colour scale fitted: 0 to 0.62, not 0 to 1")
    for largest in (1.0, 0.9996):  # both written "1" at three figures
        weights[0] = 0.0
        weights[0, 0] = largest
        assert charts.fitted_scale(weights) == (1.0, "")
    short = np.full((8, 8), 1.0 / 8)  # up to FITTED_SCALE_FROM keys: never fitted
    short[2, 1] = 0.3
    assert charts.fitted_scale(short) == (1.0, "")
