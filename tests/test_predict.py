"""Predict, then see: every learning page's questions, answered wrongly and rightly in AppTest.

For each question the model's answer is recomputed here, independently of ui/ (numpy on the
model's own run, or core), and the page must call exactly that option right and every other
one wrong. Then the page's input changes (the sentence, a slider) and the answer must follow,
and the session's progress (ui.predict.progress) must count what was answered.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from conftest import ROOT, answer_open_questions, assert_no_exception, run_page
from shown import html_figures, shown
from test_hostile_pieces_headless import (  # noqa: F401 (fixtures)
    RAW_MARKUP,
    hostile_folder,
    run_on_hostile_model,
)

import core
from core import (
    by_hand,
    context,
    inside_layer,
    positional,
)
from ui import predict, predict_answers

RIVER = "The river bank flooded after the storm."
MONEY = "I deposited money at the bank."


# ---- independent answers: the model's own numbers, computed here --------------------------
def _labels(tokens: list[str] | tuple[str, ...], positions: set[int]) -> set[str]:
    """Options as a learner reads them: the piece, with its position when it occurs twice."""
    tokens = list(tokens)
    return {tokens[j] if tokens.count(tokens[j]) == 1 else f"{tokens[j]} · {j}" for j in positions}


def _argmax(values: np.ndarray, allowed: list[int] | None = None) -> set[int]:
    allowed = list(range(len(values))) if allowed is None else allowed
    return {max(allowed, key=lambda j: values[j])}


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def _entropy_bits(weights: np.ndarray) -> np.ndarray:
    weights = np.asarray(weights, np.float64)
    return -(weights * np.log2(np.where(weights > 0, weights, 1))).sum(-1)


def hand_soft_lookup(model, state: dict) -> set[str]:
    keys = np.array(list(by_hand.TOY_VECTORS.values()), dtype=np.float64)  # (n, 4)
    scores = keys @ np.asarray(by_hand.TOY_VECTORS[state["hand_query"]], dtype=np.float64)
    weights = _softmax(state["hand_sharp"] * scores)
    if np.allclose(weights, weights[0], atol=5e-4):
        return {predict_answers.SPREAD_OPTIONS[0]}
    return {predict_answers.SPREAD_OPTIONS[2 if weights.max() >= 0.95 else 1]}


def _static(model, text: str) -> tuple[tuple[str, ...], np.ndarray]:
    sentence = context.static_sentence(model, text)  # the table's rows, no [CLS]/[SEP]
    return sentence.tokens, np.asarray(sentence.vectors, np.float64)


def ctx_strongest(model, state: dict) -> set[str]:
    tokens, x = _static(model, state["ctx_a"])
    other, _ = _static(model, state["ctx_b"])
    row = next(i for i, t in enumerate(tokens) if t not in other)  # the page opens on the shared
    scores = x @ x.T
    return _labels(tokens, _argmax(scores[row], [j for j in range(len(tokens)) if j != row]))


def qkv_weight_ratio(model, state: dict) -> set[str]:
    trace = model.run(state["text"])  # the trained head: the model's own attention
    row = np.sort(trace.attentions[state["layer"], state["head"], 1].astype(np.float64))  # piece 1
    ratio = row[-1] / row[-2]  # the top key's weight over the runner-up's
    return {label for label, low, high in predict_answers.RATIO_BUCKETS if low <= ratio < high}


def qkv_same_input(model, state: dict) -> set[str]:
    runs = [model.run(text) for text in ("money bank grows", "river bank flows")]
    outputs = [run.attentions[0] @ run.values[0] for run in runs]  # (H, n, d_head) each
    at = [run.tokens.index("bank") for run in runs]
    cosines = [
        _cosine(outputs[0][head, at[0]], outputs[1][head, at[1]]) for head in range(model.n_heads)
    ]
    apart = round(float(min(cosines)), 3) < 1.0
    return {
        "no: some heads pull them apart"
        if apart
        else "yes: the same vector in gives the same vector out"
    }


def sm_first_row(model, state: dict) -> set[str]:
    trace = model.run(state["text"])
    scores = trace.scores[state["layer"], state["head"]].astype(np.float64)  # (n, n)
    n = scores.shape[0]
    masked = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)  # j ≤ i only
    first = _softmax(masked)[0, 0]
    values = {
        "all of it: 1": 1.0,
        f"an even share: 1/{n}": 1 / n,
        "what it took without the mask": _softmax(scores)[0, 0],  # the same scores, no mask
    }
    return {label for label, value in values.items() if f"{value:.3f}" == f"{first:.3f}"}


def quoted_rows(model, trace) -> set[int]:
    """The rows a learner has been shown before Multi-head's tab 1: the Overview's strongest
    link between two different ordinary pieces (its query), and the first tab's row, where the
    sentence's best previous- and next-token heads both hold best (the first tab's own rule)."""
    from core import head_roles

    ordinary = ~np.asarray(trace.special)
    weights = np.where(ordinary[:, None] & ordinary[None, :], trace.attentions, -1.0)
    n = trace.n_tokens
    weights[..., np.arange(n), np.arange(n)] = -1.0  # a piece's weight on itself is no link
    overview = int(np.unravel_index(np.argmax(weights), weights.shape)[2])
    previous = head_roles.best_on_sentence(
        trace.attentions, trace.tokens, "previous", trace.special
    )
    after = head_roles.best_on_sentence(
        trace.attentions, trace.tokens, "next", trace.special, previous[:2]
    )
    first_tab = head_roles.neighbour_focus(
        trace.attentions[previous[:2]], trace.attentions[after[:2]], trace.special, "next"
    )
    return {overview, first_tab}


def mh_previous_row(model, state: dict) -> set[str]:
    trace = model.run(state["text"])
    weights = trace.attentions[state["layer"]]  # (H, n, n)
    n, special = weights.shape[-1], trace.special
    # the rows a role counts: a word piece after a word piece
    rows = [i for i in range(1, n) if not special[i] and not special[i - 1]]
    on_previous = np.array([weights[:, i, i - 1] for i in rows]).mean(axis=0)  # (H,)
    head = int(np.argmax(on_previous))
    # the clearest row on the token before from the third piece on, of those not quoted yet
    unseen = [i for i in rows if i >= 2 and i not in quoted_rows(model, trace)]
    query = max(unseen, key=lambda i: weights[head, i, i - 1])
    return _labels(trace.tokens, _argmax(weights[head, query]))


def mh_first_turned_row(model, state: dict) -> set[str]:
    layer = state.get("layer", 0)  # the Layer slider; its toggle removes all of that layer's heads
    full = model.run(state["text"])
    removed = model.run(state["text"], ablate=frozenset((layer, h) for h in range(model.n_heads)))
    lowest = _cosine(full.hidden_states, removed.hidden_states).min(axis=1)  # (L + 1,)
    turned = [row for row, cosine in enumerate(lowest) if round(float(cosine), 4) < 1]
    if not turned:
        return {"none: every row stays at 1"}
    # the heatmap's rows: the embeddings, then the vectors after each layer
    return {"the embeddings" if turned[0] == 0 else f"after layer {turned[0] - 1}"}


def layer_majority(model, state: dict) -> set[str]:
    sizes = inside_layer.sublayer_sizes(model, model.run(state["text"]))  # core: ‖a‖, ‖f‖ per token
    share = (sizes.attention_update / (sizes.attention_update + sizes.ffn_update)).mean(axis=1)
    count = int((share > 0.5).sum())
    if count == 0:
        return {"in none of them"}
    return {"in every one" if count == len(share) else "in some of them"}


def flow_row_sum(model, state: dict) -> set[str]:
    attentions = model.run(state["text"]).attentions.astype(np.float64)  # (L, H, n, n)
    n = attentions.shape[-1]
    rolled = np.eye(n)
    for layer in range(state["ex_layer"] + 1):  # Abnar & Zuidema: ½(mean of heads + I), chained
        mixing = 0.5 * (attentions[layer].mean(axis=0) + np.eye(n))
        rolled = (mixing / mixing.sum(axis=1, keepdims=True)) @ rolled
    total = rolled[n // 2].sum()
    labels = {"exactly 1, at every layer": 1.0}
    labels[f"{state['ex_layer'] + 1}, one for each layer so far"] = state["ex_layer"] + 1.0
    return {label for label, value in labels.items() if abs(total - value) < 5e-4}


def pos_distance(model, state: dict) -> set[str]:
    n, kind = state["pos_length"], state["pos_sim"]
    tables = {
        "the binary code (±1 bits)": positional.binary_encoding(n, signed=True),
        "the learned table": model.position_vectors()[:n],
    }
    explained = {
        name: positional.explained_by_distance(positional.similarity_matrix(table, kind))
        for name, table in tables.items()
    }
    return {max(explained, key=explained.get)}


def pos_bag_of_words(model, state: dict) -> set[str]:
    trace = model.run(state["text"])
    result = positional.permutation_experiment(
        model,
        trace.tokens,
        trace.input_ids,
        trace.special,
        False,
        0,
        True,
        64,
        segments=trace.segments,
    )
    return {"the same, up to rounding" if result.max_abs_diff < 1e-4 else "different"}


@dataclass(frozen=True)
class Case:
    """One question: its page and key, the state of two visits, the model's answer to each."""

    page: str
    key: str
    first: dict
    second: dict | None  # None: the question reads nothing a visitor changes on the page
    expected: Callable[[core.Transformer, dict], set[str]]
    follows: bool = True  # the two states have different answers (checked: the test means it)
    tab: dict = field(default_factory=dict)


