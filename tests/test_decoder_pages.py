"""Every page and every tab with a tiny random decoder loaded (GPT-2, the Llama family).

The checkpoints are built here (tests/tiny_families.py) and loaded as a local user would: a
folder typed into the model picker, with ATTENTION_EXPLORER_LOCAL_FOLDERS=1 and the Load button
pressed. Where a page shows what only an encoder has (a sentence vector, a learned table) it
must say in one line what it shows for a decoder. That every page and tab draws with each
family is read from the one render per family (tests/test_page_facts.py).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import assert_no_exception, drawn_figures, page_paths, run_page, takeaway_text
from family_pages import TEXT, family_folder, run_on
from shown import sent_array
from streamlit.testing.v1 import AppTest
from tiny_families import write_tiny_family

from ui import display_policy, models, traces

DECODERS = ("gpt2", "llama")


@pytest.fixture(scope="module")
def decoder_folders():
    """family -> a tiny random checkpoint folder, built once per process (tests/family_pages.py:
    the same folders the shared renders load)."""
    return {family: family_folder(family) for family in DECODERS}


def texts(at: AppTest) -> str:
    kinds = ("markdown", "caption", "info", "warning", "subheader", "latex")
    return " ".join(str(element.value) for kind in kinds for element in at.get(kind))


def assert_decoder_loaded(at: AppTest) -> None:
    assert not [e.value for e in at.error], "the decoder was not loaded"
    labels = [toggle.label for toggle in at.sidebar.toggle]
    assert "Remove the causal mask (off-distribution)" in labels and "Causal mask" not in labels


# A line each page says for a decoder where it would show what only an encoder has (or what
# the decoder adds): (page, tab key and label or None, phrase).
DECODER_NOTES = [
    ("views/overview.py", None, "and what each switch does to that prediction"),
    ("views/information_flow.py", None, "is a decoder: it was trained to predict the next"),
    ("views/information_flow.py", ("ex_section", "2 · Rollout"), "the last position"),
    ("views/information_flow.py", ("ex_section", "5 · Lens"), "The logit lens"),
    ("views/explanations.py", None, "is a decoder: what it outputs is the next word piece"),
    ("views/scaling_masking.py", ("sm_section", "3 · Switches"), "trained with the mask"),
]


@pytest.mark.parametrize("family", DECODERS)
@pytest.mark.parametrize("page, tab, phrase", DECODER_NOTES)
def test_a_page_says_what_it_shows_for_a_decoder(
    decoder_folders, local_folders, family, page, tab, phrase
):
    state = {tab[0]: tab[1]} if tab else {}
    at = run_on(decoder_folders[family], page, state)
    assert_no_exception(at)
    assert_decoder_loaded(at)
    assert phrase in texts(at), f"{page}: no line for a decoder"


def test_the_positional_page_shows_the_models_own_scheme(decoder_folders, local_folders):
    gpt2 = run_on(decoder_folders["gpt2"], "views/positional.py")
    assert "adds a learned position table" in texts(gpt2)
    llama = run_on(decoder_folders["llama"], "views/positional.py", {"pos_section": "3 · Learned"})
    assert_no_exception(llama)
    shown = texts(llama)
    assert "has rotary positions" in shown and "rotary positions" in shown
    # both checks are written with their measured errors, and both are rounding-sized
    errors = [float(e) for e in re.findall(r"max \|Δ\| = \*\*([0-9.e+-]+)\*\*", shown)]
    assert len(errors) == 2 and max(errors) < 1e-4, errors


def test_heatmaps_draw_the_causal_triangle_as_masked(decoder_folders, local_folders):
    """The head's grid (HTML cells) lays one hatched strip per query row over exactly the keys
    after it: key j > query i, the strict upper triangle, and nothing on or below the diagonal."""
    at = run_on(decoder_folders["gpt2"], "views/heatmaps.py")
    assert_no_exception(at)
    grid = next(e.proto.body for e in at.get("html") if 'data-figure="hm_heatmap"' in e.proto.body)
    n = int(re.search(r'data-pieces="(\d+)"', grid).group(1))  # the grid's n × n cells
    assert n >= 3  # precondition: a triangle to see
    # (row r, column c): query r - 2 and key c - 2, the labels taking row 1 and column 1
    strips = [
        (int(row) - 2, int(column) - 2, int(span))  # (query, first key hidden, how many)
        for row, column, span in re.findall(
            r'class="ae-masked"[^>]*grid-row:(\d+);grid-column:(\d+) / span (\d+)', grid
        )
    ]
    hidden = np.zeros((n, n), dtype=bool)
    for query, first_key, count in strips:
        hidden[query, first_key : first_key + count] = True
    assert np.array_equal(hidden, np.triu(np.ones((n, n), dtype=bool), k=1))


def test_the_overview_draws_the_next_word_panel_and_the_masked_triangle(
    decoder_folders, local_folders
):
    at = run_on(decoder_folders["llama"], "views/overview.py")
    assert_no_exception(at)
    assert {"overview_next_trained", "overview_next_switches"} <= drawn_figures(at)
    grid = next(e.proto.body for e in at.get("html") if 'class="ae-heatmap' in e.proto.body)
    assert "ae-masked" in grid  # the hatched strips over the hidden keys


@pytest.mark.parametrize("unmask", [False, True])
def test_the_overview_takeaway_says_which_pieces_a_row_weighs(
    decoder_folders, local_folders, unmask
):
    """Under the causal mask row i weighs pieces 0..i, not all of them: the takeaway says the
    rows the run had, and with the mask removed it says all of them."""
    at = run_on(decoder_folders["gpt2"], "views/overview.py", {"unmask": True} if unmask else None)
    assert_no_exception(at)
    inputs, _ = at.session_state["_page_context"]
    assert inputs.causal is not unmask
    said = takeaway_text(at)
    masked = "a row of weights over itself and the pieces before it;"
    whole = "a row of weights over all of them;"
    assert (whole if unmask else masked) in said and (masked if unmask else whole) not in said
    rows = "token *i* and the tokens before it sum to 1" if not unmask else "all tokens sum to 1"
    assert rows in texts(at)
    # the first paragraph: a decoder never looks ahead, unless this run removed its mask
    assert ("never looks ahead" in texts(at)) is not unmask
    assert ("removes that mask in this run" in texts(at)) is unmask


def test_the_overview_says_an_encoders_run_under_the_causal_mask_looks_back_only():
    """MiniLM with the sidebar's causal mask on: the first paragraph says this run lets each
    token look only at itself and the tokens before it, as the takeaway's rows do."""
    at = run_page(page_paths()[0], state={"causal": True})
    assert_no_exception(at)
    inputs, _ = at.session_state["_page_context"]
    assert inputs.causal
    assert "on in this run, lets each look only at itself and the tokens before it" in texts(at)
    assert "a row of weights over itself and the pieces before it;" in takeaway_text(at)


