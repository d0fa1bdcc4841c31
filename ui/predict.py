"""Predict, then see: a question before a figure, checked against the model's own numbers.

A view asks one question with one call, and hands over the figure that shows the answer:

    def weights_figure() -> None:
        ...  # the figure(s) that give the answer away
    predict.ask_choice("qkv_weight_ratio", predict_answers.weight_ratio(result, tokens, 1),
                       reveal=weights_figure, folded="the weights α")

The figure is drawn by ask_choice, and only once the learner has picked an answer or pressed
"Show me" (a skip: the answer is shown, nothing is counted): a page cannot ask a question with
its answer in sight. The learner picks an option (nothing is picked at first); the feedback says
right or wrong, names the computed answer, and gives the numbers and a one-line reason; the
picked pill turns green or red. The question is built from the live run (ui/predict_answers.py),
so a new sentence, model or slider gives a new answer; a question whose prompt, options or
answer changed starts unanswered again, its figure folded.

Progress lives in st.session_state under one key (PROGRESS_KEY), for this session only (not in
the URL): the pages visited (app.py calls visit() for every page it runs) and, per page, each
question's first answer to its current version, right or wrong. progress() reads it:

    progress() -> {url_path: {"visited": bool, "answered": int, "right": int, "questions": int}}

for every page that has questions (QUESTIONS) or was visited; url_path is the page's path in
the app's URL ("" for the Overview, "by_hand", "multi_head", …).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypedDict

import streamlit as st

from ui.predict_answers import Question

PROGRESS_KEY = "_predict_progress"
WIDGET_PREFIX = "predict_"

# Every page's questions, by the key its view passes to ask_choice (tests/test_predict.py checks
# the views against it), so a map can say "0 of 2" before the page was opened.
QUESTIONS: dict[str, tuple[str, ...]] = {
    "by_hand": ("hand_soft_lookup",),
    "context": ("ctx_strongest",),
    "qkv": ("qkv_weight_ratio", "qkv_same_input"),
    "scaling_masking": ("sm_first_row",),
    "multi_head": ("mh_previous_row", "mh_first_turned_row"),
    "inside_layer": ("layer_majority",),
    "positional": ("pos_distance", "pos_bag_of_words"),
    "information_flow": ("flow_row_sum",),
}


class PageProgress(TypedDict):
    """What one page's entry of progress() holds."""

    visited: bool  # the page was opened in this session
    answered: int  # its questions answered (each question's latest version counts once)
    right: int  # of those, answered right the first time
    questions: int  # the questions the page asks (QUESTIONS)


def _store() -> dict:
    """This session's record: {"visited": [url_path], "current": url_path, "answers":
    {url_path: {question key: {"version": digest, "right": bool, "prompt", "picked", "answer":
    Markdown}}}, "versions": {widget key:
    digest of the question last shown}}."""
    store = st.session_state.get(PROGRESS_KEY)
    if not isinstance(store, dict):
        store = {"visited": [], "current": "", "answers": {}, "versions": {}}
        st.session_state[PROGRESS_KEY] = store
    return store


def visit(url_path: str) -> None:
    """app.py: the page at url_path is being drawn; its questions count for it."""
    store = _store()
    store["current"] = url_path
    if url_path not in store["visited"]:
        store["visited"].append(url_path)


def progress() -> dict[str, PageProgress]:
    """Per page (its url_path): visited, questions answered, answered right, questions asked."""
    return summarize(_store())


def answered() -> dict[str, dict[str, dict]]:
    """This session's first picks, {url_path: {question key: {"right", "prompt", "picked",
    "answer", "version"}}}: prompt, picked and answer are the Markdown the learner read."""
    return _store()["answers"]


def summarize(store: dict) -> dict[str, PageProgress]:
    """progress() of a session's record (the value under PROGRESS_KEY)."""
    pages = [*QUESTIONS, *(page for page in store["visited"] if page not in QUESTIONS)]
    result: dict[str, PageProgress] = {}
    for page in pages:
        answers = store["answers"].get(page, {})
        result[page] = PageProgress(
            visited=page in store["visited"],
            answered=len(answers),
            right=sum(1 for answer in answers.values() if answer["right"]),
            questions=len(QUESTIONS.get(page, ())),
        )
    return result


def _version(question: Question) -> str:
    """What makes a question new to the learner: its prompt, its options or its answer. Its
    numbers alone do not: "will the shuffled copy match?" on another sentence is the question
    already answered, its feedback and figure drawn with the new numbers."""
    answers = ",".join(str(k) for k in sorted(question.answers))
    text = "\x1f".join((question.prompt, *question.options, answers))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# The picked pill says right or wrong by colour too (the verdict under it says it in words, so
