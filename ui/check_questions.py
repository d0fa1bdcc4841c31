"""The course's check: six questions answered before the course and again after it.

Each question asks for something the course teaches a learner to reason out (what a softmax row
sums to, what a causal mask leaves above the diagonal, …); its feedback quotes the numbers of the
model and sentence on screen (ui/check_runs.py), and an answer that the model decides (is the
shuffle's difference rounding or not?) is decided by those numbers.

Two rounds ask the same questions. The first round records a pick and says nothing more: a
learner who saw the answers before the course would learn little from the second round. The
second round gives the feedback and sets each answer beside the first. The picks live in this
session's state only (STORE_KEY), never on the server's disk; check_record.py writes them into
the page the learner downloads.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict

import streamlit as st

from ui.check_runs import CheckNumbers
from ui.escape import literal
from ui.predict_answers import Question

BEFORE, AFTER = "before", "after"
ROUNDS = (BEFORE, AFTER)
STORE_KEY = "_check_answers"
WIDGET_PREFIX = "check_"
ROUNDING = 1e-4  # float32 sums and reruns agree far closer than this
PIECE_CHARS = 40  # a longer piece (a custom tokenizer's) is shortened in the feedback
NAMED_KEYS = 4  # the example row's strongest keys named, most heads first


class Pick(TypedDict):
    """One round's answer to one question, as the session keeps it."""

    picked: int  # the option's index
    option: str  # its text (Markdown, as shown)


def _piece(tokens: tuple[str, ...], position: int) -> str:
    return literal(tokens[position], max_chars=PIECE_CHARS)  # a piece is text, never markup


# ---- the six questions, built from the numbers on screen ---------------------------------------
def _settled(
    prompt: str,
    options: tuple[str, ...],
    holds: bool,
    expected: tuple[int, str],
    otherwise: tuple[int, str],
    numbers: str,
) -> Question:
    """A question the computed numbers settle: the expected option and why (index, reason) when
    what the course teaches holds on this run; otherwise the option they show, and what they show."""
    answer, reason = expected if holds else otherwise
    return Question(
        prompt=prompt,
        options=options,
        answers=frozenset({answer}),
        reason=reason,
        numbers=numbers,
    )


def row_sum(numbers: CheckNumbers, model_label: str) -> Question:
    """What one row of attention weights adds up to (softmax's normalisation)."""
    runs = numbers.runs
    exact = max(abs(runs.row_sum_min - 1), abs(runs.row_sum_max - 1)) < ROUNDING
    return _settled(
        prompt="Take any head and any word of a sentence. The attention weights in that word's "
        "row, one per word it can look at: what do they add up to?",
        options=(
            "1, in every row",
            "the number of words in the sentence",
            "it depends on the head and the sentence",
            "anything: they are the raw scores",
        ),
        holds=exact,
        expected=(
            0,
            "Softmax divides each e^score by the sum of its row's e^scores, so a row's weights "
            "are shares of one whole, however large or small the scores are.",
        ),
        otherwise=(
            2,
            "These rows do not all sum to 1: something other than one softmax per row made them.",
        ),
        numbers=f"{model_label} on this sentence: its {runs.n_rows:,} rows ({numbers.n_layers} "
        f"layers × {numbers.n_heads} heads × {len(runs.tokens)} pieces) sum to between "
        f"{runs.row_sum_min:.7f} and {runs.row_sum_max:.7f}.",
    )


