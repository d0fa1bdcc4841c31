"""Predict, then see: a question before a figure, checked against the model's own numbers.

A view asks one question with one call, right before the figure that shows the answer:

    predict.ask_choice("qkv_strongest", predict_answers.strongest_key(result, tokens, i))

The learner picks an option (nothing is picked at first); the feedback says right or wrong,
names the computed answer, and gives the numbers and a one-line reason. The question is built
from the live run (ui/predict_answers.py), so a new sentence, model or slider gives a new answer;
a question whose prompt, options or numbers changed starts unanswered again.

Progress lives in st.session_state under one key (PROGRESS_KEY), for this session only (not in
the URL): the pages visited (app.py calls visit() for every page it runs) and, per page, each
question's first answer to its current version, right or wrong. progress() reads it:

    progress() -> {url_path: {"visited": bool, "answered": int, "right": int, "questions": int}}

for every page that has questions (QUESTIONS) or was visited; url_path is the page's path in
the app's URL ("" for the Overview, "by_hand", "multi_head", …).
"""

from __future__ import annotations

import hashlib
from typing import TypedDict

import streamlit as st

from ui.predict_answers import Question

PROGRESS_KEY = "_predict_progress"
WIDGET_PREFIX = "predict_"

# Every page's questions, by the key its view passes to ask_choice (tests/test_predict.py checks
# the views against it), so a map can say "0 of 2" before the page was opened.
QUESTIONS: dict[str, tuple[str, ...]] = {
    "by_hand": ("hand_strongest",),
    "context": ("ctx_strongest", "ctx_cosine"),
    "qkv": ("qkv_strongest", "qkv_bank_head"),
    "scaling_masking": ("sm_saturation", "sm_sharper"),
    "multi_head": ("mh_previous_head", "mh_most_moved"),
    "inside_layer": ("layer_share",),
    "positional": ("pos_distance", "pos_bag_of_words"),
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
    """What makes a question new to the learner: its prompt, its options and the numbers behind
    its answer (a new seed or switch changes them, and the answer may change with them)."""
    text = "\x1f".join((question.prompt, *question.options, question.numbers))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def ask_choice(key: str, question: Question | None) -> None:
    """One multiple-choice question (nothing when question is None), then its feedback.

    key: the question's name on its page (QUESTIONS); the widget's key is WIDGET_PREFIX + key.
    """
    if question is None:
        return
    store = _store()
    widget_key = WIDGET_PREFIX + key
    version = _version(question)
    seen = store["versions"]
    if seen.get(widget_key) != version:  # a new sentence, slider or model: a new question
        # set, not deleted: a value set through session state also clears the browser's pick
        st.session_state[widget_key] = None
        seen[widget_key] = version
    options = question.options
    with st.container(border=True):
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
        )
        if picked is None:
            st.caption("Pick an answer before you look at the figure below: it gives it away.")
            return
        right = picked in question.answers
        computed = " or ".join(f"“{options[k]}”" for k in sorted(question.answers))
        answers = store["answers"].setdefault(store["current"], {})
        if answers.get(key, {}).get("version") != version:  # the first pick is the one counted
            # with the words the learner read, for the record they can download (views/check.py)
            answers[key] = {
                "version": version,
                "right": right,
                "prompt": question.prompt,
                "picked": options[picked],
                "answer": computed,
            }
        # "computed", not "the model's": page 0's toy has no model, and the numbers are the answer
        verdict = "**Right.**" if right else f"**Wrong.** The computed answer is {computed}."
        if answers[key]["right"] != right:
            verdict += " (Your first pick is the one counted in your progress.)"
        body = f"{verdict} {question.reason}  \n{question.numbers}"
        if right:
            st.success(body, icon=":material/check_circle:")
        else:
            st.warning(body, icon=":material/cancel:")
