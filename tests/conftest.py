"""Shared fixtures: the bundled model (loaded once) and AppTest helpers for the pages."""

from __future__ import annotations

import os
import re
import socket
import sys
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The repository root: for core/ and ui/, and for tests.support.browser (the app server, chromium,
# waiting for runs, opening every tab), the one harness the tests share with the bench scripts.
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "0")  # the registry must fail fast on its own, not by flag


def _closed_loopback_port() -> int:
    """A loopback port nothing listens on: connections to it are refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the socket closes


# The hub is unreachable on purpose, whatever this machine's network: its address is a closed
# port on loopback, set before huggingface_hub is imported (it reads HF_ENDPOINT once). Servers
# started by the browser tests inherit it. No test depends on the machine being offline.
UNREACHABLE_HUB = f"http://127.0.0.1:{_closed_loopback_port()}"
os.environ["HF_ENDPOINT"] = UNREACHABLE_HUB

LONG_TEXT = " ".join(["attention"] * 3000)  # a 3,000-word input: truncated to 512 pieces
BAD_INPUTS = {
    "empty": "",
    "whitespace": "   \n\t ",
    "control": "\x00\x01\x07",
    "html": '</script><script>window.__x=1</script><img src=x onerror="alert(1)">',
    "emoji_cjk_rtl": "I ❤️ 東京 \u202etxet\u202c 👩‍👩‍👧 bank",
    "long_word": "a" * 1000,
    "ten_thousand": "bank " * 2000,
}


def _drives_a_browser(item: pytest.Item) -> bool:
    """A test of a test_browser_* module, one that asks for the browser or the app server, or
    one that starts chromium itself."""
    if item.path.name.startswith("test_browser_"):
        return True
    if {"browser", "server"} & set(getattr(item, "fixturenames", ())):
        return True
    code = getattr(getattr(item, "function", None), "__code__", None)
    return code is not None and "chromium" in code.co_varnames + code.co_names


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests first (10-90 s each), unit tests after (mostly under a second).

    The workers take tests in this order, so the short ones fill the gaps at the end instead of
    one worker finishing a 60 s browser test while the others wait. Stable: otherwise the
    collection order stands, and every worker sorts alike, as pytest-xdist requires.
    """
    items.sort(key=lambda item: not _drives_a_browser(item))


# One app server per test process (per xdist worker), shared by every browser test that asks for
# it: each test opens its own browser context, hence its own Streamlit session, so tests meet only
# in the server's caches, as visitors do. (One per module cost a server start, torch and the model
# loaded again, each time a worker moved to another module.) One chromium per module: Playwright's
# sync API runs one instance per thread, and some tests start their own. Imported lazily: the
# unit tests need neither playwright nor a server.
@pytest.fixture(scope="session")
def server():
    from tests.support.browser import LOCAL_USER_ENV, served_app

    with served_app(extra_env=LOCAL_USER_ENV) as app:
        yield app


@pytest.fixture(scope="module")
def browser():
    from tests.support.browser import chromium

    with chromium() as instance:
        yield instance


@pytest.fixture(scope="session")
def model():
    import core

    return core.load_model("minilm")


def page_paths() -> list[str]:
    """Every page of app.py's navigation, as a path relative to the repo, in the course's order
    (ui/path.py, from which app.py builds its navigation)."""
    from ui import path

    return [step.file for step in path.STEPS]


@pytest.fixture()
def local_folders(monkeypatch):
    """A local user's server: a checkpoint folder may be loaded (the public one refuses)."""
    from ui import models

    monkeypatch.setenv("ATTENTION_EXPLORER_LOCAL_FOLDERS", "1")
    models.policy.clear()
    yield
    models.policy.clear()


def run_page(
    page: str,
    text: str | None = None,
    pair: str | None = None,
    timeout: float = 120,
    query: dict[str, str] | None = None,
    folder: str | Path | None = None,
    state: dict[str, object] | None = None,
    answered: bool = True,
):
    """Run app.py headless on `page` with the sidebar text set (and these URL query parameters);
    return the finished AppTest. folder: a checkpoint folder loaded as after its Load button
    (with the local_folders fixture); state: session values set before the first run (a tab).

    answered: every "predict, then see" question starts answered with its first option, as a
    learner's picks do, so the figures a question folds away until answered are drawn (a question
    whose sentence or slider changes later starts unanswered again: ui/predict.py).
    """
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    if answered:
        answer_every_question(at)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if folder is not None:
        at.session_state["model"] = "other"
        at.session_state["custom_model"] = str(folder)
        at.session_state["_confirmed_custom_model"] = str(folder)  # what the Load button sets
    if text is not None:
        at.session_state["text"] = text
    if pair is not None:
        at.session_state["pair"] = pair
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    if page != page_paths()[0]:
        at.switch_page(page)
        at.run()
    return at


