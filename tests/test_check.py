"""The course's check (views/check.py): six questions before the course and after it, feedback
whose numbers are the model's, both rounds side by side, and a record to download.

The numbers are recomputed here with numpy on the model's own run (loops and formulas written
out, not core/check_numbers.py), and the record is read as a browser would: decoded, with no
markup of the visitor's surviving in it.
"""

from __future__ import annotations

import ast
import html
import re

import numpy as np
import pytest
import streamlit as st
import torch
from conftest import ROOT, assert_no_exception, open_tab, run_page
from family_pages import TEXT
from shown import shown
from test_decoder_pages import (  # noqa: F401 (fixtures)
    DECODERS,
    decoder_folders,
    run_on,
)
from test_door_pages import guarded_runs  # noqa: F401 (a fixture)
from test_hostile_pieces_headless import (  # noqa: F401 (fixtures)
    PIECE_AS_MARKDOWN,
    PIECE_AS_TAG,
    hostile_folder,
    markdown_texts,
    run_on_hostile_model,
)

from core import check_numbers
from ui import check_questions, path, predict

# Markup in the sentence: a tag, a Markdown link and bold. The tokenizer splits it into pieces,
# which the feedback names, and the record quotes the sentence itself.
HOSTILE = "The <b>cat</b> sat [on](http://x.example) the **mat** because it was tired."
FEEDBACK_ALERTS = ("success", "warning")


# ---- core/check_numbers.py against loops -----------------------------------------------
def _random_weights(shape: tuple[int, ...], seed: int) -> np.ndarray:
    scores = np.random.default_rng(seed).normal(size=shape) * 3
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)


def test_core_numbers_match_loops_over_rows_and_cells():
    layers, heads, n = 2, 3, 5
    weights = _random_weights((layers, heads, n, n), seed=1)
    sums = [float(np.float64(row).sum()) for row in weights.reshape(-1, n)]
    assert check_numbers.row_sum_range(weights) == pytest.approx((min(sums), max(sums)), abs=1e-12)
    # the cells where the key comes after the query, j > i: a transposed mask fails here
    later = [
        weights[layer, h, i, j]
        for layer in range(layers)
        for h in range(heads)
        for i in range(n)
        for j in range(i + 1, n)
    ]
    earlier = [
        weights[layer, h, i, j]
        for layer in range(layers)
        for h in range(heads)
        for i in range(n)
        for j in range(i)
    ]
    assert max(later) != max(earlier)
    assert check_numbers.largest_above_diagonal(weights) == pytest.approx(float(max(later)))
    tops = [
        [len({int(np.argmax(weights[layer, h, i])) for h in range(heads)}) for i in range(n)]
        for layer in range(layers)
    ]
    np.testing.assert_array_equal(check_numbers.distinct_top_keys(weights), tops)
    assert check_numbers.mean_top_weight(weights) == pytest.approx(
        np.mean([max(row) for row in weights.reshape(-1, n)])
    )


def test_core_spread_and_cosines_match_formulas():
    rng = np.random.default_rng(2)
    queries, keys = rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(2, 3, 4, 8))  # (L, H, n, d)
    for causal in (False, True):
        cells = [
            float(queries[layer, h, i] @ keys[layer, h, j])
            for layer in range(2)
            for h in range(3)
            for i in range(4)
            for j in range(4)
            if j <= i or not causal
        ]
        assert check_numbers.raw_score_spread(queries, keys, causal) == pytest.approx(np.std(cells))
    hidden = rng.normal(size=(3, 4, 6))  # (L + 1, n, d_model)

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        return float(a @ b / np.sqrt(a @ a) / np.sqrt(b @ b))

    expected = [
        [cosine(hidden[layer + 1, i], hidden[layer, i]) for i in range(4)] for layer in range(2)
    ]
    np.testing.assert_allclose(check_numbers.residual_cosines(hidden), expected)
    others = [
        cosine(hidden[layer, i], hidden[layer, j])
        for layer in (1, 2)
        for i in range(4)
        for j in range(4)
        if i != j
    ]
    assert check_numbers.other_piece_cosine(hidden) == pytest.approx(np.mean(others))