TRAINED = {"qkv_source": "trained head", "layer": 0, "head": 0}
CASES = [
    Case(
        "views/by_hand.py",
        "hand_soft_lookup",
        {"hand_query": "bank", "hand_sharp": 5.0},
        {"hand_query": "bank", "hand_sharp": 0.0},
        hand_soft_lookup,
        tab={"hand_section": "3 · Soft lookup"},
    ),
    Case(
        "views/context.py",
        "ctx_strongest",
        {"ctx_a": "money bank grows", "ctx_b": "river bank flows"},
        {"ctx_a": "the bank of the river", "ctx_b": "river bank flows"},
        ctx_strongest,
    ),
    Case(
        "views/qkv.py",
        "qkv_weight_ratio",
        {"text": RIVER, **TRAINED},
        {"text": MONEY, **TRAINED, "head": 1},
        qkv_weight_ratio,
        tab={"qkv_section": "2 · Scores"},
    ),
    Case(
        "views/qkv.py",
        "qkv_same_input",
        {"text": RIVER},
        None,  # page 1's two fixed sentences
        qkv_same_input,
        tab={"qkv_section": "7 · Payoff"},
    ),
    Case(
        "views/scaling_masking.py",
        "sm_first_row",
        {"text": RIVER, "layer": 0, "head": 0},
        {"text": MONEY, "layer": 3, "head": 2},
        sm_first_row,
        follows=False,  # the first row keeps all of its weight under the mask, on any head
        tab={"sm_section": "4 · Causal mask"},
    ),
    Case(
        "views/multi_head.py",
        "mh_previous_row",
        {"text": RIVER, "layer": 0},
        {"text": MONEY, "layer": 2},
        mh_previous_row,
        tab={"mh_section": "1 · All heads"},
    ),
    Case(
        "views/multi_head.py",
        "mh_first_turned_row",
        {"text": RIVER, "mh_ablate_layer": True},
        {"text": MONEY, "mh_ablate_layer": True, "layer": 3},
        mh_first_turned_row,
        tab={"mh_section": "4 · Remove heads"},
    ),
    Case(
        "views/inside_layer.py",
        "layer_majority",
        {"text": RIVER},
        {"text": MONEY},
        layer_majority,
        follows=False,  # on MiniLM the feed-forward network writes more in every layer
    ),
    Case(
        "views/positional.py",
        "pos_distance",
        {"pos_length": 100, "pos_sim": "cosine"},
        {"pos_length": 8, "pos_sim": "dot"},
        pos_distance,
        tab={"pos_section": "4 · Near positions"},
    ),
    Case(
        "views/positional.py",
        "pos_bag_of_words",
        {"text": RIVER},
        {"text": MONEY},
        pos_bag_of_words,
        follows=False,  # without positions a shuffle changes nothing, on any sentence
        tab={"pos_section": "7 · Word order"},
    ),
    Case(
        "views/information_flow.py",
        "flow_row_sum",
        {"text": RIVER, "ex_layer": 5},
        {"text": MONEY, "ex_layer": 2},
        flow_row_sum,
        follows=False,  # a rollout's rows are mixtures on any sentence, after any layer
        tab={"ex_section": "2 · Rollout"},
    ),
]