def answer_every_question(at) -> None:
    """Before an AppTest's first run: every "predict, then see" question of the course answered
    with its first option (through the pills' session state, as a learner's pick), so the
    figures each question keeps folded until answered are drawn."""
    from ui import predict

    for keys in predict.QUESTIONS.values():
        for key in keys:
            at.session_state[predict.WIDGET_PREFIX + key] = 0


def answer_open_questions(at):
    """Pick the first option of every "predict, then see" question on screen that is still
    unanswered (a question whose sentence or slider changed starts so), then rerun: the figures
    they fold are drawn. Returns the AppTest."""
    from ui import predict

    unanswered = [
        widget
        for widget in at.button_group
        if (widget.key or "").startswith(predict.WIDGET_PREFIX) and widget.value is None
    ]
    for widget in unanswered:
        widget.set_value(0)
    return at.run() if unanswered else at


def open_tab(at, key: str, label: str):
    """Rerun a page with one of its tabs open, as a click on that tab does
    (widgets.section_tabs: only the open tab is drawn)."""
    at.session_state[key] = label
    if key in at.query_params:  # keep the test's URL saying what is open, as the app's would
        at.query_params[key] = label
    return at.run()


def section_labels(view: str) -> list[str]:
    """The tab labels of a page drawn one section at a time, read from its SECTIONS dict
    ([] for a page drawn whole)."""
    import ast

    for node in ast.walk(ast.parse((ROOT / view).read_text())):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SECTIONS":
            return [key.value for key in node.value.keys]
    return []


def section_key(view: str) -> str | None:
    """The URL key of the open tab (widgets.section_tabs(..., key=...)), None without tabs."""
    import ast

    for node in ast.walk(ast.parse((ROOT / view).read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "section_tabs":
            return next(k.value.value for k in node.keywords if k.arg == "key")
    return None


def assert_each_tab_draws(at, view: str, figures: dict[str, set[str]]) -> None:
    """Open every tab of a page drawn one tab at a time, in order: the tabs are the view's
    SECTIONS, and each sends its own figures (by key) and no other tab's, since a closed tab
    sends nothing to the browser. Leaves the last tab open."""
    assert [tab.label for tab in at.tabs] == list(figures) == section_labels(view)
    headings = set()
    for label, keys in figures.items():
        open_tab(at, section_key(view), label)
        assert_no_exception(at)
        assert drawn_figures(at) == keys, label
        headings.add(tuple(heading.value for heading in at.subheader))
    # each tab opened on its own section (a tab without figures passes the check above only if
    # it really opened): every section starts with its own heading
    assert len(headings) == len(figures), "a tab did not open"


_FIGURE_NAME = re.compile(r'<figure class="ae-[a-z -]+" data-figure="([^"]+)"')


def drawn_figures(at) -> set[str]:
    """The figures the page sent: its plotly charts by key, its named HTML figures (value
    grids, bars and attention grids of ui/html_heatmap.py) by their data-figure name."""
    grids = {
        name for element in at.get("html") for name in _FIGURE_NAME.findall(element.proto.body)
    }
    return {chart.key for chart in at.get("plotly_chart")} | grids


def each_tab(at, view: str):
    """Yield the page as it is, then rerun it with each tab of the view open in turn, the first
    too (a link may have opened another); a page drawn whole, or one that stopped before its
    tabs, yields once."""
    yield at
    if not at.tabs:
        return
    for label in section_labels(view):
        yield open_tab(at, section_key(view), label)


def takeaway_text(at) -> str:
    """The page's one takeaway sentence as sent (ui/takeaway.py), its lead words stripped;
    fails unless the page sent exactly one."""
    from ui import takeaway

    found = [m.value for m in at.markdown if m.value.startswith(takeaway.LEAD)]
    assert len(found) == 1, f"expected one takeaway, found {found}"
    return found[0].removeprefix(takeaway.LEAD).strip()


def assert_no_exception(at) -> None:
    errors = [e.value for e in at.exception]
    assert not errors, f"page raised: {errors}"


def written_share(keys: int) -> str:
    """1/keys as a learner would write it, from decimal arithmetic: exact where it ends within
    three decimals (1/8 = 0.125, 1/4 = 0.25), else about two (1/3 ≈ 0.33)."""
    exact = (Decimal(1) / keys).normalize()
    exponent = exact.as_tuple().exponent
    if exponent >= -3:  # at least two decimals, as the app prints weights
        return f"1/{keys} = {exact if exponent == -3 else exact.quantize(Decimal('0.01'))}"
    return f"1/{keys} ≈ {exact.quantize(Decimal('0.01'))}"