def causal_mask(numbers: CheckNumbers, model_label: str) -> Question:
    """What a causal mask leaves above the diagonal of the attention weights."""
    runs = numbers.runs
    zero = runs.above_with_mask == 0.0
    # one of the two runs is off the training distribution, whichever the model is
    trained = (
        "the run without it is off-distribution: it was trained with the mask"
        if numbers.model_decoder
        else "the run with it is off-distribution: it was trained without one"
    )
    return _settled(
        prompt="A causal mask lets each word look only at itself and the words before it. In a "
        "head's weights (a row per word looking, a column per word looked at), what is left "
        "above the diagonal?",
        options=(
            "0, exactly",
            "small weights, but more than 0",
            "the weights below the diagonal, mirrored",
            "1 in each cell",
        ),
        holds=zero,
        expected=(
            0,
            "A masked score becomes −∞ before the softmax and e^(−∞) = 0: the words after get "
            "no weight at all, and each row's whole weight is shared by the word and those "
            "before it.",
        ),
        otherwise=(
            1,
            "Here the mask left weight above the diagonal: it did not reach every score.",
        ),
        numbers=f"{model_label} on this sentence, the largest weight above the diagonal over "
        f"every layer and head: {runs.above_with_mask:.3g} with the causal mask, "
        f"{runs.above_without_mask:.3f} without it ({trained}).",
    )


def shuffle(numbers: CheckNumbers, model_label: str) -> Question:
    """Whether attention without position information notices a shuffle of the words. Both runs
    keep the model's own mask: a decoder's causal mask, as it was trained, reads order itself."""
    gap = numbers.shuffle_gap_without
    masked = numbers.model_decoder
    shown_gap = f"{gap:.1e}" if gap < ROUNDING else f"{gap:.2f}"
    measured = (
        f"{model_label}"
        + (", its causal mask kept as trained" if masked else "")
        + f", the sentence's first {numbers.shuffle_pieces} pieces shuffled, the largest "
        f"difference over every layer and head: {shown_gap} without positions, "
        f"{numbers.shuffle_gap_with:.2f} with them."
    )
    too_short = numbers.shuffle_pieces == 0
    if too_short:
        measured = "This sentence is too short to shuffle: type a longer one."
    options = (
        "the same, up to rounding",
        "different: each word has new neighbours",
        "spread evenly over the words",
    )
    if masked:  # the mask is the order signal left: the course's answer is "different"
        return _settled(
            prompt=f"Run a sentence with {numbers.positions_off}, but with the causal mask "
            "it was trained with, then run it again with its words shuffled. Put "
            "the second run's attention weights back in the original order: how do they "
            "compare with the first run's?",
            options=options,
            holds=too_short or gap >= ROUNDING,
            expected=(
                1,
                "The causal mask is an order of its own: each word sees only itself and the "
                "words before it, and the shuffle changes which words those are. Dot products, "
                "softmax, the feed-forward network and the norms treat a word the same wherever "
                "it stands, but the mask does not.",
            ),
            otherwise=(
                0,
                "Here the shuffle left every word with the same words before it, so the weights "
                "came back the same up to rounding.",
            ),
            numbers=measured,
        )
    return _settled(
        prompt="Run a sentence with no position information at all, then run it again with its "
        "words shuffled. Put the second run's attention weights back in the original order: how "
        "do they compare with the first run's?",
        options=options,
        holds=too_short or gap < ROUNDING,
        expected=(
            0,
            "Dot products, softmax, the feed-forward network and the norms treat a word the same "
            "wherever it stands: without position information nothing tells places apart, so the "
            "shuffle only reorders the same numbers.",
        ),
        otherwise=(
            1,
            "Here something in the run still reads word order, so the shuffled run's numbers "
            "differ.",
        ),
        numbers=measured,
    )


def sqrt_dk(numbers: CheckNumbers, model_label: str) -> Question:
    """Why the scores are divided by √d_k."""
    runs = numbers.runs
    root = math.sqrt(numbers.d_head)
    sharper = runs.top_weight_unscaled > runs.top_weight_scaled
    return Question(
        prompt="Attention divides every score q·k by √d_k (d_k: the width of a query and a key) "
        "before the softmax. Why?",
        options=(
            "q·k grows with the width; undivided, the softmax would give nearly all of a row's "
            "weight to one word",
            "so that each row of weights adds up to 1",
            "so that the scores stay positive",
            "to make the product faster to compute",
        ),
        answers=frozenset({0}),
        reason="A dot product adds up d_k products: with independent components of variance 1 "
        "its standard deviation is √d_k (Vaswani et al., 2017). Dividing takes that growth "
        "with the width away (for such components it brings the spread back to 1; a trained "
        "model's q and k need not have them), so the softmax stays out of the range where one "
        "key takes everything. There, the authors suspect, its gradients become extremely "
        "small, which would stall training.",
        numbers=f"{model_label}: d_k = {numbers.d_head}, √d_k = {root:.2f}. On this sentence q·k "
        f"has standard deviation {runs.raw_spread:.2f} before dividing, "
        f"{runs.raw_spread / root:.2f} after. Without 1/√d_k in every layer a row's largest "
        f"weight averages {runs.top_weight_unscaled:.2f}, against {runs.top_weight_scaled:.2f} "
        "as trained"
        + (": sharper." if sharper else ": here the later layers' changed inputs outweigh it."),
    )