def test_an_encoder_says_why_it_has_no_next_word_panel():
    at = run_page(page_paths()[0])
    assert_no_exception(at)
    assert "is an encoder: it reads the text both ways" in texts(at)
    assert not {"overview_next_trained", "overview_next_switches"} & drawn_figures(at)
    labels = [toggle.label for toggle in at.sidebar.toggle]
    assert "Causal mask" in labels and "Remove the causal mask (off-distribution)" not in labels


def test_the_sidebar_switch_removes_a_decoders_own_mask(decoder_folders, local_folders):
    folder = decoder_folders["gpt2"]
    as_trained = run_on(folder, "views/information_flow.py")
    inputs, _ = as_trained.session_state["_page_context"]
    assert inputs.causal and inputs.causal_by_nature and inputs.as_trained
    assert not [w.value for w in as_trained.warning if "training" in w.value]
    removed = run_on(folder, "views/information_flow.py", {"unmask": True})
    assert_no_exception(removed)
    inputs, _ = removed.session_state["_page_context"]
    assert not inputs.causal and not inputs.as_trained
    assert any("The causal mask is removed" in w.value for w in removed.warning)


def test_removing_heads_of_a_decoder_shows_the_next_piece_with_and_without_them(
    decoder_folders, local_folders
):
    at = run_on(
        decoder_folders["llama"],
        "views/multi_head.py",
        {"mh_section": "4 · Remove heads", "mh_ablate_layer": True},
    )
    assert_no_exception(at)
    assert "mh_ablation_next" in drawn_figures(at)
    assert "with and without these heads" in texts(at)


