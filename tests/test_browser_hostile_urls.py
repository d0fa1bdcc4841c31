"""Hostile links: every URL-bound key of the app, on every page, holding values a visitor chose.

A link is visitor input. Whatever it holds (numbers out of range, Markdown links and images,
HTML and script, control characters, 10,000 characters of text, paths on the server, model
names), opening it must:
- draw the page or say what is wrong, with no exception, no script run and no injected element;
- show the sidebar's sentence and pair as they were sent, in their boxes;
- render no link or image the visitor wrote (Markdown `[x](url)` and `![x](url)` stay text);
- show no path of the server's file system;
- load no model that is not listed: a typed name waits for its Load button.
The keys are read from the source (every `bind="query-params"` widget in views/ and ui/), so a
control added later is attacked without touching this file. A second server runs with the
public-deployment switch, where folders and unlisted hub ids are refused outright.

Every page gets both links headless (tests/test_hostile_links_headless.py reads what the server
sends as the browser would). Here chromium draws them on BROWSED_PAGES: the Overview (the
sidebar), the heatmaps (an HTML figure and boxes of its own) and the head view (script of its
own), and the XSS trap sees whether any script ran.
"""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

import pytest
from bound_keys import url_bound_keys
from test_browser_suite import (
    LONG_HOSTILE,
    SENTENCE_TAB,
    SHORT_HOSTILE,
    SHOWN,
    Tab,
    new_tab,
)

import core
from tests.support.browser import (
    ROOT,
    AppPage,
    app_pages,
    bound_text_keys,
    box_value,
    served_app,
    sidebar_pair,
    sidebar_text,
    wait_for_figure,
)

pytestmark = pytest.mark.browser

PAGES = app_pages()
BROWSED_PAGES = [
    p for p in PAGES if p.path in ("views/overview.py", "views/heatmaps.py", "views/head_view.py")
]

LINK = "[Re-login](https://example.com/login)"
IMAGE = "![x](https://example.com/pixel.png)"
HOSTILE_VALUES = (
    LINK,
    IMAGE,
    '<img src=x onerror="window.__x=1">',
    "-1",
    "99999999999999999999",
    "NaN",
    "1e309",
    "../../../etc/passwd",
    "~/.ssh/id_rsa",
    ":red[alarm] $x^2$ **bold**",
    "\x00\u202e",
    "",
)
# Elements that exist only if a visitor's Markdown or HTML was rendered as such.
VISITOR_MARKUP_JS = """
() => [...document.querySelectorAll(
    'a[href*="example.com"], img[src*="example.com"], img[src="x"], [onerror], [onload]'
  )].map(e => e.outerHTML.slice(0, 120))
"""
# A select box is bound to the URL by its label (DESIGN.md): these are what a copied link holds.
OTHER, BERT_BASE = "other · hub id or folder", core.SUGGESTED_MODELS["bert-base-uncased"].label
LOAD_BUTTON = ".st-key-load_custom_model button"  # the sidebar's Load button for a typed model
SERVER_PATHS = (str(ROOT), str(Path(sys.prefix)), "site-packages", "/root", "/etc/passwd:")


KEYS = url_bound_keys()


def hostile_query(round_index: int, model: str) -> dict[str, str]:
    """Every key gets a hostile value, a different one each round; the model key is chosen."""
    query = {
        key: HOSTILE_VALUES[(i + round_index) % len(HOSTILE_VALUES)] for i, key in enumerate(KEYS)
    }
    query["model"] = model
    query["text"] = f"{LINK} {IMAGE} the river bank"  # readable, so every page draws
    return query


def assert_nothing_leaks(tab: Tab, where: str) -> None:
    tab.assert_shows_text_or_message(where)
    page = tab.page
    assert not page.evaluate(VISITOR_MARKUP_JS), f"{where}: visitor markup became an element"
    body = page.evaluate("() => document.body.innerText")
    leaked = [path for path in SERVER_PATHS if path in body]
    assert not leaked, f"{where}: the page shows a server path {leaked}"


def test_the_attack_reaches_every_kind_of_control():
    assert {"text", "pair", "model", "custom_model", "scale", "causal", "layer", "head"} <= set(
        KEYS
    )
    assert len(KEYS) > 20, KEYS


@pytest.fixture
def tab(browser, server):
    tab, context = new_tab(browser, server)
    yield tab
    context.close()


def hostile_link(app_page: AppPage, round_index: int, model: str) -> dict[str, str]:
    """hostile_query(), with the hostile texts in every text key: the sidebar's sentence and
    pair and the page's own boxes take the short and the 10,000-character string in turn.

    (A page that draws one tab at a time is opened on the tab that reads the sentence by
    Tab.open_on_sentence_tab.)"""
    text, other = (
        (SHORT_HOSTILE, LONG_HOSTILE)[round_index],
        (LONG_HOSTILE, SHORT_HOSTILE)[round_index],
    )
    query = hostile_query(round_index, model)
    for i, key in enumerate(["text", "pair", *bound_text_keys(app_page)]):
        query[key] = text if i % 2 == 0 else other
    return query