def multi_head(numbers: CheckNumbers, model_label: str) -> Question:
    """What several heads in one layer give."""
    runs = numbers.runs
    counts = Counter(int(key) for key in runs.example_tops)  # key position -> heads
    named = " · ".join(
        f"{_piece(runs.tokens, key)} ×{heads}" for key, heads in counts.most_common(NAMED_KEYS)
    )
    if len(counts) > NAMED_KEYS:
        named += " · …"
    mean_distinct = float(runs.distinct_by_row.mean())
    return Question(
        prompt="A layer runs several attention heads side by side instead of one. What does that "
        "give?",
        options=(
            "each head can weight other words, so one layer gathers several kinds of context at "
            "once",
            "the heads' weights are averaged, which makes them more reliable",
            "each head reads only its own stretch of the sentence",
            "more heads make every row's weights sharper",
        ),
        answers=frozenset({0}),
        reason="Every head has its own W_q, W_k and W_v, so each makes its own pattern of "
        "weights; W_O joins their outputs into one update of each word.",
        numbers=f"{model_label}, layer 0, the row of "
        f"**{_piece(runs.tokens, runs.example_row)}**: its {numbers.n_heads} heads weight "
        f"{len(counts)} different pieces most ({named}). Over every layer and piece, the "
        f"{numbers.n_heads} heads of a layer weight {mean_distinct:.1f} different pieces most.",
    )


def residual(numbers: CheckNumbers, model_label: str) -> Question:
    """What the residual connection around attention adds."""
    runs = numbers.runs
    closer = runs.residual_cosine > runs.other_cosine
    return Question(
        prompt="Around attention, every layer adds its input back: x + Attention(x). What does "
        "that “x +” give?",
        options=(
            "each word keeps its vector, and the layer writes an update onto it",
            "the position vectors, added once more",
            "the attention output, counted twice",
            "the word's first embedding, replacing what earlier layers wrote",
        ),
        answers=frozenset({0}),
        reason="The sublayer's output is added to the stream instead of replacing it, so what "
        "earlier layers wrote stays readable and each layer moves a vector by a step.",
        numbers=f"{model_label} on this sentence: a piece's vector leaving a layer has cosine "
        f"{runs.residual_cosine:.2f} with the one that entered it (mean over layers and pieces); "
        f"two different pieces leaving the same layer, {runs.other_cosine:.2f}"
        + (": each vector stays closer to its own input." if closer else "."),
    )


@dataclass(frozen=True)
class CheckQuestion:
    """One question of the check: its key, its short name in tables, its builder."""

    key: str
    name: str
    build: Callable[[CheckNumbers, str], Question]


QUESTIONS: tuple[CheckQuestion, ...] = (
    CheckQuestion("row_sum", "A softmax row", row_sum),
    CheckQuestion("causal_mask", "The causal mask", causal_mask),
    CheckQuestion("shuffle", "Order without positions", shuffle),
    CheckQuestion("sqrt_dk", "Why √d_k", sqrt_dk),
    CheckQuestion("multi_head", "Several heads", multi_head),
    CheckQuestion("residual", "The residual “x +”", residual),
)


def built(numbers: CheckNumbers, model_label: str) -> dict[str, Question]:
    """Every question of the check for the model and sentence on screen, by key."""
    return {item.key: item.build(numbers, model_label) for item in QUESTIONS}