@pytest.mark.parametrize(
    "family, framing", [("gpt2", "adds no special piece"), ("llama", "before the first piece")]
)
def test_the_overview_says_how_this_tokenizer_marks_and_frames_pieces(
    decoder_folders, local_folders, family, framing
):
    """Not BERT's ## and [CLS] … [SEP]: the loaded model's own scheme, read from its Trace."""
    shown_text = texts(run_on(decoder_folders[family], "views/overview.py"))
    assert "carries the space before it, shown here as ␣" in shown_text
    assert framing in shown_text and "##" not in shown_text and "CLS" not in shown_text


def test_heatmaps_speak_of_this_models_special_pieces(decoder_folders, local_folders):
    """GPT-2's tokenizer adds no special piece: the hide switch is greyed out and says why, and
    the sink sentence says so instead of counting heads on [CLS] and [SEP]; a Llama's <s> is
    the one piece named."""
    gpt2 = run_on(decoder_folders["gpt2"], "views/heatmaps.py")
    switch = gpt2.toggle(key="hm_renorm")
    assert switch.disabled and "adds no special pieces" in switch.help
    shown = texts(gpt2)
    assert "adds no special pieces, so no head can park" in shown and "CLS" not in shown
    llama = run_on(decoder_folders["llama"], "views/heatmaps.py")
    assert not llama.toggle(key="hm_renorm").disabled
    assert "half their weight on &#60;s&#62;." in texts(llama)


def test_a_deep_models_sinks_are_drawn_as_lines(tmp_path_factory, local_folders):
    """Past display_policy.BARS_UP_TO layers (SmolLM2-135M has 30) Heatmaps draws the weight on
    the first piece as one line over the layers: its points are the mean weight of every head
    and query on that key, computed here from the page's own Trace by a loop."""

    n_layers = display_policy.BARS_UP_TO + 2
    folder = write_tiny_family(
        tmp_path_factory.mktemp("deep") / "model", "llama", seed=3, n_layers=n_layers,
        d_model=16, n_heads=2, n_kv_heads=1, d_ff=16,
    )  # fmt: skip
    at = run_on(folder, "views/heatmaps.py")
    assert_no_exception(at)
    chart = next(chart for chart in at.get("plotly_chart") if chart.key == "hm_sinks")
    lines = json.loads(chart.proto.spec)["data"]
    first_line = sent_array(lines[0]["y"])
    trace = traces.trace(models.load_model(str(folder)), TEXT)
    # a line for the other special pieces only where the tokenizer adds one after the first
    assert len(lines) == 1 + any(trace.special[1:]) and first_line.shape == (n_layers,)
    assert lines[0]["name"] == "on &#60;s&#62;"  # the piece's name, escaped once
    rows = [q for q in range(1, len(trace.tokens)) if not trace.special[q]]  # real pieces after 0
    for layer in range(n_layers):
        weights = trace.attentions[layer]  # (H, n, n)
        on_first = [weights[h, q, 0] for h in range(weights.shape[0]) for q in rows]
        assert abs(first_line[layer] - float(np.mean(on_first))) < 1e-3
