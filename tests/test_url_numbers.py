"""A whole number bound to the URL takes any URL value without breaking the page."""

from __future__ import annotations

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

NUMBER_PAGE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import streamlit as st
from ui import widgets
chosen = widgets.whole_number_input("Seed", 0, 99, 7, key="seed")
st.write(f"chosen={{chosen}}")
"""


def run_with(url_value: str) -> AppTest:
    at = AppTest.from_string(NUMBER_PAGE, default_timeout=30)
    at.query_params["seed"] = url_value
    at.run()
    return at


@pytest.mark.parametrize("url_value", ["1e309", "-1e309", "inf", "NaN", "abc", "", "-3", "1000"])
def test_unusable_url_values_fall_back_to_the_default(url_value):
    at = run_with(url_value)
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="seed").value == 7
    assert "seed" not in at.query_params or at.query_params["seed"] in ("", [""])


@pytest.mark.parametrize("url_value, expected", [("42", 42), ("0", 0), ("99", 99)])
def test_usable_url_values_are_kept(url_value, expected):
    at = run_with(url_value)
    assert not at.exception
    assert at.number_input(key="seed").value == expected