# ---- driving a page -------------------------------------------------------------------------
def _open(case: Case, state: dict):
    at = run_page(case.page, text=state.get("text"), answered=False)
    for key, value in {**case.tab, **state}.items():
        at.session_state[key] = value
    return at.run()


def _question(at, key: str):
    (found,) = [w for w in at.button_group if w.key == predict.WIDGET_PREFIX + key]
    return found


def _options(widget) -> list[str]:
    return [shown(option) for option in widget.options]  # as the browser decodes them


def _feedback(at) -> list[str]:
    """The verdicts on screen: every alert that starts with Right or Wrong."""
    alerts = [element.value for kind in ("success", "warning") for element in at.get(kind)]
    return [text for text in alerts if text.startswith(("**Right.**", "**Wrong.**"))]


def _prompts(at) -> list[str]:
    return [e.value for e in at.markdown if e.value.startswith("**Predict, then see.**")]


def _progress(at) -> dict:
    return predict.summarize(at.session_state[predict.PROGRESS_KEY])


def _page_of(case: Case) -> str:
    return case.page.removeprefix("views/").removesuffix(".py")


def test_a_wrong_pick_is_told_its_own_weight(model):
    """Multi-head tab 1: a wrong pick's feedback gives the weight on the picked token, which
    the few largest listed under it may leave out, read here from the model's own row."""
    case = next(case for case in CASES if case.key == "mh_previous_row")
    at = _open(case, case.first)
    widget = _question(at, case.key)
    options = _options(widget)
    right = case.expected(model, case.first)
    trace = model.run(case.first["text"])
    tokens, weights = list(trace.tokens), trace.attentions[case.first["layer"]]  # (H, n, n)
    # the head and row the question asks about, as mh_previous_row finds them
    rows = [i for i in range(1, len(tokens)) if not trace.special[i] and not trace.special[i - 1]]
    head = int(np.argmax(np.array([weights[:, i, i - 1] for i in rows]).mean(axis=0)))
    unseen = [i for i in rows if i >= 2 and i not in quoted_rows(model, trace)]
    query = max(unseen, key=lambda i: weights[head, i, i - 1])
    wrong = max(
        (k for k, option in enumerate(options) if option not in right),
        key=lambda k: -weights[head, query, tokens.index(options[k].split(" · ")[0])],
    )  # the option with the least weight: never among the few largest listed
    key = (
        tokens.index(options[wrong].split(" · ")[0])
        if " · " not in options[wrong]
        else int(options[wrong].split(" · ")[1])
    )
    (verdict,) = _feedback(widget.set_value(wrong).run())
    said = f"Your pick, “{options[wrong]}”: {weights[head, query, key]:.3f}."
    assert said in shown(verdict), verdict


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.key)
def test_the_page_calls_the_models_answer_right_and_follows_its_input(model, case):
    at = _open(case, case.first)
    assert_no_exception(at)
    widget = _question(at, case.key)
    assert widget.value is None, "a question starts with nothing picked"
    assert not _feedback(at), "no verdict before a pick"
    options = _options(widget)
    right = case.expected(model, case.first)
    assert right <= set(options), f"the model's answer {right} is offered: {options}"
    wrong = next(k for k, option in enumerate(options) if option not in right)

    at = widget.set_value(wrong).run()  # 1. a wrong pick
    (verdict,) = _feedback(at)
    assert verdict.startswith("**Wrong.**"), verdict
    assert any(f"“{label}”" in shown(verdict) for label in right), "it names the model's answer"
    page = _page_of(case)
    assert _progress(at)[page] | {"questions": 0} == {
        "visited": True,
        "answered": 1,
        "right": 0,
        "questions": 0,
    }

    at = _question(at, case.key).set_value(options.index(min(right))).run()  # 2. the right one
    (verdict,) = _feedback(at)
    assert verdict.startswith("**Right.**"), verdict
    assert _progress(at)[page]["right"] == 0, "the first pick is the one that counts"
    assert "Your first pick is the one counted" in verdict, "and the verdict says so"

    if case.second is None:
        return
    asked = (_prompts(at), options)
    for key, value in case.second.items():  # 3. another sentence (or slider): a new question
        at.session_state[key] = value
    at.run()
    assert_no_exception(at)
    widget = _question(at, case.key)
    new_right = case.expected(model, case.second)
    assert (new_right != right) == case.follows, (right, new_right)
    if (_prompts(at), _options(widget)) == asked and new_right == right:
        # the same question with the same answer (only its numbers moved): still answered
        (verdict,) = _feedback(at)
        assert widget.value is not None and verdict.startswith("**Right.**"), verdict
        return
    assert widget.value is None and not _feedback(at), "a changed question starts unanswered"
    options = _options(widget)
    at = widget.set_value(options.index(min(new_right))).run()
    (verdict,) = _feedback(at)
    assert verdict.startswith("**Right.**"), verdict
    assert _progress(at)[page] == {
        "visited": True,
        "answered": 1,
        "right": 1,
        "questions": len(predict.QUESTIONS[page]),
    }


