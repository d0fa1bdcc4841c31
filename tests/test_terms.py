"""Terms used before their page (ui/terms.py): each is defined where it is used, links to the
page that teaches it, and that page comes later on the path (or is the same page, further down)."""

from __future__ import annotations

import ast
import re

import pytest
from conftest import ROOT, assert_no_exception, run_page

from ui import path, terms


def uses_of_ahead() -> list[tuple[str, str]]:
    """(view file, term) for every terms.ahead("…") call in views/, read from the source."""
    found = []
    for view in sorted((ROOT / "views").glob("*.py")):
        for call in ast.walk(ast.parse(view.read_text())):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "ahead"
            ):
                found += [(f"views/{view.name}", arg.value) for arg in call.args]
    return found


USES = uses_of_ahead()


def test_the_pages_define_terms_ahead_of_their_page():
    assert len(USES) >= 10, USES  # precondition: the views call it
    assert {term for _, term in USES} == set(terms.TERMS), "a term defined and never used"


@pytest.mark.parametrize("view, term", USES, ids=[f"{v[6:-3]}-{t}" for v, t in USES])
def test_a_term_is_taught_later_on_the_path_or_further_down_the_same_page(view, term):
    used = path.STEPS.index(path.step_of(view))
    taught = path.STEPS.index(path.step_of(terms.TERMS[term].taught_in))
    assert taught >= used, f"{term} is used on {view} after the page that teaches it"


@pytest.mark.parametrize("name", sorted(terms.TERMS))
def test_the_section_named_is_on_the_page_that_teaches_it(name):
    term = terms.TERMS[name]
    source = (ROOT / term.taught_in).read_text()
    if term.where.startswith("section "):  # a numbered heading or tab: "3 · …"
        number = term.where.removeprefix("section ")
        assert re.search(rf'"{number} · ', source), f"{term.taught_in} has no section {number}"
    elif term.where.startswith("in tab "):  # a tab's own label
        assert f'"{term.where.removeprefix("in tab ")}"' in source, term.where


def test_a_term_taught_further_down_the_page_is_not_a_link_to_itself():
    here = terms.ahead("W_O", here="views/multi_head.py")
    assert "Taught further down this page, in tab 2 · Back to one vector." in here
    assert "](" not in here
    assert "](multi_head)" in terms.ahead("W_O")


def test_the_overview_shows_the_definitions_with_links():
    at = run_page("views/overview.py")
    assert_no_exception(at)
    helps = [m.proto.help for m in at.markdown if m.proto.help]
    assert len(helps) == 3, helps  # the head, the word pieces ([CLS], [SEP]), the model line
    scaling = path.step_of("views/scaling_masking.py")
    assert "**√d_k**: d_k is the length of a query" in helps[0]
    assert f"Taught on [{scaling.title}](scaling_masking), section 2." in helps[0]
