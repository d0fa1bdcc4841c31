"""Check, before and after: a few questions at the start of the course and again at its end."""

import streamlit as st

from ui import (
    check_questions,
    check_record,
    check_runs,
    models,
    path,
    predict,
    state,
    traces,
    widgets,
)

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose

widgets.page_title("Check, before and after")
n_questions = len(check_questions.QUESTIONS)
st.markdown(
    f"Here are {n_questions} questions the course teaches you to reason out. Answer them now, "
    "before the course, and again at its end: the second round gives the answers, with the "
    "numbers of the model and sentence on screen, and sets each of your answers beside your "
    "first."
)
st.caption(
    "Your answers stay in this browser tab, for this visit: nothing is stored on the server "
    "(after a reload, a short code brings your first round back). The record tab downloads them, with your predictions on the "
    "course's pages, as one page to keep or hand in. This page's address opens the tab and "
    "sentence on screen: a teacher can hand it out as a link."
)
# the runs the feedback quotes: ends the page with a message on an empty sentence
traces.trace_or_stop(model, inputs, scale=True, causal=model.is_decoder)
numbers = check_runs.feedback_numbers(model, inputs.text, inputs.pair)
questions = check_questions.built(numbers, model_label)


def ask_round(round_name: str) -> None:
    """One round: every question, in order."""
    for number, item in enumerate(check_questions.QUESTIONS, start=1):
        check_questions.ask(round_name, number, item.key, questions[item.key])


def before_round() -> None:
    st.subheader("Before the course")
    st.info(
        "Pick what you expect. Nothing tells you yet whether it is right: the answers come in "
        "the second round.",
        icon=":material/help:",
    )
    ask_round(check_questions.BEFORE)
    code = check_questions.first_round_code(check_questions.answers())
    st.markdown(
        f"Your first-round code: `{code}`. This tab forgets your answers when it is reloaded "
        "or closed: note the code (or download the record), and type it in at the start of the "
        "second round."
    )
    st.page_link(
        path.neighbours(path.step_of(path.CHECK_FILE))[1].file,
        label="Done: on to the course",
        icon=":material/arrow_forward:",
    )


def after_round() -> None:
    st.subheader("After the course")
    st.markdown(
        f"The same {n_questions} questions, after the course. Each answer now shows whether it "
        "is right, why, the numbers behind it, and what you picked in the first round."
    )
    check_questions.first_round_box(questions)  # after a reload: the first round back
    ask_round(check_questions.AFTER)


def record() -> None:
    st.subheader("Your record")
    revealed, right_before, right_after = check_questions.compared(
        questions, check_questions.answers()
    )
    if revealed:
        st.markdown(
            f"Of the {revealed} questions answered after the course: **{right_before}** right "
            f"before it, **{right_after}** right after."
        )
    titles = {path.url_path(step): step.title for step in path.STEPS}
    st.download_button(
        "Download your record (HTML)",
        data=check_record.record_html(
            questions,
            check_questions.answers(),
            predict.answered(),
            titles,
            model_label,
            inputs.text,
        ),
        file_name="attention-explorer-record.html",
        mime="text/html",
        icon=":material/download:",
        on_click="ignore",  # downloading must not rerun the page
        help="One page with both rounds of this check and your first pick on every "
        "“Predict, then see” question of the course, built from this visit: open it in a "
        "browser, print it or hand it in.",
    )
    st.markdown(
        "Your two rounds side by side (a first answer is marked right or wrong once you have "
        "answered the question again):"
    )
    st.markdown(check_questions.side_by_side(questions))


# The tab labels are in the URL (check_tab): ui/path.py's end-of-course link opens the second
# round by its label, CHECK_AFTER_TAB.
SECTIONS = {
    "Before the course": before_round,
    "After the course": after_round,
    "Your record": record,
}
widgets.section_tabs(SECTIONS, key="check_tab")