# ---- the session's picks ---------------------------------------------------------------------
def answers() -> dict[str, dict[str, Pick]]:
    """This session's picks: {round: {question key: Pick}} (empty rounds included)."""
    store = st.session_state.get(STORE_KEY)
    if not isinstance(store, dict):
        store = {name: {} for name in ROUNDS}
        st.session_state[STORE_KEY] = store
    return store


def _widget_key(round_name: str, key: str) -> str:
    return f"{WIDGET_PREFIX}{round_name}_{key}"


def _choice(round_name: str, key: str, question: Question, locked: bool) -> int | None:
    """The options as radio buttons, none picked at first; the round's earlier pick shown again
    after a visit elsewhere (Streamlit forgets a widget's value once a page without it has run).
    Radio buttons, not the pages' pills: an option a sentence long wraps at 390 px, where a pill
    cuts it off."""
    widget_key = _widget_key(round_name, key)
    earlier = answers()[round_name].get(key)
    if widget_key not in st.session_state and earlier is not None:
        st.session_state[widget_key] = earlier["picked"]
    picked = st.radio(
        "Your answer",  # the aria-label as written: plain words, never the Markdown prompt
        range(len(question.options)),
        index=None,
        format_func=question.options.__getitem__,
        key=widget_key,
        label_visibility="collapsed",
        disabled=locked,
    )
    return None if picked is None else int(picked)


def _keep(round_name: str, key: str, question: Question, picked: int) -> Pick:
    """Record a pick: the first round keeps the latest (nothing was revealed), the second its
    first (the feedback follows it at once)."""
    kept = answers()[round_name]
    if round_name == BEFORE or key not in kept:
        kept[key] = Pick(picked=picked, option=question.options[picked])
    return kept[key]


# ---- the first round as a short code -----------------------------------------------------------
# The session forgets the first round when the tab is reloaded or closed, and a course takes more
# than one sitting. The first round fits in a code of one letter per question (a, b, … the option;
# - none), which the learner notes and types in again in the second round: still nothing stored.
UNANSWERED = "-"
CODE_CHARS = 40  # a pasted essay is cut before it is read


def first_round_code(picks: Mapping[str, Mapping[str, Pick]]) -> str:
    """'bd----': the first round's picks, one letter per question in QUESTIONS' order."""
    before = picks[BEFORE]
    return "".join(
        chr(ord("a") + before[item.key]["picked"]) if item.key in before else UNANSWERED
        for item in QUESTIONS
    )


def read_code(text: str, questions: Mapping[str, Question]) -> dict[str, int] | None:
    """The picks a first-round code holds, {question key: option}; None unless it is a code of
    this check (one letter per question, each one of its options, or -)."""
    code = text.strip().lower()[:CODE_CHARS]
    if len(code) != len(QUESTIONS):
        return None
    picks = {}
    for item, letter in zip(QUESTIONS, code, strict=True):
        if letter == UNANSWERED:
            continue
        option = ord(letter) - ord("a")
        if not 0 <= option < len(questions[item.key].options):
            return None
        picks[item.key] = option
    return picks


def restore_first_round(text: str, questions: Mapping[str, Question]) -> bool:
    """Set the first round from a code (True), or leave it (False: not a code of this check).
    The first-round widgets are not on the page when this runs (the second round's tab is), so
    their values can be set too."""
    picks = read_code(text, questions)
    if picks is None:
        return False
    kept = answers()[BEFORE]
    kept.clear()
    for item in QUESTIONS:
        widget_key = _widget_key(BEFORE, item.key)
        if item.key in picks:
            option = picks[item.key]
            kept[item.key] = Pick(picked=option, option=questions[item.key].options[option])
        st.session_state[widget_key] = picks.get(item.key)
    return True


CODE_READ_KEY = "_check_code_read"  # the code last read back: read once, so later picks stay


