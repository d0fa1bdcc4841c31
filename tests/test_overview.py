"""The Overview page: the live check against transformers, and a model that cannot be loaded."""

from __future__ import annotations

import time

from conftest import ROOT, assert_no_exception, run_page
from streamlit.testing.v1 import AppTest

OVERVIEW = "views/overview.py"


def test_verify_against_transformers_reports_every_layer():
    at = run_page(OVERVIEW, text="The river bank flooded.")
    at.button[0].click().run()
    assert_no_exception(at)
    report = " ".join(s.value for s in at.success)
    assert "Compared 6 layers" in report and "7 hidden states" in report
    differences = [
        float(word.rstrip(".,")) for word in report.split() if "e" in word and word[0].isdigit()
    ]
    assert len(differences) == 2 and max(differences) < 1e-5


def test_unloadable_model_is_reported_and_the_bundled_model_takes_over():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["model"] = "bert-base-uncased"
    start = time.monotonic()
    at.run()
    elapsed = time.monotonic() - start
    assert_no_exception(at)
    errors = " ".join(e.value for e in at.error)
    assert "bert-base-uncased" in errors and "bundled" in errors
    assert at.get("plotly_chart"), "the page still draws on the bundled model"
    assert elapsed < 10, f"a dead hub must not stall the page ({elapsed:.1f} s)"


def test_switches_hide_the_check_when_the_model_is_not_bert_as_trained():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["causal"] = True
    at.run()
    assert not at.button, "the check compares default switches only"
    assert any("scaling on" in c.value for c in at.caption)