# ---- the page -------------------------------------------------------------------------------
def _pick(at, round_name: str, key: str, option: int):
    (widget,) = [w for w in at.radio if w.key == f"check_{round_name}_{key}"]
    return widget.set_value(option).run()


def _alerts(at) -> list[str]:
    return [element.value for kind in FEEDBACK_ALERTS for element in at.get(kind)]


def _alert_for(at, number_text: str) -> str:
    (found,) = [text for text in _alerts(at) if number_text in text]
    return found


@pytest.fixture
def captured_downloads(monkeypatch):
    """The data of every st.download_button the page draws (the button is drawn all the same)."""
    captured: list[object] = []
    original = st.download_button

    def capture(*args, **kwargs):
        captured.append(kwargs.get("data"))
        return original(*args, **kwargs)

    monkeypatch.setattr(st, "download_button", capture)
    return captured


def test_before_then_after_with_the_models_numbers_and_a_record(model, captured_downloads):
    at = run_page("views/check.py", text=HOSTILE, answered=False)
    assert_no_exception(at)
    assert [tab.label for tab in at.tabs] == [
        "Before the course",
        "After the course",
        "Your record",
    ]
    asked = [w.key for w in at.radio if w.key.startswith("check_before_")]
    assert asked == [f"check_before_{item.key}" for item in check_questions.QUESTIONS]

    # 1. The first round notes a pick and reveals nothing: a wrong and a right pick read alike.
    at = _pick(at, "before", "row_sum", 1)  # "the number of words": wrong
    at = _pick(at, "before", "causal_mask", 0)  # "0, exactly": right
    assert_no_exception(at)
    assert not _alerts(at)
    noted = [c.value for c in at.caption if c.value.startswith("Noted.")]
    assert len(noted) == 2

    # 2. A "predict, then see" question on a page of the course, answered on the way.
    at.switch_page("views/by_hand.py")
    at = open_tab(at, "hand_section", "3 · Soft lookup")
    (toy,) = [w for w in at.button_group if w.key == predict.WIDGET_PREFIX + "hand_soft_lookup"]
    toy_option = shown(toy.options[0])
    at = toy.set_value(0).run()
    at.switch_page("views/check.py")
    at.run()
    assert_no_exception(at)
    # the first round's picks are shown again, though Streamlit dropped their widgets' state
    shown_again = {w.key: w.value for w in at.radio if w.key.startswith("check_before_")}
    assert shown_again["check_before_row_sum"] == 1
    assert shown_again["check_before_causal_mask"] == 0
    assert shown_again["check_before_shuffle"] is None

    # 3. The second round: right on the rows, wrong on the mask; the feedback's numbers are the
    # model's, computed here from its runs.
    at = open_tab(at, "check_tab", "After the course")
    for key in ("row_sum", "causal_mask", "sqrt_dk", "multi_head"):
        assert f"check_after_{key}" in [w.key for w in at.radio]
    at = _pick(at, "after", "row_sum", 0)
    at = _pick(at, "after", "causal_mask", 2)
    at = _pick(at, "after", "sqrt_dk", 0)
    at = _pick(at, "after", "multi_head", 0)
    assert_no_exception(at)

    trained = model.run(HOSTILE)
    sums = trained.attentions.astype(np.float64).sum(axis=-1)  # (L, H, n)
    rows = _alert_for(at, f"sum to between {sums.min():.7f} and {sums.max():.7f}")
    assert rows.startswith("**Right.**")
    assert "Before the course: ✗ the number of words in the sentence." in rows

    masked = model.run(HOSTILE, causal=True).attentions
    n = masked.shape[-1]
    above_masked = max(float(masked[..., i, j].max()) for i in range(n) for j in range(i + 1, n))
    above_free = max(
        float(trained.attentions[..., i, j].max()) for i in range(n) for j in range(i + 1, n)
    )
    assert above_masked == 0.0  # a masked score is −∞, its weight exactly 0
    mask = _alert_for(at, f"{above_masked:.3g} with the causal mask, {above_free:.3f} without it")
    assert mask.startswith("**Wrong.** The answer is “0, exactly”.")
    assert "Before the course: ✓ 0, exactly." in mask
    # MiniLM is an encoder: its masked run is the one it never saw in training
    assert "the run with it is off-distribution: it was trained without one" in mask

    products = np.einsum("lhid,lhjd->lhij", trained.queries.astype(np.float64), trained.keys)
    spread = _alert_for(at, f"standard deviation {products.std():.2f} before dividing")
    assert f"√d_k = {np.sqrt(model.d_head):.2f}" in spread

    tops = trained.attentions.argmax(axis=-1)  # (L, H, n)
    distinct = np.mean(
        [len(set(tops[layer, :, i])) for layer in range(tops.shape[0]) for i in range(n)]
    )
    heads = _alert_for(at, f"weight {distinct:.1f} different pieces most")
    # the row it names is a piece of the hostile sentence: shown as text, never as markup
    named = re.search(r"the row of \*\*(.+?)\*\*", heads).group(1)
    assert shown(named) == trained.tokens[trained.n_tokens // 2]

    # a second pick in the second round: the verdict stays with the first, and says so
    at = _pick(at, "after", "causal_mask", 0)
    mask = _alert_for(at, f"{above_masked:.3g} with the causal mask, {above_free:.3f} without it")
    assert mask.startswith("**Wrong.**")
    assert "You have since picked “0, exactly”; your first pick," in mask
    assert "is the one counted." in mask

    # 4. Both rounds side by side, judged now that the answers were given.
    at = open_tab(at, "check_tab", "Your record")
    assert_no_exception(at)
    table = next(m.value for m in at.markdown if m.value.startswith("| Question"))
    assert (
        "| A softmax row | :red[✗] the number of words in the sentence | :green[✓] 1, in every row |"
        in table
    )
    assert (
        "| The causal mask | :green[✓] 0, exactly | :red[✗] the weights below the diagonal, mirrored |"
        in table
    )
    assert "| Order without positions | — | — |" in table
    # two were answered before the course, one of them right
    assert any(
        "Of the 4 questions answered after the course: **1** right before it, **3** right after."
        in m.value
        for m in at.markdown
    )

    # the first round cannot be changed once its answer was revealed, only where it was not
    at = open_tab(at, "check_tab", "Before the course")
    locked = {w.key: w.disabled for w in at.radio if w.key.startswith("check_before_")}
    assert locked["check_before_row_sum"] and locked["check_before_multi_head"]
    assert not locked["check_before_shuffle"]

    # 5. The record: the answers of both rounds and of the page, the sentence as text only.
    record = captured_downloads[-1]
    assert isinstance(record, str)
    assert "<b>cat" not in record and "**mat" not in record and "](http" not in record
    assert "<script" not in record.lower()
    decoded = html.unescape(re.sub(r"<[^>]+>", " ", record)).replace("\u2060", "")
    assert HOSTILE in decoded  # the sentence, character for character
    for text in (
        "✗ the number of words in the sentence",
        "✓ 1, in every row",
        "✓ 0, exactly",
        "✗ the weights below the diagonal, mirrored",
        f"{sums.min():.7f}",
        "0 · Attention by hand",
        toy_option,
    ):
        assert text in decoded, text


def test_the_course_ends_on_the_checks_second_round():
    """The last page's way on opens the check on the tab of its second round, by the label the
    view gives that tab; the tabs' URL key is the one the link sets."""
    tree = ast.parse((ROOT / path.CHECK_FILE).read_text())
    (sections,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SECTIONS"
    ]
    labels = [key.value for key in sections.keys]
    assert path.CHECK_AFTER_TAB in labels
    (tabs,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "section_tabs"
    ]
    assert {k.arg: k.value.value for k in tabs.keywords} == {"key": path.CHECK_TAB_KEY}
    assert path.STEPS[1].file == path.CHECK_FILE  # the Overview's way into the course
    assert path.neighbours(path.STEPS[-1])[1] is None


def test_the_last_page_links_to_the_second_round(monkeypatch):
    links = []
    monkeypatch.setattr(st, "page_link", lambda page, **kwargs: links.append((page, kwargs)))
    path.previous_next(path.STEPS[-1])
    page, kwargs = links[-1]
    assert page == path.CHECK_FILE
    assert kwargs["label"] == "End of the course: the check again"
    assert kwargs["query_params"] == {path.CHECK_TAB_KEY: path.CHECK_AFTER_TAB}


def _masked_shuffle_gap(folder) -> float:
    """max |A − B| over layers and heads, positions off: A under the causal mask, B the shuffle
    (seed 0, as the check) put back, computed as the original sentence under the mask by which
    piece a may read piece b when b comes no later than a in the shuffled sentence."""
    from core import positional
    from core.models import load_folder

    model = load_folder(str(folder))
    trace = model.run(TEXT)
    ids = np.asarray(trace.input_ids)
    order = positional.shuffle_order(len(ids), 0, np.asarray(trace.segments), trace.special)
    place = np.argsort(order)  # place[a]: where piece a stands in the shuffled sentence
    shuffled_mask = torch.from_numpy(place[None, :] <= place[:, None])  # (n, n) [a, b]
    causal_mask = torch.from_numpy(np.tril(np.ones((len(ids), len(ids)), dtype=bool)))
    a, b = (
        positional.attention_from_ids(model, ids, positions=False, attention_mask=mask)
        for mask in (causal_mask, shuffled_mask)
    )
    return float(np.abs(a.astype(np.float64) - b).max())


@pytest.mark.parametrize("family", DECODERS)
def test_a_decoder_answers_from_its_own_runs(decoder_folders, local_folders, family):  # noqa: F811
    """A decoder's check: its mask is its own (removing it is off-distribution), and every
    question's reasoned answer is right, and the word-order experiment measures it: without
    positions (Llama's rotary turn removed too) the shuffle changes nothing but rounding."""
    at = open_tab(
        run_on(decoder_folders[family], "views/check.py"), "check_tab", "After the course"
    )
    assert_no_exception(at)
    for item in check_questions.QUESTIONS:  # the shuffle under the mask: "different" (1)
        at = _pick(at, "after", item.key, 1 if item.key == "shuffle" else 0)
    assert_no_exception(at)
    verdicts = _alerts(at)
    assert len(verdicts) == len(check_questions.QUESTIONS)
    assert all(text.startswith("**Right.**") for text in verdicts), verdicts
    mask = _alert_for(at, "with the causal mask")
    assert "0 with the causal mask" in mask
    assert "the run without it is off-distribution: it was trained with the mask" in mask
    # the shuffle ran as the decoder was trained, under its mask, and says so; the gap is the
    # one an independent run gives: without positions a run of the shuffle, put back, is the
    # original sentence read under the shuffled sentence's mask
    # √d_k: the reason claims a spread of 1 after dividing only for unit-variance components,
    # beside this model's own spread, which need not be 1
    sqrt_dk = _alert_for(at, "before dividing")
    after = re.search(r"before dividing, (\S+) after", sqrt_dk)
    assert after and float(after.group(1)) != pytest.approx(1.0, abs=0.05), sqrt_dk
    assert "Dividing brings it back to 1" not in sqrt_dk
    assert "need not have them" in sqrt_dk
    shuffle = _alert_for(at, "pieces shuffled")
    assert "its causal mask kept as trained" in shuffle and "order of its own" in shuffle
    gap = re.search(r"head: (\S+) without positions", shuffle)
    assert gap and abs(float(gap.group(1)) - _masked_shuffle_gap(decoder_folders[family])) < 0.006


def test_a_hostile_tokenizers_piece_stays_text_in_feedback_and_record(
    hostile_folder,  # noqa: F811
    local_folders,
    captured_downloads,
):
    """A custom tokenizer whose piece is an <img onerror> tag, a Markdown link and bold: the
    feedback that names pieces, and the record, show it as text."""
    at = run_on_hostile_model(hostile_folder, "views/check.py", {"check_tab": "After the course"})
    at = _pick(at, "after", "multi_head", 0)
    assert_no_exception(at)
    heads = _alert_for(at, "different pieces most")
    assert "onerror" in heads  # precondition: the feedback names the hostile piece
    for text in markdown_texts(at):
        assert not PIECE_AS_TAG.search(text), text[:200]
        assert not any(raw in text for raw in PIECE_AS_MARKDOWN), text[:200]
    at = open_tab(at, "check_tab", "Your record")
    record = captured_downloads[-1]
    assert "onerror" in record and not PIECE_AS_TAG.search(record)
    assert not any(raw in record for raw in PIECE_AS_MARKDOWN)


def test_the_checks_runs_go_through_the_door(guarded_runs):  # noqa: F811
    """Every run the check makes (trained, mask flipped, without √d_k, the shuffles) is admitted
    by ui/door.py, as on every other page."""
    runs, outside = guarded_runs
    at = run_page(path.CHECK_FILE, text="Time flies like an arrow.")
    for label in ("After the course", "Your record"):
        at = open_tab(at, "check_tab", label)
        assert_no_exception(at)
    assert {"run", "run_with_hooks"} <= set(runs)  # the shuffles run through the hooked path
    assert outside == [], f"model steps outside the door: {sorted(set(outside))}"


def test_a_first_round_code_brings_the_first_round_back_after_a_reload(model):
    """A fresh session (a reloaded tab) types the code the first round showed: the second
    round's feedback and the table set the first answers back beside the new ones."""
    at = run_page(path.CHECK_FILE, text="Time flies like an arrow.")
    at = _pick(at, "before", "row_sum", 1)
    at = _pick(at, "before", "shuffle", 2)
    (code_line,) = [m.value for m in at.markdown if m.value.startswith("Your first-round code")]
    code = re.search(r"`([a-z-]+)`", code_line).group(1)
    assert code == "b-c---"

    fresh = run_page(path.CHECK_FILE, text="Time flies like an arrow.")
    fresh = open_tab(fresh, "check_tab", "After the course")
    fresh.text_input(key="check_code").input("BX").run()  # not a code of this check
    assert any("not a code of this check" in c.value for c in fresh.caption)
    fresh.text_input(key="check_code").input(code.upper()).run()
    fresh = _pick(fresh, "after", "row_sum", 0)
    assert_no_exception(fresh)
    assert "Before the course: ✗ the number of words in the sentence." in _alert_for(
        fresh, "sum to between"
    )
    fresh = open_tab(fresh, "check_tab", "Your record")
    table = next(m.value for m in fresh.markdown if m.value.startswith("| Question"))
    assert "| Order without positions | answered | — |" in table
    fresh = open_tab(fresh, "check_tab", "Before the course")
    picked = {w.key: w.value for w in fresh.radio if w.key.startswith("check_before_")}
    assert picked["check_before_shuffle"] == 2 and picked["check_before_causal_mask"] is None


@pytest.mark.parametrize(
    "text",
    ["", "abc", "a-----x", "zzzzzz", "e-----", "[x](y)", "a" * 10_000, "<b>a</b>"],
)
def test_anything_but_a_code_of_this_check_is_refused(text):
    options = {item.key: ("p", "q", "r", "s") for item in check_questions.QUESTIONS}
    questions = {key: type("Q", (), {"options": opts})() for key, opts in options.items()}
    assert check_questions.read_code(text, questions) is None
    assert check_questions.read_code(" dA-b-c ", questions) == {
        "row_sum": 3,
        "causal_mask": 0,
        "sqrt_dk": 1,
        "residual": 2,
    }
