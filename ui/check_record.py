"""The learner's record: one HTML page with their check answers, before and after, and their
"predict, then see" picks on the course's pages. Built from this session's state when the page
is drawn and handed to the browser as a download: no account, nothing kept on the server.

Every string here is Markdown from the questions, whose visitor text (the sentence, a model's
pieces) ui.escape.literal has already turned into character references. _inline_html turns the
little Markdown they use into HTML and escapes everything else, leaving those references as they
are, so visitor text stays text in the record as on the page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ui.check_questions import (
    AFTER,
    BEFORE,
    QUESTIONS,
    Pick,
    compared,
    computed_answer,
    first_round_code,
    verdict,
)
from ui.escape import literal
from ui.predict_answers import Question

SENTENCE_CHARS = 300  # the record names the sentence; a pasted essay is shortened
_LOOSE_AMPERSAND = re.compile(r"&(?!#\d+;)")  # an & that does not start a character reference
_BOLD = re.compile(r"\*\*(.+?)\*\*")

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; color: #111; background: #fff; max-width: 60rem;
       margin: 1.5rem auto; padding: 0 1rem; }
h1 { font-size: 1.4rem; margin-bottom: 0.2rem; } h2 { font-size: 1.1rem; margin-top: 1.4rem; }
table { border-collapse: collapse; width: 100%; } th, td { border: 1px solid #bbb;
        padding: 0.3rem 0.45rem; text-align: left; vertical-align: top; }
th { background: #eee; } .small { color: #444; font-size: 0.9em; }
@media print { body { margin: 0; font-size: 12px; } }
"""


def _inline_html(markdown: str) -> str:
    """The questions' Markdown (bold, line breaks, character references) as HTML."""
    text = _LOOSE_AMPERSAND.sub("&amp;", markdown).replace("<", "&lt;").replace(">", "&gt;")
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    return text.replace("  \n", "<br>")


def _row(*cells: str, header: bool = False) -> str:
    tag = "th" if header else "td"
    return "<tr>" + "".join(f"<{tag}>{_inline_html(cell)}</{tag}>" for cell in cells) + "</tr>"


def _check_table(questions: Mapping[str, Question], picks: Mapping[str, Mapping[str, Pick]]) -> str:
    """The check, question by question: both rounds' picks, then the answer and the numbers once
    the second round has answered it (until then the record gives nothing away, as the page)."""
    rows = [_row("Question", "Before the course", "After the course", "Answer", header=True)]
    for item in QUESTIONS:
        question = questions[item.key]
        before, after = picks[BEFORE].get(item.key), picks[AFTER].get(item.key)
        if after is None:
            first = "answered: “" + before["option"] + "”" if before is not None else "—"
            answer = "shown after the second round"
        else:
            first = verdict(question, before)
            answer = f"{computed_answer(question)}  \n{question.numbers}"
        rows.append(
            _row(f"**{item.name}.** {question.prompt}", first, verdict(question, after), answer)
        )
    return "<table>" + "".join(rows) + "</table>"


def _score_line(questions: Mapping[str, Question], picks: Mapping[str, Mapping[str, Pick]]) -> str:
    """The two rounds' scores over the questions answered in both, once the second has begun."""
    revealed, right_before, right_after = compared(questions, picks)
    if not revealed:
        return ""
    return (
        f"<p>Of the {revealed} questions answered after the course: {right_before} right before "
        f"it, {right_after} right after.</p>"
    )


def _predictions_table(
    predictions: Mapping[str, Mapping[str, Mapping[str, object]]], titles: Mapping[str, str]
) -> str:
    """The pages' "predict, then see" questions: each first pick, right or wrong, the answer."""
    rows = []
    for page, entries in predictions.items():
        for entry in entries.values():
            if "prompt" not in entry:  # recorded before the record kept its text
                continue
            mark = "✓ " if entry["right"] else "✗ "
            rows.append(
                _row(
                    literal(titles.get(page, page)),
                    str(entry["prompt"]),
                    mark + str(entry["picked"]),
                    str(entry["answer"]),
                )
            )
    if not rows:
        return "<p>None answered yet in this session.</p>"
    head = _row("Page", "Question", "Your first pick", "Computed answer", header=True)
    return "<table>" + head + "".join(rows) + "</table>"


def record_html(
    questions: Mapping[str, Question],
    picks: Mapping[str, Mapping[str, Pick]],
    predictions: Mapping[str, Mapping[str, Mapping[str, object]]],
    titles: Mapping[str, str],
    model_label: str,
    sentence: str,
) -> str:
    """The whole record as one self-contained HTML page (no script, no external file).

    questions: the check's questions on screen (check_questions.built); picks: both rounds'
    picks (check_questions.answers()); predictions: ui.predict's answers by page URL path;
    titles: each URL path's page title; model_label: escaped already; sentence: visitor text.
    """
    shown_sentence = literal(sentence, max_chars=SENTENCE_CHARS)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<title>Attention Explorer: my record</title>"
        f"<style>{STYLE}</style></head><body>"
        "<h1>Attention Explorer: my record</h1>"
        + "<p class='small'>"
        + _inline_html(
            "Written by the app in the learner's browser session; nothing of it is kept on the "
            f"server. The numbers are {model_label}'s, on the sentence “{shown_sentence}”."
        )
        + "</p>"
        + "<h2>The check, before and after the course</h2>"
        + f"<p>First-round code: <code>{first_round_code(picks)}</code></p>"
        + _score_line(questions, picks)
        + _check_table(questions, picks)
        + "<h2>Predict, then see: the course's pages</h2>"
        + _predictions_table(predictions, titles)
        + "</body></html>"
    )
