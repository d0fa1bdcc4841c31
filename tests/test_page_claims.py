"""Claims a page makes, read from what it renders and checked against a fact or a number the test
computes on its own: where the norms sit, what a stage of training saw, which sense is closer,
how much variance a PCA plane keeps, how many tabs a page has, what is off-distribution, and how
firmly a paper's claim is put."""

from __future__ import annotations

import pytest
from conftest import ROOT, assert_no_exception, run_page
from streamlit.testing.v1 import AppTest
from tiny_families import write_tiny_family

# Where each family puts its norms, written here from the papers, not read from core/weights.py:
# BERT normalises after each residual sum (Devlin et al., 2019, after Vaswani et al., 2017);
# GPT-2 moved the norm to each sublayer's input (Radford et al., 2019); Llama does the same.
NORM_POSITION = {"minilm": "post", "gpt2": "pre", "llama": "pre"}
POST_PHRASE = "every LayerNorm sits on the stream itself"
PRE_PHRASE = "the error signal has a path along the identity"

BANK_SENTENCES = {  # four of the Embeddings page's example sentences, with their senses
    "I sat on the bank of the river and watched the water.": "river",
    "The bank raised its interest rates again.": "money",
    "We pulled the canoe up onto the muddy bank.": "river",
    "She paid the cheque in at the bank on Monday.": "money",
}


def texts(at: AppTest, kinds=("markdown", "caption", "info", "warning")) -> list[str]:
    return [str(element.value) for kind in kinds for element in at.get(kind)]


def residual_paragraph(at: AppTest) -> str:
    (paragraph,) = [t for t in texts(at, ("markdown",)) if t.startswith("**The residual stream**")]
    return paragraph


# ---- 5 · Inside a layer: the error signal's path follows the norm placement -------------------


def test_inside_a_layer_says_the_norms_sit_on_the_stream_of_a_post_norm_model():
    assert NORM_POSITION["minilm"] == "post"
    at = run_page("views/inside_layer.py")
    assert_no_exception(at)
    paragraph = residual_paragraph(at)
    assert POST_PHRASE in paragraph and "not along a bare identity" in paragraph
    assert PRE_PHRASE not in paragraph


@pytest.fixture()
def local_folders(monkeypatch):
    from ui import models

    monkeypatch.setenv("ATTENTION_EXPLORER_LOCAL_FOLDERS", "1")
    models.policy.clear()
    yield
    models.policy.clear()


def run_on_folder(folder, page: str) -> AppTest:
    """app.py on `page` with a local checkpoint loaded, as after its Load button."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["model"] = "other"
    at.session_state["custom_model"] = str(folder)
    at.session_state["_confirmed_custom_model"] = str(folder)
    at.run()
    at.switch_page(page)
    return at.run()


def test_inside_a_layer_gives_a_pre_norm_model_the_identity_path(tmp_path, local_folders):
    assert NORM_POSITION["gpt2"] == "pre"
    folder = write_tiny_family(tmp_path / "model", "gpt2", seed=7)
    at = run_on_folder(folder, "views/inside_layer.py")
    assert_no_exception(at)
    assert not [e.value for e in at.error], "the tiny GPT-2 was not loaded"
    paragraph = residual_paragraph(at)
    assert PRE_PHRASE in paragraph and "the one norm after the last layer" in paragraph
    assert POST_PHRASE not in paragraph


# ---- 7 · Head view: what the distillation saw is not claimed --------------------------------


def test_head_view_does_not_claim_what_the_distillation_never_trained():
    at = run_page("views/head_view.py")
    assert_no_exception(at)
    (note,) = [t for t in texts(at, ("info",)) if "pre-trained on sentence pairs" in t]
    assert "never trained for" not in note
    assert "whether the distillation did is not known" in note and "untested" in note
