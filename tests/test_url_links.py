"""A copied link reopens exactly the view, headless: every control of every page lives in the URL.

Per page (and once more on the tab of a page that reads the sentence): open it with the sidebar's
switches off their defaults and change every control a visitor can change, one at a time. Then
write the link as the browser writes it (Streamlit's frontend puts a bound widget's value in the
address bar: `link_value` below, in the format tests/test_browser_links.py reads off chromium's
address bar) and open it in a new session: the controls come back with the values they had, and
the page sends the browser the same plotly figures, HTML figures and Markdown. A control that is
not bound to the URL comes back at its default, and the test names it. AppTest runs the same
server code as a browser session, without drawing, so every page is covered in seconds; the
browser half, on a few pages, is tests/test_browser_links.py.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, assert_no_exception

from tests.support.browser import SENTENCE_TAB, AppPage, app_pages

PAGES = app_pages()
SENTENCE = "The old bank by the river closed."  # short: every page stays quick
SIDEBAR_CHANGED = {
    "pair": "The water rose.",
    "scale": "false",
    "causal": "true",
    "image_format": "SVG",
}
KINDS = (  # AppTest's names of the controls a visitor changes by hand
    "slider",
    "select_slider",
    "selectbox",
    "multiselect",
    "radio",
    "checkbox",
    "toggle",
    "number_input",
    "text_input",
    "text_area",
)
LEFT_ALONE = {  # by key: what a link does not carry, by design
    "model",  # another model needs the network or its Load button (tests/test_door_pages.py)
    "custom_model",
    "text",  # the sentence and pair come in the link; typing them is the browser tour's part
    "pair",
}
# The sidebar's box repeated for phones, keyed by the text it holds (ui/sidebar.py): the
# sidebar's own is the bound one.
LEFT_ALONE_PREFIXES = ("text_in_page_",)
# The check's answers stay in the visitor's session (ui/check_questions.py): a teacher's link
# opens the questions, never someone's answers.
SESSION_ONLY_PREFIXES = ("check_before_", "check_after_", "check_code", "predict_")
# Figures that show this session's history, not the view: the lab's runs side by side, and the
# preloaded plotly bundle (the browser test leaves the same ones out).
HISTORY_PREFIXES = ("_plotly_preload", "lab_side_by_side", "lab_final_")


def link_cases() -> list[tuple[AppPage, dict[str, str]]]:
    cases = [(app_page, {}) for app_page in PAGES]
    cases += [(p, SENTENCE_TAB[p.path]) for p in PAGES if p.path in SENTENCE_TAB]
    return cases


LINK_CASES = link_cases()
LINK_CASE_IDS = [
    (p.url_path or "overview") + "".join(f"-{v.split()[-1].lower()}" for v in tab.values())
    for p, tab in LINK_CASES
]


def open_link(page: str, query: dict[str, str]):
    """A new session opening this URL: the page named by its path, the query as sent."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page(page)  # a link names its page in its path: the session opens on it
    return at.run()


def _is_left_alone(key: str | None) -> bool:
    return (
        key is None
        or key in LEFT_ALONE
        or key.startswith(SESSION_ONLY_PREFIXES + LEFT_ALONE_PREFIXES)
    )


SELECT_KINDS = ("selectbox", "radio", "multiselect", "select_slider")