def first_round_box(questions: Mapping[str, Question]) -> None:
    """The second round's box for a first-round code: a code of this check sets the first round
    back (once); anything else gets a line on what a code looks like (never the text itself)."""
    code = st.text_input(
        "Your first-round code, if this tab was reloaded since (one letter per question)",
        key="check_code",
        max_chars=CODE_CHARS,
        placeholder=first_round_code(answers()),
    )
    if not code or code == st.session_state.get(CODE_READ_KEY):
        return
    if restore_first_round(code, questions):
        st.session_state[CODE_READ_KEY] = code
    else:
        st.caption(
            f"That is not a code of this check: {len(QUESTIONS)} letters, each the letter of an "
            f"option or {UNANSWERED}."
        )


def verdict(question: Question, pick: Pick | None) -> str:
    """'✓ option', '✗ option' or '—' for a table cell."""
    if pick is None:
        return "—"
    return ("✓ " if pick["picked"] in question.answers else "✗ ") + pick["option"]


def computed_answer(question: Question) -> str:
    """The right option(s), as the feedback names them."""
    return " or ".join(f"“{question.options[k]}”" for k in sorted(question.answers))


def ask(round_name: str, number: int, key: str, question: Question) -> None:
    """One question of one round, with what that round says after a pick."""
    before = answers()[BEFORE].get(key)
    after = answers()[AFTER].get(key)
    locked = round_name == BEFORE and after is not None  # the answer has been revealed
    with st.container(border=True):
        st.markdown(f"**{number}.** {question.prompt}")
        picked = _choice(round_name, key, question, locked)
        if picked is None:
            if round_name == AFTER and before is not None:
                st.caption(f"Before the course you picked “{before['option']}”.")
            return
        pick = _keep(round_name, key, question, picked)
        if round_name == BEFORE:
            st.caption(
                "Noted. The answer comes in the second round, after the course"
                + (
                    ": you answered it there already, so this one stays as it was."
                    if locked
                    else "."
                )
            )
            return
        right = pick["picked"] in question.answers
        head = "**Right.**" if right else f"**Wrong.** The answer is {computed_answer(question)}."
        then = (
            "You did not answer it before the course."
            if before is None
            else f"Before the course: {verdict(question, before)}."
        )
        if picked != pick["picked"]:  # the second round keeps its first pick (_keep)
            then += (
                f" You have since picked “{question.options[picked]}”; your first pick, "
                f"“{pick['option']}”, is the one counted."
            )
        body = f"{head} {question.reason}  \n{question.numbers}  \n{then}"
        if right:
            st.success(body, icon=":material/check_circle:")
        else:
            st.warning(body, icon=":material/cancel:")


def compared(
    questions: Mapping[str, Question], picks: Mapping[str, Mapping[str, Pick]]
) -> tuple[int, int, int]:
    """(questions answered in the second round, of those right in the first round, right in the
    second): a first-round pick is judged only once its answer was revealed."""
    revealed = [key for key in picks[AFTER] if key in questions]
    right_before = sum(
        1
        for key in revealed
        if key in picks[BEFORE] and picks[BEFORE][key]["picked"] in questions[key].answers
    )
    right_after = sum(
        1 for key in revealed if picks[AFTER][key]["picked"] in questions[key].answers
    )
    return len(revealed), right_before, right_after


def _coloured(cell: str) -> str:
    """A table cell's ✓ in green and ✗ in red (Streamlit's colours, readable light and dark)."""
    for mark, colour in (("✓ ", "green"), ("✗ ", "red")):
        if cell.startswith(mark):
            return f":{colour}[{mark.strip()}] {cell.removeprefix(mark)}"
    return cell


def side_by_side(questions: dict[str, Question]) -> str:
    """A Markdown table: each question, the two rounds' picks, the answer. A first-round pick is
    judged only once the second round has answered that question (before, it gives nothing away)."""
    rows = ["| Question | Before the course | After the course |", "|---|---|---|"]
    picks = answers()
    for item in QUESTIONS:
        question = questions[item.key]
        before, after = picks[BEFORE].get(item.key), picks[AFTER].get(item.key)
        if after is None:
            first = "answered" if before is not None else "—"
        else:
            first = verdict(question, before)
        rows.append(f"| {item.name} | {_coloured(first)} | {_coloured(verdict(question, after))} |")
    return "\n".join(rows)