def test_every_view_asks_what_the_registry_lists():
    """QUESTIONS (what a map counts) names exactly the keys each view passes to ask_choice."""
    asked: dict[str, list[str]] = {}
    for path in sorted((ROOT / "views").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "ask_choice":
                asked.setdefault(path.stem, []).append(node.args[0].value)
    assert {page: sorted(keys) for page, keys in asked.items()} == {
        page: sorted(keys) for page, keys in predict.QUESTIONS.items()
    }
    assert {case.key for case in CASES} == {k for keys in predict.QUESTIONS.values() for k in keys}


def test_every_question_folds_the_figure_that_answers_it():
    """Each ask_choice call passes reveal (the figure it folds) and says in words what it folds:
    a question cannot be asked with its answer drawn beside it."""
    calls = [
        (path.stem, node)
        for path in sorted((ROOT / "views").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "ask_choice"
    ]
    assert len(calls) == sum(len(keys) for keys in predict.QUESTIONS.values())
    for page, call in calls:
        passed = {keyword.arg for keyword in call.keywords}
        assert {"reveal", "folded"} <= passed, (page, call.args[0].value)
    assert len(predict.QUESTIONS) >= 8, "at least eight pages ask"


def _figure_drawn(at) -> bool:
    return "hand_lookup" in html_figures(at)


def _style_of(at) -> str:
    """The verdict's pill style sent with the page ("" before a pick)."""
    styles = [e.proto.body for e in at.get("html") if 'data-variant="pills"' in e.proto.body]
    return "".join(styles)


LOOKUP = {"hand_query": "bank", "hand_sharp": 2.0}


@pytest.mark.parametrize("how", ["wrong", "right", "show me"])
def test_the_answer_stays_folded_until_answered_or_shown(model, how):
    """Page 0's soft-lookup bars (they give the answer away) are absent before an answer and
    drawn after a wrong pick, a right pick or Show me, and on every rerun after, until the
    question changes (another sharpness)."""
    case = next(c for c in CASES if c.key == "hand_soft_lookup")
    at = _open(case, LOOKUP)
    assert_no_exception(at)
    assert not _figure_drawn(at), "the answering figure waits for an answer"
    folded = [c.value for c in at.caption if c.value.startswith("Folded until you answer")]
    assert folded == [
        "Folded until you answer or press Show me: the weight on each key and the vector each "
        "lookup returns."
    ]
    widget = _question(at, case.key)
    right = hand_soft_lookup(model, LOOKUP)
    options = _options(widget)
    if how == "show me":
        (button,) = [b for b in at.button if b.key == predict.WIDGET_PREFIX + case.key + "_show"]
        at = button.click().run()
        (note,) = [i.value for i in at.info if i.value.startswith("**Skipped**")]
        assert any(f"“{label}”" in shown(note) for label in right), "it names the answer"
        assert _question(at, case.key).disabled, "no pick after the answer was seen"
        assert _progress(at)["by_hand"]["answered"] == 0, "a skip is not an answer"
        assert _style_of(at) == ""
    else:
        pick = min(right) if how == "right" else next(o for o in options if o not in right)
        at = widget.set_value(options.index(pick)).run()
        (verdict,) = _feedback(at)
        assert verdict.startswith("**Right.**" if how == "right" else "**Wrong.**")
        # the pill's colour follows the verdict's kind (checked in Chromium: the browser tour)
        assert _style_of(at) == predict.VERDICT_CSS
        assert len(at.success if how == "right" else at.warning) == 1
    assert _figure_drawn(at)
    at.run()  # any later rerun: the figure stays
    assert _figure_drawn(at) and not [b for b in at.button if b.key.endswith("_show")]
    at.session_state["hand_sharp"] = 0.0  # another sharpness: a new question
    at.run()
    assert not _figure_drawn(at) and _question(at, case.key).value is None


def test_progress_counts_pages_visited_in_the_session():
    at = run_page("views/overview.py", text=RIVER)
    for page in ("views/by_hand.py", "views/inside_layer.py"):
        at.switch_page(page)
        at.run()
    assert_no_exception(at)
    progress = _progress(at)
    visited = {page for page, entry in progress.items() if entry["visited"]}
    assert visited == {"", "by_hand", "inside_layer"}
    assert set(predict.QUESTIONS) <= set(progress)
    assert progress["context"] == {"visited": False, "answered": 0, "right": 0, "questions": 1}


# ---- the builders on their own ----------------------------------------------------------------
def test_a_long_row_offers_a_few_options_with_the_answer_among_them():
    rng = np.random.default_rng(0)
    tokens = tuple(f"w{k}" for k in range(40))
    for _ in range(20):
        values = rng.random(40)
        query = int(rng.integers(40))
        question = predict_answers._token_question(
            "?", tokens, values, lambda best: "", "α", query=query, exclude={query}
        )
        offered = [int(option[1:]) for option in question.options]
        assert len(offered) <= predict_answers.MAX_OPTIONS and offered == sorted(offered)
        assert query not in offered
        best = max((j for j in range(40) if j != query), key=lambda j: values[j])
        assert {offered[k] for k in question.answers} == {best}


def test_options_that_print_the_same_number_are_all_right():
    values = np.array([0.1, 0.4121, 0.4119, 0.0761])  # 0.412 and 0.412 as printed
    question = predict_answers._token_question("?", ("a", "b", "c", "d"), values, str, "α")
    assert {question.options[k] for k in question.answers} == {"b", "c"}


def test_pieces_in_options_are_text(model):
    """A piece that looks like Markdown is escaped in the options, the prompt and the numbers."""
    hostile = ("[CLS]", "[x](https://e.com)", "**b**", "![i](x)", "<b>x</b>", "[SEP]")
    question = predict_answers._token_question(
        "?", hostile, np.array([0.1, 0.3, 0.2, 0.15, 0.15, 0.1]), str, "α"
    )
    texts = [*question.options, question.numbers]
    for text in texts:
        for raw in ("](", "**", "<b>", "!["):
            assert raw not in text, text
    assert [shown(option) for option in question.options] == list(hostile)


def test_a_hostile_models_pieces_stay_text_on_the_page(hostile_folder, local_folders):  # noqa: F811
    """On a model whose unknown-word piece is HTML and Markdown, the options and the verdict
    show it as the characters it is."""
    at = run_on_hostile_model(
        hostile_folder,
        "views/multi_head.py",
        {"mh_section": "1 · All heads"},
    )
    assert_no_exception(at)
    widget = _question(at, "mh_previous_row")
    options = _options(widget)  # shown() fails on any raw markup
    # the piece as the Trace shows it (core.text makes a piece's spaces visible as ␣)
    import core

    (piece,) = {t for t in core.load_folder(hostile_folder).run("☃").tokens if "onerror" in t}
    assert any(piece[: predict_answers.PIECE_CHARS - 1] in o for o in options), options
    at = widget.set_value(0).run()
    (verdict,) = _feedback(at)
    shown(verdict)
    prompts = _prompts(at)
    assert len(prompts) == 1 and shown(prompts[0])
    assert not [raw for raw in RAW_MARKUP if raw in verdict + prompts[0]], verdict


# ---- a tiny decoder: the builders' answers against numpy ---------------------------------------
@pytest.fixture(scope="module")
def tiny_decoder():
    from family_pages import family_folder

    return core.load_folder(family_folder("gpt2"))


def test_a_tiny_decoders_questions_have_the_answers_numpy_gives(tiny_decoder):
    """On a causal model: the previous-token row, the first row under the mask, the attention
    majority and a rollout row, each answer recomputed here from the run's own weights."""
    from family_pages import TEXT as FAMILY_TEXT

    from core import information_flow
    from core import scaling_masking as masking

    trace = tiny_decoder.run("the river bank flows past the old mill")
    weights = trace.attentions.astype(np.float64)  # (L, H, n, n), causal
    n_layers, _, n, _ = weights.shape

    def right(question) -> set[str]:
        return {question.options[k] for k in question.answers}

    # 1. which key the previous-token head's row weights most; the longer sentence has a layer
    # whose leading head gives the token before less than an even spread (the "no lean" case)
    no_lean_seen = False
    for sentence in (trace, tiny_decoder.run(FAMILY_TEXT)):
        weights = sentence.attentions.astype(np.float64)  # (L, H, n, n), causal
        n = weights.shape[-1]
        for layer in range(n_layers):
            on_previous = np.array([weights[layer, :, i, i - 1] for i in range(1, n)]).mean(axis=0)
            on_next = np.array([weights[layer, :, i, i + 1] for i in range(n - 1)]).mean(axis=0)
            assert not on_next.any()  # the mask: no head leads on the token after
            head = int(np.argmax(on_previous))
            # the row asked: the clearest not quoted (here the clearest is, so the second)
            clearest, query = sorted(range(2, n), key=lambda i: -weights[layer, head, i, i - 1])[:2]
            question = predict_answers.previous_token_row(
                sentence.attentions[layer],
                sentence.tokens,
                on_previous,
                on_next,
                layer,
                np.asarray(sentence.special),
                shown_rows={clearest},
                causal=True,
            )
            assert not any(sentence.special)  # GPT-2's tokenizer adds no piece: every row counts
            assert right(question) == _labels(sentence.tokens, _argmax(weights[layer, head, query]))
            # under the mask the row sees itself and the keys before it: only those are offered
            seen = {predict_answers._token_label(sentence.tokens, j) for j in range(query + 1)}
            assert set(question.options) <= seen, (query, question.options)
            # the chance beside it: row i sees i + 1 keys under the mask; the role's name only at
            # twice that or more; a head at or below it is said to lean no more than an even spread
            chance = np.mean([1 / (i + 1) for i in range(1, n)])
            assert f"against {chance:.2f} for an even spread" in question.prompt
            named = on_previous[head] >= 2 * chance
            assert ("a rule about places, not words" in question.reason) == (
                named and _argmax(weights[layer, head, query]) == {query - 1}
            )
            if not named:  # a weak lean says how rarely the rule holds, not only its best row
                held = sum(int(np.argmax(weights[layer, head, i])) == i - 1 for i in range(1, n))
                said = f"in {held} of {n - 1} rows" if 0 < held < n - 1 else "rows of this"
                assert said in question.reason, question.reason
            no_lean = "gives the token before no more than an even spread would"
            assert (no_lean in question.reason) == (on_previous[head] <= chance), question.reason
            no_lean_seen |= bool(on_previous[head] <= chance)
            assert np.triu(weights[layer, head], 1).max() == 0  # the mask: nothing after the query
    assert no_lean_seen, "the case the longer sentence is here for"

    weights = trace.attentions.astype(np.float64)  # (L, H, n, n), causal
    n = weights.shape[-1]

    # 2. under the mask the first row keeps everything; without it, the same scores over all
    # n keys (a decoder's own weights carry the mask, so they cannot give this number)
    masked_scores, masked_weights = masking.causal_view(trace, 0, 0, max_tokens=40)
    query, key = trace.queries[0, 0].astype(np.float64), trace.keys[0, 0].astype(np.float64)
    unmasked = _softmax(query[:1] @ key.T / np.sqrt(query.shape[-1]))[0, 0]  # row 0, no mask
    assert masking.first_row_without_mask(trace, 0, 0) == pytest.approx(unmasked, abs=1e-6)
    question = predict_answers.first_row_under_mask(
        masked_weights, unmasked, trace.tokens, trained_with_mask=True
    )
    expected = {"all of it: 1"} | (
        {"what it took without the mask"} if f"{unmasked:.3f}" == "1.000" else set()
    )
    assert right(question) == expected
    assert f"{unmasked:.3f} without" in question.numbers
    # the run without the mask is one this decoder never saw: the answer says so
    assert "never saw in training" in question.numbers

    # 3. in how many layers ‖a‖ > ‖f‖, token by token on average
    sizes = inside_layer.sublayer_sizes(tiny_decoder, trace)
    share = (sizes.attention_update / (sizes.attention_update + sizes.ffn_update)).mean(axis=1)
    question = predict_answers.attention_majority(sizes.layer_means()["attention_share"], 4.0)
    majority = int((share > 0.5).sum())
    expected = 0 if majority == 0 else 2 if majority == n_layers else 1
    assert question.answers == {expected}

    # 4. a rollout row adds up to 1 after every layer (numpy's own rollout, and core's)
    rolled = information_flow.information_flow(tiny_decoder, trace).rolled  # (L, n, n)
    mine = np.eye(n)
    for layer in range(n_layers):
        mixing = 0.5 * (weights[layer].mean(axis=0) + np.eye(n))
        mine = (mixing / mixing.sum(axis=1, keepdims=True)) @ mine
        np.testing.assert_allclose(rolled[layer], mine, atol=1e-4)
        question = predict_answers.rollout_row_sum(rolled, trace.tokens, layer)
        assert "exactly 1, at every layer" in right(question)


def test_removing_a_decoders_heads_turns_no_row_before_their_layer(tiny_decoder):
    """On a causal model, one head removed in each layer in turn: the rows computed before its
    layer are the full run's exactly, and the question names the first row numpy finds turned."""
    text = "the river bank flows past the old mill"
    full = tiny_decoder.run(text)
    for layer in range(tiny_decoder.n_layers):
        removed = {(layer, 0)}
        ablated = tiny_decoder.run(text, ablate=frozenset(removed))
        np.testing.assert_array_equal(  # the stream before the layer cannot know
            full.hidden_states[: layer + 1], ablated.hidden_states[: layer + 1]
        )
        cosines = _cosine(full.hidden_states, ablated.hidden_states)  # (L + 1, n)
        question = predict_answers.first_turned_row(cosines, removed, tiny_decoder.n_heads)
        turned = [row for row, low in enumerate(cosines.min(axis=1)) if round(low, 4) < 1]
        assert turned and turned[0] == layer + 1, "a head of a random model writes enough"
        assert {question.options[k] for k in question.answers} == {f"after layer {layer}"}
        later = "every row below it differs too"  # no row below the last layer's
        assert (later in question.reason) == (layer < tiny_decoder.n_layers - 1), question.reason
        assert f"head L{layer} H0 removed" in question.prompt


def test_the_first_turned_row_follows_the_printed_cosines():
    """A row turns when its lowest cosine prints below 1 to four decimals: a removed head that
    wrote almost nothing shows first in a later row, or in none, and the reason says so."""
    ones = np.ones((4, 3))  # the embeddings and three layers, three tokens

    def right(cosines, removed) -> tuple[str, predict_answers.Question]:
        question = predict_answers.first_turned_row(cosines, removed, n_heads=4)
        (answer,) = {question.options[k] for k in question.answers}
        return answer, question

    weak = ones.copy()
    weak[2, 1], weak[3, 1] = 0.99996, 0.97  # layer 1's output: 1.0000 as printed
    answer, question = right(weak, {(1, 2)})
    assert answer == "after layer 2" and "too little to move a cosine" in question.reason
    assert "after layer 1 1.0000 · after layer 2 0.9700" in question.numbers
    answer, question = right(ones, {(0, 0), (0, 3)})
    assert answer == "none: every row stays at 1" and "2 heads of layer 0" in question.prompt
    strong = ones.copy()
    strong[1:, 0] = [0.9, 0.99999, 0.95]  # the change fades below print, then shows again
    answer, question = right(strong, {(0, 1), (2, 0)})
    assert answer == "after layer 0" and "1 of them print 1 again" in question.reason
    assert "2 heads of layers 0 and 2" in question.prompt
    last = ones.copy()
    last[3, 2] = 0.9  # heads of the last layer: no later layer reads the change
    answer, question = right(last, {(2, 1)})
    assert answer == "after layer 2" and "the one row that changes" in question.reason
    assert "every later layer" not in question.reason


def test_the_same_input_question_is_asked_only_of_one_and_the_same_vector():
    """A model whose positions enter with the word hands a head two different vectors: the
    question's premise ("one and the same vector") would be false, so it is not asked."""
    from core.qkv import SharedWordThroughHeads

    def through(cosine_input: float) -> SharedWordThroughHeads:
        return SharedWordThroughHeads(
            "bank", 0, 1, 1, cosine_input, (1.0, 1.0), (0.9, 0.9), 0.95, np.array([0.2, 0.9])
        )

    assert predict_answers.same_input_apart(through(0.072)) is None
    asked = predict_answers.same_input_apart(through(1.0))
    assert "one and the same vector" in asked.prompt
    assert {asked.options[k] for k in asked.answers} == {"no: some heads pull them apart"}


# ---- the pages a question folds, read from the code (tests/support/folded.py) -------------
def test_the_fold_reading_follows_the_views_code():
    """walk_page finds a page folded only when every figure it draws once the sentence is read
    waits behind ask_choice's reveal: a figure drawn before the sentence is read (a weight
    diagram) does not count, one drawn after it, in the page or in a function it calls, does."""
    from tests.support.folded import walk_page

    head = "inputs, model = state.page_context()\ndisplay.show_figure(diagram(model))\n"
    folded = (
        head + "trace = traces.trace_or_stop(model, inputs)\n"
        "def figure():\n    display.show_matrix(trace.attentions.shape, None, draw)\n"
        "predict.ask_choice('k', answers.q(trace), reveal=figure, folded='the map')\n"
        "st.markdown('after the question: words only')\n"
    )
    assert walk_page(folded).folded
    drawn_after = folded + "display.show_bars(3, None, draw)\n"
    assert not walk_page(drawn_after).folded
    called = folded.replace("st.markdown", "def more():\n    display.show_figure(f)\nmore()\n#")
    assert not walk_page(called).folded, "a figure drawn by a function the page calls counts"
    assert not walk_page(folded.replace("predict.ask_choice", "other.ask")).folded, "no question"
    assert not walk_page(folded.replace("inputs)", "'fixed')")).folded, "the sentence unread"
    tabs = (
        "inputs, model = state.page_context()\n"
        "def first():\n    display.show_figure(f(inputs))\n"
        "def second():\n    t = inputs.text\n"
        "    predict.ask_choice('k', q(t), reveal=lambda: display.show_figure(g(t)), folded='x')\n"
        "SECTIONS = {'1 · First': first, '2 · Second': second}\n"
        "widgets.section_tabs(SECTIONS, key='s')\n"
    )
    assert not walk_page(tabs).folded, "the first tab is the one a page opens on"
    assert walk_page(tabs, "2 · Second").folded


def _figures_sent(at) -> list[str]:
    """Every figure the page sent, as sent: plotly specs and html_heatmap's HTML figures."""
    plotly = [chart.proto.spec for chart in at.get("plotly_chart")]
    return plotly + [e.proto.body for e in at.get("html") if "<figure" in e.proto.body]


def _pages_with_questions_on_the_sidebar_sentence() -> list[str]:
    from ui import path

    return [
        step.file
        for step in path.STEPS
        if path.url_path(step) in predict.QUESTIONS and not step.own_text
    ]


@pytest.mark.parametrize("page", _pages_with_questions_on_the_sidebar_sentence())
def test_a_typed_sentence_redraws_nothing_exactly_on_the_pages_found_folded(page):
    """The reading of the code (FOLDED_BY_A_QUESTION) against the page as it runs: on the tab
    that reads the sentence, with no question answered, a new sentence changes none of the
    figures of a page found folded, and some figure of every other page that asks. Answered, a
    folded page redraws too: its figures do draw the sentence. (A page that asks nothing folds
    nothing: ask_choice is the one fold, and QUESTIONS lists every page that calls it.)"""
    from tests.support.browser import FOLDED_BY_A_QUESTION, SENTENCE_TAB

    at = run_page(page, text=RIVER, query=dict(SENTENCE_TAB.get(page, {})), answered=False)
    assert_no_exception(at)
    before = _figures_sent(at)
    at.session_state["text"] = MONEY
    at.run()
    assert_no_exception(at)
    redrawn = _figures_sent(at) != before
    assert redrawn != (page in FOLDED_BY_A_QUESTION), (
        f"{page}: a typed sentence {'redraws' if redrawn else 'redraws nothing'}, but the code "
        f"reading finds it {'folded' if page in FOLDED_BY_A_QUESTION else 'not folded'}"
    )
    if page in FOLDED_BY_A_QUESTION:
        answered = _figures_sent(answer_open_questions(at))
        assert answered != before, "answered, the folded figures are drawn"
        at.session_state["text"] = RIVER
        assert _figures_sent(answer_open_questions(at.run())) != answered, "and follow the text"


def test_the_previous_token_questions_even_spread_counts_the_rows_its_share_does(model):
    """MiniLM with the causal mask: the share and the even spread beside it average the same
    rows, those of a word piece after a word piece ([CLS] before the first word, and the [SEP]
    row, count for neither); both recomputed here from the run's weights."""
    trace = model.run("The river bank flooded after the storm.", causal=True)
    weights = trace.attentions[0].astype(np.float64)  # (H, n, n)
    n = trace.n_tokens
    rows = range(2, n - 1)  # [CLS] is row 0 and the token before row 1; [SEP] is row n − 1
    on_previous = np.array([weights[:, i, i - 1] for i in rows]).mean(axis=0)  # (H,)
    chance = np.mean([1 / (i + 1) for i in rows])  # row i sees i + 1 keys under the mask
    on_next = np.zeros_like(on_previous)  # the mask: nothing on the token after
    question = predict_answers.previous_token_row(
        trace.attentions[0], trace.tokens, on_previous, on_next, 0, trace.special, (), causal=True
    )
    assert f"against {chance:.2f} for an even spread" in question.prompt, question.prompt
    all_rows = np.mean([1 / (i + 1) for i in range(1, n)])
    assert f"{all_rows:.2f}" != f"{chance:.2f}"  # the case this test reads: the rows matter


def test_the_previous_token_question_asks_a_row_not_quoted_and_tab_1_one_unit():
    """The page's first screen names the previous-token head and draws one of its rows, so the
    prompt states the role and asks about the clearest row not quoted yet (none left: no
    question); tab 1 states shares as weights (0.68), not percentages, and no line points at the
    small maps as if they were open while the question keeps them folded."""
    n, heads = 6, 3
    weights = np.full((heads, n, n), 1.0 / n)  # (H, n, n) even rows
    weights[1] = np.eye(n, k=-1) * 0.9 + 0.1 / n  # head 1: the token before takes most
    weights[1, 0] = 1.0 / n
    on_previous = np.array([weights[:, i, i - 1] for i in range(1, n)]).mean(axis=0)  # (H,)
    on_next = np.array([weights[:, i, i + 1] for i in range(n - 1)]).mean(axis=0)  # (H,)
    # rows 2..5 alike (row i's weight on i − 1 is 0.9 + 0.1/6) but row 4
    weights[1, 4, 3] += 0.01  # row 4 the clearest, then normalised again
    weights[1, 4] /= weights[1, 4].sum()
    on_previous = np.array([weights[:, i, i - 1] for i in range(1, n)]).mean(axis=0)  # (H,)
    tokens = list("abcdef")

    def asked(shown: set[int]):
        return predict_answers.previous_token_row(
            weights, tokens, on_previous, on_next, 0, np.zeros(n, dtype=bool), shown
        )

    question = asked(set())
    assert "head 1 gives the token before the most weight" in question.prompt, question.prompt
    assert "row for **e**" in question.prompt  # row 4, the clearest
    assert "row for **c**" in asked({4}).prompt  # rows 2, 3, 5 tie: the first of them
    assert asked({2, 3, 4, 5}) is None  # every row from the third piece on was quoted
    assert "a rule about places, not words" in question.reason
    # the Overview opened on this head with a line one place back (row c gave b its weight): the
    # prompt points at that line and leaves the rule for the learner to work out
    line = (0, 1, 2, 1, float(weights[1, 2, 1]))
    seen = predict_answers.previous_token_row(
        weights, tokens, on_previous, on_next, 0, np.zeros(n, dtype=bool), {2}, overview_line=line
    )
    assert f"the Overview's map opened on, where the row of “c” gave “b” {line[4]:.2f}." in (
        seen.prompt
    ), seen.prompt
    assert "token before" not in seen.prompt and "row for **e**" in seen.prompt
    assert seen.options == question.options and seen.answers == question.answers
    for other in ((0, 2, 2, 1, 0.9), (0, 1, 2, 3, 0.9)):  # another head; a line not one back
        assert "gives the token before" in predict_answers.previous_token_row(
            weights, tokens, on_previous, on_next, 0, np.zeros(n, dtype=bool), {2},
            overview_line=other,
        ).prompt  # fmt: skip
    at = run_page("views/multi_head.py", text=RIVER, answered=False)
    at.session_state["mh_section"] = "1 · All heads"
    at.run()
    assert_no_exception(at)
    texts = " ".join(m.value for m in at.markdown)
    assert not re.search(r"\d%", texts), re.findall(r"[^.]*\d%[^.]*", texts)
    assert "in the grid" not in texts
    assert "answer the question there (or press Show me)" in texts


def test_qkv_weight_ratio_quotes_every_token_one_way(model):
    """Step 2's prompt and feedback put each token in curly quotes, a bare "." too, and never
    glue a possessive onto a quote; the weights are the trained head's, recomputed here."""
    sentence = "Time flies like an arrow."
    from types import SimpleNamespace

    page = SimpleNamespace(page="views/qkv.py", tab={"qkv_section": "2 · Scores"})
    at = _open(page, {"text": sentence, **TRAINED})
    (prompt,) = _prompts(at)
    at = _question(at, "qkv_weight_ratio").set_value(0).run()
    (verdict,) = _feedback(at)
    trace = model.run(sentence)
    row = trace.attentions[0, 0, 1].astype(np.float64)  # piece 1's row (the page's query)
    best, second = np.argsort(-row, kind="stable")[:2]
    tokens = trace.tokens
    assert f"**“{tokens[1]}”**" in prompt and "”'s" not in prompt, prompt
    assert f"“{tokens[best]}” {row[best]:.3f}, “{tokens[second]}” {row[second]:.3f}" in shown(
        verdict
    ), verdict


def test_the_previous_token_question_names_its_row_truly_and_asks_only_one_neighbour():
    """The answer says the row's weight on the token before, recomputed here, of the clearest
    row not quoted; and a head that leads the layer on the token
    before and on the token after alike gets no question ("which neighbour?" would have two
    answers)."""
    n, heads = 7, 3
    weights = np.full((heads, n, n), 1.0 / n)  # (H, n, n) even rows
    # row i's weight on i − 1: a mean of 0.28, under twice an even spread (2/7), so the head
    # earns no name and the answer explains its row
    before = np.array([0.0, 0.5, 0.2, 0.3, 0.22, 0.26, 0.21])
    for i in range(1, n):  # head 2: the token before takes before[i], the rest spread evenly
        weights[2, i] = (1.0 - before[i]) / (n - 1)
        weights[2, i, i - 1] = before[i]
    on_previous = np.array([weights[:, i, i - 1] for i in range(1, n)]).mean(axis=0)  # (H,)
    on_next = np.array([weights[:, i, i + 1] for i in range(n - 1)]).mean(axis=0)  # (H,)
    tokens = list("abcdefg")
    question = predict_answers.previous_token_row(
        weights, tokens, on_previous, on_next, 0, np.zeros(n, dtype=bool), shown_rows={3}
    )
    # rows 2..6 by weight on the token before: 3 (0.3, quoted), 5 (0.26), ...; row 1's 0.5 is
    # not ranked
    assert "row for **f**" in question.prompt, question.prompt
    assert "in the row of f the token before, e, still takes the most: 0.26" in question.reason
    # and says how often the rule holds at all: each row's 0.2 to 0.5 beats its even rest (1/7)
    held = sum(before[i] > (1 - before[i]) / (n - 1) for i in range(1, n))
    assert f"largest weight in all {held} rows of this sentence" in question.reason
    both = weights.copy()
    both[2] = np.full((n, n), 0.05)  # head 2 leads on the token before and after alike
    for i in range(n):
        for j in (i - 1, i + 1):
            if 0 <= j < n:
                both[2, i, j] = 0.4
        both[2, i] /= both[2, i].sum()
    on_previous = np.array([both[:, i, i - 1] for i in range(1, n)]).mean(axis=0)
    on_next = np.array([both[:, i, i + 1] for i in range(n - 1)]).mean(axis=0)
    assert np.argmax(on_previous) == np.argmax(on_next) == 2
    assert (
        predict_answers.previous_token_row(
            both, tokens, on_previous, on_next, 0, np.zeros(n, dtype=bool), ()
        )
        is None
    )
