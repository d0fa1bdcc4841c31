"""The sidebar's switches restated at the top of the pages that read them (ui/page_switches.py)."""

from __future__ import annotations

import pytest
from conftest import assert_no_exception, run_page
from streamlit.testing.v1 import AppTest

from ui import page_switches
from ui.sidebar import Inputs


def _inputs(scale: bool, causal: bool, decoder: bool, words: bool = False) -> Inputs:
    return Inputs("t", None, "m", scale, causal, words, causal_by_nature=decoder)


# (scale, causal mask applies, decoder) -> what the line says of the two, and which are bold
CASES = {
    (True, False, False): ["√d_k scaling on", "no causal mask"],
    (False, False, False): ["**🧪 √d_k scaling off**", "no causal mask"],
    (True, True, False): ["√d_k scaling on", "**🧪 causal mask on**"],
    (True, True, True): ["√d_k scaling on", "causal mask kept"],
    (False, False, True): ["**🧪 √d_k scaling off**", "**🧪 causal mask removed**"],
}


@pytest.mark.parametrize(("switches", "said"), list(CASES.items()))
def test_the_line_says_each_switch_and_marks_what_the_model_never_met(switches, said):
    scale, causal, decoder = switches
    line = page_switches.line(_inputs(scale, causal, decoder), word_level_page=False)
    assert line == "Set in the sidebar for this page: " + " · ".join(said)
    # as trained exactly when nothing is marked, as the pages' own warning decides it
    assert ("🧪" in line) == (not _inputs(scale, causal, decoder).as_trained)


def test_words_are_named_only_where_the_page_draws_pieces():
    inputs = _inputs(True, False, False, words=True)
    assert page_switches.line(inputs, word_level_page=True).endswith(" · shown as words")
    assert "words" not in page_switches.line(inputs, word_level_page=False)


def _switch_line(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("Set in the sidebar for this page")]


def test_a_page_that_reads_the_switches_states_them_near_its_top():
    at = run_page("views/heatmaps.py")
    at.toggle(key="scale").set_value(False).run()
    assert_no_exception(at)
    assert _switch_line(at) == [
        "Set in the sidebar for this page: **🧪 √d_k scaling off** · no causal mask · "
        "shown as word pieces"
    ]
    main = [getattr(e, "value", "") for e in at.main]
    assert main.index(_switch_line(at)[0]) < main.index("6 · Attention heatmaps")  # above it


def test_a_page_with_its_own_switches_does_not_claim_the_sidebars():
    at = run_page("views/by_hand.py")
    assert_no_exception(at)
    assert _switch_line(at) == []