# colour is never the only cue). Streamlit gives a keyed container the class st-key-<key> and an
# alert the data-testid "stAlertContent<Kind>"; a pill is a button with data-variant="pills",
# aria-checked="true" once picked (Streamlit 1.67's markup, checked in Chromium by the browser
# tour), which Streamlit tints with the theme's primary colour, red here, right or wrong. A
# question's box holding a success alert (a right pick: _verdict) turns its picked pill green, a
# warning (a wrong one) red. The text keeps the theme's colour, so it reads in light and dark;
# border and tint carry the verdict, and a mark leads the label.
VERDICT_CSS = """<style>
[class*="st-key-predict_box_"]:has([data-testid="stAlertContentSuccess"])
  button[data-variant="pills"][aria-checked="true"] {
  border: 2px solid #21a651; background-color: rgba(33, 166, 81, 0.16); color: inherit; }
[class*="st-key-predict_box_"]:has([data-testid="stAlertContentWarning"])
  button[data-variant="pills"][aria-checked="true"] {
  border: 2px solid #e0393e; background-color: rgba(224, 57, 62, 0.14); color: inherit; }
[class*="st-key-predict_box_"]:has([data-testid="stAlertContentSuccess"])
  button[data-variant="pills"][aria-checked="true"]::before { content: "\\2713\\00a0"; color: #21a651; }
[class*="st-key-predict_box_"]:has([data-testid="stAlertContentWarning"])
  button[data-variant="pills"][aria-checked="true"]::before { content: "\\2717\\00a0"; color: #e0393e; }
</style>"""
BOX_PREFIX = "predict_box_"  # the question's container (VERDICT_CSS finds it by this prefix)
SHOW_SUFFIX = "_show"  # the "Show me" button's key: the widget's key + SHOW_SUFFIX


def _show_me(widget_key: str, version: str) -> None:
    """The "Show me" button's callback: this version of the question is skipped, not answered."""
    _store().setdefault("skipped", {})[widget_key] = version


def ask_choice(
    key: str, question: Question | None, reveal: Callable[[], None], folded: str
) -> None:
    """One multiple-choice question, then its feedback and the figure that answers it.

    key: the question's name on its page (QUESTIONS); the widget's key is WIDGET_PREFIX + key.
    reveal: draws the figure(s) that give the answer away. It runs only once the learner has
    picked an answer or pressed "Show me" (a skip, not counted as answered), and on every rerun
    after that until the question changes; at once when question is None (nothing to ask).
    folded: what reveal draws, in a few words ("the heatmaps of S and α"), for the line that
    says what waits behind the answer.
    """
    if question is None:
        reveal()
        return
    store = _store()
    widget_key = WIDGET_PREFIX + key
    version = _version(question)
    seen = store["versions"]
    answers = store["answers"].setdefault(store["current"], {})
    first = answers.get(key, {})
    if seen.get(widget_key, version) != version:  # a new sentence, slider or model: a new question
        # set, not deleted: a value set through session state also clears the browser's pick
        st.session_state[widget_key] = None
    elif first.get("version") == version and widget_key not in st.session_state:
        # answered before, then the page was left (Streamlit drops an undrawn widget's value):
        # the first pick comes back with its figure
        st.session_state[widget_key] = first.get("picked_index")
    seen[widget_key] = version
    answered_before = first.get("version") == version
    skipped = not answered_before and store.get("skipped", {}).get(widget_key) == version
    options = question.options
    with st.container(border=True, key=BOX_PREFIX + key):
        st.markdown(f"**Predict, then see.** {question.prompt}")
        picked = st.pills(
            # The widget's label is its aria-label as written: plain words, never the Markdown
            # prompt above (a screen reader would read its asterisks and character references).
            "Your prediction",
            range(len(options)),
            format_func=options.__getitem__,  # Markdown with visitor text escaped
            selection_mode="single",
            key=widget_key,
            label_visibility="collapsed",
            disabled=skipped,  # seen first, then picked: that would be no prediction
        )
        computed = " or ".join(f"“{options[k]}”" for k in sorted(question.answers))
        if picked is None and not (skipped or answered_before):
            st.caption(f"Folded until you answer or press Show me: {folded}.")
            st.button(
                "Show me",
                key=widget_key + SHOW_SUFFIX,
                on_click=_show_me,
                args=(widget_key, version),
                icon=":material/visibility:",
            )
            return
        if picked is not None:
            _verdict(key, question, picked, computed, version, answers)
        else:  # skipped, or the first pick taken back: the answer stays shown, nothing counted
            opening = (
                "**Skipped**, so not counted."
                if skipped
                else f"Your first pick, “{first['picked']}”, was "
                + ("right." if first["right"] else "wrong.")
            )
            st.info(
                f"{opening} The computed answer is {computed}. {question.reason}  \n"
                f"{question.numbers}",
                icon=":material/visibility:",
            )
    reveal()


def _verdict(
    key: str, question: Question, picked: int, computed: str, version: str, answers: dict
) -> None:
    """The feedback on a pick: right or wrong, the computed answer and why; the first pick of
    this version of the question is the one recorded."""
    options = question.options
    right = picked in question.answers
    if answers.get(key, {}).get("version") != version:  # the first pick is the one counted
        # with the words the learner read, for the record they can download (views/check.py)
        answers[key] = {
            "version": version,
            "right": right,
            "prompt": question.prompt,
            "picked": options[picked],
            "picked_index": picked,
            "answer": computed,
        }
    st.html(VERDICT_CSS)
    # "computed", not "the model's": page 0's toy has no model, and the numbers are the answer
    verdict = "**Right.**" if right else f"**Wrong.** The computed answer is {computed}."
    if not right and question.option_values:  # the pick's own number, maybe not in `numbers`
        verdict += f" Your pick, “{options[picked]}”: {question.option_values[picked]}."
    if answers[key]["right"] != right:
        verdict += " (Your first pick is the one counted in your progress.)"
    body = f"{verdict} {question.reason}  \n{question.numbers}"
    if right:
        st.success(body, icon=":material/check_circle:")
    else:
        st.warning(body, icon=":material/cancel:")