# The two links, as (round, model): a typed model name, then a listed model that cannot be had
# here (the hub is a closed port). The rounds also swap the hostile values between the keys and
# the short and long texts between the text keys (hostile_link).
ROUNDS = ((0, OTHER), (1, BERT_BASE))


def assert_link_shown_as_sent(tab: Tab, query: dict[str, str], model: str, where: str) -> None:
    """The sidebar's sentence and pair as the link sent them; a typed model waits for Load."""
    # One load, no retry: box_value waits out the frame on which Streamlit paints a box empty
    # before filling it (tests/support/browser.py says why).
    for key, box in (("text", sidebar_text(tab.page)), ("pair", sidebar_pair(tab.page))):
        shown = box_value(box, query[key])
        assert shown == query[key], f"{where}: the link's {key} was altered: {shown[:80]!r}"
    if model == OTHER and query["custom_model"].strip():
        try:  # the script has finished; the sidebar may still be drawing
            tab.page.locator(LOAD_BUTTON).wait_for(timeout=15_000)
        except Exception as err:
            raise AssertionError(f"{where}: a typed model needs its Load button") from err
        alerts = tab.page.locator('[data-testid="stAlert"]').all_inner_texts()
        assert not any("Could not load" in a for a in alerts), f"{where}: it was loaded"


@pytest.mark.parametrize("app_page", BROWSED_PAGES, ids=[Path(p.path).stem for p in BROWSED_PAGES])
def test_hostile_values_in_every_url_key(tab, app_page):
    """One link per page, every key hostile; the pages take the two ROUNDS in turn. (Every page
    gets both rounds headless: test_hostile_links_headless.py; and garbage in every key:
    test_url_values.py.) The sidebar's sentence and pair arrive unaltered in their
    boxes (a page's own boxes cut a text at their max_chars); nothing the visitor wrote becomes
    markup, script or a server path."""
    round_index, model = ROUNDS[BROWSED_PAGES.index(app_page) % len(ROUNDS)]
    where = f"{app_page.title}, round {round_index} (model={model[:20]})"
    query = hostile_link(app_page, round_index, model)
    tab.open_on_sentence_tab(app_page, query)
    assert_nothing_leaks(tab, where)
    assert_link_shown_as_sent(tab, query, model, where)
    if app_page.path in SENTENCE_TAB:  # and the tab key hostile too, in the other round
        other_round, other_model = ROUNDS[(round_index + 1) % len(ROUNDS)]
        tab.open(app_page, hostile_query(other_round, other_model))
        assert_nothing_leaks(tab, f"{app_page.title}, hostile tab, round {other_round}")


def test_a_typed_model_from_a_link_is_shown_as_text_with_a_load_button(tab):
    query = {"model": OTHER, "custom_model": LINK}
    tab.open(PAGES[0], query)
    wait_for_figure(tab.page)
    assert_nothing_leaks(tab, "custom model link")
    box = tab.page.get_by_label("Hub id or local folder")
    assert box_value(box, LINK) == LINK  # painted empty for a frame first (box_value)
    button = tab.page.locator(LOAD_BUTTON)
    shown = button.inner_text().replace("\u2060", "")  # the invisible joiner that stops autolinks
    assert LINK in shown, "the button names the model as typed, as text"


# ---- the public-deployment switch ---------------------------------------------------------------
@pytest.fixture(scope="module")
def public_server():
    with served_app(extra_env={"ATTENTION_EXPLORER_PUBLIC": "1"}) as app:
        yield app


# Unlisted models a link may name on a public server, and what it says of each.
PUBLIC_REFUSALS = (
    ("../../../etc", "is not a model this server can load"),
    (str(ROOT), "is not a model this server can load"),
    ("someone/huge-model", "is not a model this server can load"),
)


def test_a_public_server_refuses_unlisted_models_from_a_link(browser, public_server):
    """Each of PUBLIC_REFUSALS in its own link, opened in turn in one browser context (each
    load a new session): the reason is shown, no Load button, no box for a folder ("Hub id"
    only), and the page stays healthy. (One test, so one public server is started for them.)"""
    tab, context = new_tab(browser, public_server)
    try:
        for custom, reason in PUBLIC_REFUSALS:
            url = f"{public_server.url}/?" + urllib.parse.urlencode(
                {"model": "other · hub id", "custom_model": custom}
            )
            tab.goto(url)
            wait_for_figure(tab.page)
            tab.page.wait_for_selector(SHOWN)
            alerts = " ".join(tab.page.locator('[data-testid="stAlert"]').all_inner_texts())
            assert reason in alerts, (custom, alerts)
            assert tab.page.locator(LOAD_BUTTON).count() == 0, custom
            assert tab.page.get_by_label("Hub id or local folder").count() == 0  # "Hub id" only
            tab.assert_healthy(f"public server, {custom}")
    finally:
        context.close()