def choose(widget, labels: list[str]) -> None:
    """Pick a select widget's options by their labels, as the browser does: the frontend knows
    only the labels, and sends them (Streamlit maps a label back to its value on the server)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    state = WidgetState()
    state.id = widget.id
    if widget.type in ("multiselect", "select_slider"):
        state.string_array_value.data[:] = labels
    else:
        state.string_value = labels[0]

    class Chosen(type(widget)):
        @property
        def _widget_state(self) -> WidgetState:
            return state

    widget.__class__ = Chosen


def shown_labels(widget) -> list[str]:
    """The labels of what a select widget has picked now."""
    picked = widget.value if widget.type == "multiselect" else [widget.value]
    return [str(widget.format_func(v)) for v in picked if v is not None]


def other_value(widget):
    """A value other than the widget's current one, as a visitor's click or key press makes."""
    kind = widget.type
    if kind in ("checkbox", "toggle"):
        return not widget.value
    if kind == "slider":
        value, step = widget.value, widget.step
        if isinstance(value, (tuple, list)):  # a range: move its upper end
            upper = value[1] - step if value[1] + step > widget.max else value[1] + step
            return (value[0], upper)
        return value - step if value + step > widget.max else value + step
    if kind == "number_input":
        step = widget.step or 1
        top = widget.max if widget.max is not None else float("inf")
        return widget.value - step if widget.value + step > top else widget.value + step
    if kind in ("text_input", "text_area"):
        return ((widget.value or "") + " bank").strip()
    # a select widget: labels, as its options are shown
    shown_now = shown_labels(widget)
    others = [o for o in widget.options if o not in shown_now]
    assert others, f"{widget.label!r}: nothing to change to"
    if kind == "multiselect":
        return [*shown_now, others[0]]
    if kind == "select_slider":
        now = widget.options.index(shown_now[0])
        return [widget.options[now - 1 if now else 1]]
    return [others[min(1, len(others) - 1)]]  # selectbox, radio


def controls(at, sidebar: bool) -> list:
    """The page's enabled controls a link carries (the sidebar's too, if asked)."""
    roots = [at.main, *([at.sidebar] if sidebar else [])]
    found = []
    for root in roots:
        for kind in KINDS:
            found += [w for w in root.get(kind) if not w.disabled and not _is_left_alone(w.key)]
    return found


def change_every_control(at, sidebar: bool) -> list[str]:
    """Change each control once (a change can reveal new ones); every change moves the URL."""
    done: list[str] = []
    for _ in range(4):
        pending = [w for w in controls(at, sidebar) if w.key not in done]
        if not pending:
            break
        for widget in pending:
            current = {w.key: w for w in controls(at, sidebar)}
            if widget.key not in current:
                continue  # hidden by an earlier change; looked for again on the next pass
            control, new = current[widget.key], other_value(current[widget.key])
            if control.type in SELECT_KINDS:
                choose(control, new)
            else:
                control.set_value(new)
            at.run()
            assert_no_exception(at)
            done.append(widget.key)
    return done


def link_value(widget) -> str | list[str]:
    """A control's value as the frontend writes it into the URL: a switch as true/false, a
    number as written, a choice by its label, several choices as the key repeated."""
    value = widget.value
    if widget.type in ("checkbox", "toggle"):
        return "true" if value else "false"
    if widget.type in ("slider", "number_input"):
        numbers = value if isinstance(value, (tuple, list)) else [value]
        written = [str(int(v)) if float(v).is_integer() else repr(v) for v in numbers]
        return written if len(written) > 1 else written[0]
    if widget.type in ("text_input", "text_area"):
        return value or ""
    labels = shown_labels(widget)
    return labels if widget.type == "multiselect" else labels[0]


def copied_link(at, query: dict[str, str]) -> dict[str, object]:
    """The URL after the changes: what the page opened with, and every control's value."""
    return {**query, **{w.key: link_value(w) for w in controls(at, sidebar=True)}}


def sent(at) -> dict[str, object]:
    """What the session sends the browser that a link must reproduce."""
    figures = [
        json.loads(chart.proto.spec)
        for chart in at.get("plotly_chart")
        if not (chart.key or "").startswith(HISTORY_PREFIXES)
    ]
    return {
        "figures": figures,
        "html": [element.proto.body for element in at.get("html")],
        "controls": [(w.key, w.value) for w in controls(at, sidebar=True)],
        "markdown": [element.value for element in at.get("markdown")],
    }


@pytest.mark.parametrize("app_page, on_tab", LINK_CASES, ids=LINK_CASE_IDS)
def test_every_control_survives_a_copied_link(app_page: AppPage, on_tab: dict[str, str]):
    first_page = app_page == PAGES[0]  # the sidebar's controls are changed by hand here
    query = {"text": SENTENCE} if first_page else {**SIDEBAR_CHANGED, "text": SENTENCE}
    at = open_link(app_page.path, {**query, **on_tab})
    assert_no_exception(at)
    changed = change_every_control(at, sidebar=first_page)  # none in a tab that has none
    if first_page:
        assert set(SIDEBAR_CHANGED) - {"pair"} <= set(changed)
    copied = copied_link(at, {**query, **on_tab})
    again = open_link(app_page.path, copied)
    assert_no_exception(again)
    expected, reopened = sent(at), sent(again)
    lost = [
        key
        for (key, value), (_, back) in zip(expected["controls"], reopened["controls"], strict=False)
        if value != back
    ]
    assert not lost and len(reopened["controls"]) == len(expected["controls"]), (
        f"{app_page.title}: the link did not bring back {lost or 'the same controls'}"
    )
    for part in ("figures", "html", "markdown"):
        assert reopened[part] == expected[part], (
            f"{app_page.title}: the copied link sent other {part} (changed {changed}; URL {copied})"
        )
