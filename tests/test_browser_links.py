"""A copied link reopens exactly the view, in chromium: the address bar carries every control.

Every page and tab is covered headless (tests/test_url_links.py: every control changed, the link
reopened, the same figures sent). Here, in a real browser, on the Overview and the three pages
that between them hold every kind of control (LINK_PAGES): open one, change every control a
visitor can change (sliders, select sliders, select boxes, multiselects, radios, toggles, number
inputs and the page's own text boxes), checking after each change that the address bar changed
with it; then open the copied address in a fresh browser context (its own session), a phone in
dark mode, and compare the figures' data, titles, tick labels and export format, the texts,
switches and sliders, and the address itself with the first context's; the phone's page must
fit the phone (tests/test_browser_devices.py, assert_phone_dark). Typing the sidebar's sentence
and pair on every page is the navigation tour's part (tests/test_browser_suite.py).

Also here, on the Overview's link: the sidebar's sentence box after opening a link. Streamlit
1.67 paints every text box empty for a frame before its value arrives; the test shows that a
link's sentence is never lost and that no second rerun is involved.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from test_browser_devices import PHONE_DARK, assert_light_desktop, assert_phone_dark
from test_browser_suite import (
    query_of,
    wait_boxes_filled,
    widget_state,
)

from tests.support.browser import (
    QUIET_MOTION,
    AppPage,
    RunWatcher,
    app_pages,
    box_value,
    commit_text,
    page_exceptions,
    sidebar_text,
    wait_drawn,
)

pytestmark = pytest.mark.browser

PAGES = app_pages()
PAGE_IDS = [Path(p.path).stem for p in PAGES]
VIEWPORT = {"width": 1400, "height": 1800}
SENTENCE = "The old bank by the river closed."  # short: every page stays quick

# Every plotly figure as data: the traces' JSON (numbers, labels, hover text), the title, and
# the format of the camera button (the sidebar's image-format choice). Streamlit's frontend
# wraps a title in <b> each time it redraws an unchanged figure (<b><b>…</b></b> after two
# reruns, drawn the same): the wrapping is removed before comparing. Numbers are compared as
# numbers: the server sends arrays as base64 ({dtype, bdata, shape}), and a head switched in the
# browser (display.HEAD_SWITCH_JS) holds plain arrays of the same values; plotly then also marks
# the trace zauto: false, which says nothing about what is drawn.
FIGURES_JS = """
() => {
  const TYPES = {f8: Float64Array, f4: Float32Array, i1: Int8Array, u1: Uint8Array,
                 i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array};
  const decode = value => {
    const bytes = Uint8Array.from(atob(value.bdata), c => c.charCodeAt(0));
    const flat = Array.from(new TYPES[value.dtype](bytes.buffer));
    const shape = typeof value.shape === 'string' ? value.shape.split(',').map(Number)
      : (value.shape || [flat.length]);
    if (shape.length === 1) return flat;
    return Array.from({length: shape[0]}, (_, r) => flat.slice(r * shape[1], (r + 1) * shape[1]));
  };
  const plain = (key, value) => {
    if (key === 'zauto') return undefined;
    if (value && typeof value === 'object' && typeof value.bdata === 'string' && TYPES[value.dtype])
      return decode(value);
    if (ArrayBuffer.isView(value)) return Array.from(value);
    return value;
  };
  return [...document.querySelectorAll('.js-plotly-plot')]
  // the lab's runs side by side are this session's history, as visited pages are: a link
  // carries the run on screen (its switches), not the runs before it
  .filter(g => !g.closest('.st-key-_plotly_preload, .st-key-lab_side_by_side, [class*="st-key-lab_final_"]'))
  .map(g => JSON.stringify([
    JSON.parse(JSON.stringify(g.data || [], plain)),
    (((g.layout || {}).title || {}).text || '').replace(/^(<b>)+|(<\\/b>)+$/g, ''),
    ((g._context || {}).toImageButtonOptions || {}).format || '',
    Object.keys(g.layout || {}).filter(k => /^[xy]axis[0-9]*$/.test(k)).sort()
      .map(k => [k, g.layout[k].ticktext || null, g.layout[k].tickvals || null]),
  ]));
}
"""
# The controls a visitor can change. The model picker is left to the model tests: choosing
# another model needs the network or a button press by design.
CONTROLS_JS = """
() => {
  const kinds = ['stSlider', 'stSelectSlider', 'stSelectbox', 'stMultiSelect', 'stRadio',
                 'stCheckbox', 'stToggle', 'stNumberInput', 'stTextInput', 'stTextArea'];
  const found = [];
  for (const kind of kinds) {
    document.querySelectorAll(`[data-testid="${kind}"]`).forEach(el => {
      // not drawn at this width (the Overview's sentence box for narrow screens): no visitor
      // here can change it
      if (!el.checkVisibility()) return;
      const label = (el.querySelector('[data-testid="stWidgetLabel"]') || el).innerText.trim()
        .split('\\n')[0];
      const inSidebar = !!el.closest('[data-testid="stSidebar"]');
      // React Aria's toggles say so on their label (data-disabled), not with a disabled input
      const disabled = !!el.querySelector(
        '[disabled], [aria-disabled="true"], [data-disabled="true"]');
      found.push({kind, label, inSidebar, disabled});
    });
  }
  return found;
}
"""
SKIPPED = {
    ("stSelectbox", "Model"),
    # the sidebar's sentence box repeated in the page for phones (ui/sidebar.py), hidden on a wide
    # screen; the sidebar's own box is the one bound to the link
    ("stTextArea", "Your sentence (the sidebar's, here while the sidebar is folded)"),
    # the check's answers stay in the visitor's session (ui/check_questions.py): a link a teacher
    # hands out opens the questions, never someone's answers
    ("stRadio", "Your answer"),
    (
        "stTextInput",
        "Your first-round code, if this tab was reloaded since (one letter per question)",
    ),
}
SIDEBAR_CONTROLS = (  # (URL key, label)
    ("pair", "Second sentence (optional)"),
    ("scale", "Scale scores by 1/√d_k"),
    ("causal", "Causal mask"),
    ("image_format", "Camera button saves figures as"),
)
SIDEBAR_CHANGED = {
    "pair": "The water rose.",
    "scale": "false",
    "causal": "true",
    "image_format": "SVG",
}


# Logs, on every animation frame, each change of the sidebar sentence box's value.
BOX_FRAMES_JS = """
(() => {
  window.__boxFrames = [];
  let last = null;
  const tick = () => {
    const box = document.querySelector('[data-testid="stSidebar"] textarea');
    const value = box ? box.value : null;
    if (value !== last) { window.__boxFrames.push(value); last = value; }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""


# The Overview's link in the copied-link test: its sentence is checked as the box paints it.
LINK_SENTENCE = "A link's sentence <b>survives</b> the first frame."


def assert_the_box_is_empty_for_a_frame_only(tab: Tab, sentence: str) -> None:
    """A link's sentence is never lost: the box goes from nothing to empty to the sentence.

    The empty frame is Streamlit's (1.67) own: its text area is mounted with no value and
    filled by a React effect just after, for every text box, bound or not, with or without a
    link (the same happens in a three-line app of two st.text_area calls). The browser sends
    one rerun request per load, so the empty frame cannot reach the server: the session keeps
    the link's text, and so does the address bar. Called right after the link's one load, on a
    Tab(watch_box=True).
    """
    page = tab.page
    assert box_value(sidebar_text(page), sentence) == sentence
    frames = page.evaluate("window.__boxFrames")
    assert frames[-1] == sentence
    assert set(frames) <= {None, "", sentence}, frames  # nothing else, ever
    assert len(tab.sent) == 1, f"the browser sent {len(tab.sent)} messages, not one rerun"
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)["text"] == [sentence]


class Tab:
    """One browser context and its page, with the run watcher and the page errors."""

    def __init__(self, browser, server, watch_box: bool = False, **device) -> None:
        """device: browser.new_context options in place of a light desktop (PHONE_DARK).
        watch_box: log the sidebar box's values frame by frame (BOX_FRAMES_JS) and keep every
        websocket message the browser sends (self.sent), from the first load on."""
        options = {"viewport": VIEWPORT, "color_scheme": "light", **QUIET_MOTION, **device}
        self.context = browser.new_context(**options)
        if watch_box:
            self.context.add_init_script(BOX_FRAMES_JS)
        self.page = self.context.new_page()
        self.sent: list[object] = []
        if watch_box:
            self.page.on(
                "websocket",
                lambda ws: ws.on("framesent", lambda payload: self.sent.append(payload)),
            )
        self.page.set_default_timeout(60_000)
        self.runs = RunWatcher(self.page)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.server = server

    def goto(self, url: str) -> None:
        mark = self.runs.mark()
        self.page.goto(url)
        self.runs.wait_settled(mark, start_timeout_ms=60_000)
        self.wait_drawn()

    def act(self, action) -> bool:
        mark = self.runs.mark()
        action()
        ran = self.runs.wait_settled(mark)
        self.wait_drawn()
        return ran

    def wait_drawn(self) -> None:
        """Wait until the frontend has drawn what the last run sent (browser.wait_drawn)."""
        wait_drawn(self.page)

    def close(self) -> None:
        self.context.close()


def figures(page) -> list[str]:
    return page.evaluate(FIGURES_JS)


DISABLED = '[disabled], [aria-disabled="true"], [data-disabled="true"]'  # as in CONTROLS_JS


def control(page, kind: str, label: str):
    """The enabled widget container of this kind with this label, or None if the page has none
    now. (The Lab's own "Causal mask" shares its label with the sidebar's, greyed out there.)"""
    for element in page.locator(f'[data-testid="{kind}"]').all():
        shown = element.locator('[data-testid="stWidgetLabel"]')
        text = (shown.first if shown.count() else element).inner_text().strip().split("\n")[0]
        if text == label and not element.locator(DISABLED).count():
            return element
    return None


def open_options(element):
    """Open a select box's or multiselect's list (a react-aria combo box); return its options."""
    options = element.page.locator('[role="listbox"] [role="option"]')
    opener = element.locator('button[aria-haspopup="listbox"]')
    if opener.count():
        opener.first.click()
    else:
        element.locator('[role="combobox"]').first.click()
    try:
        options.first.wait_for(timeout=5_000)
    except Exception:  # a combo box that opens from the keyboard only
        element.locator('[role="combobox"]').first.press("ArrowDown")
        options.first.wait_for()
    return options


def change(tab: Tab, kind: str, label: str) -> bool:
    """Change one control the way a visitor would and wait for the rerun; False if it is gone.

    (An earlier change can hide a control: "trained head" replaces the random-seed box.)
    """
    page = tab.page
    element = control(page, kind, label)
    if element is None:
        return False
    if kind in ("stSlider", "stSelectSlider"):
        thumb = element.locator('input[type="range"]').first  # react-aria: one per thumb
        at_end = thumb.input_value() == thumb.get_attribute("max")
        key = "ArrowLeft" if at_end else "ArrowRight"

        def press() -> None:
            thumb.focus()
            thumb.press(key)

        tab.act(press)
    elif kind in ("stCheckbox", "stToggle"):
        tab.act(lambda: element.locator("label").first.click())
    elif kind == "stRadio":
        options = element.locator('[role="radiogroup"] label')
        unchecked = [o for o in options.all() if not o.locator("input").first.is_checked()]
        tab.act(lambda: unchecked[-1].click())
    elif kind == "stSelectbox":
        options = open_options(element)
        choices = [o for o in options.all() if o.get_attribute("aria-selected") != "true"]
        tab.act(lambda: choices[min(1, len(choices) - 1)].click())
    elif kind == "stMultiSelect":
        options = open_options(element)
        tab.act(lambda: options.first.click())
        page.keyboard.press("Escape")
    elif kind == "stNumberInput":
        tab.act(lambda: element.locator('[data-testid="stNumberInputStepUp"]').click())
    elif kind in ("stTextInput", "stTextArea"):
        box = element.locator("input, textarea").first
        new = SENTENCE if label == "Sentence" else (box.input_value() + " bank").strip()
        tab.act(lambda: commit_text(box, new))
    else:
        raise AssertionError(f"unknown control kind {kind}")
    return True


def change_every_control(tab: Tab, sidebar: bool) -> list[tuple[str, str]]:
    """Change each control once (new ones may appear after a change); return what changed.

    After every change the address bar must have changed too: the control is bound to it.
    sidebar: change the sidebar's controls too (they are the same on every page).
    """
    page = tab.page
    done: list[tuple[str, str]] = []
    for _ in range(4):  # a change can reveal controls (a radio that shows a slider)
        for summary in page.locator('[data-testid="stMain"] details:not([open]) > summary').all():
            summary.click()  # expanders open on the client: no rerun
        pending = [
            (c["kind"], c["label"])
            for c in page.evaluate(CONTROLS_JS)
            if not c["disabled"]
            and (sidebar or not c["inSidebar"])
            and (c["kind"], c["label"]) not in done
        ]
        pending = [c for c in pending if c not in SKIPPED and c[1] != "Sentence"]
        if not pending:
            break
        for kind, label in pending:
            before = page.url
            if not change(tab, kind, label):
                continue  # hidden by an earlier change; looked for again on the next pass
            done.append((kind, label))
            assert page.url != before, f"{kind} {label!r} changed but the URL did not: {before}"
    return done


def wait_figures(page, expected: list[str], timeout_ms: int = 30_000) -> list[str]:
    """The page's figures once they equal `expected`, or as they are after timeout_ms."""
    try:
        page.wait_for_function(
            f"expected => JSON.stringify(({FIGURES_JS})()) === JSON.stringify(expected)",
            arg=expected,
            polling=100,
            timeout=timeout_ms,
        )
    except Exception as err:  # playwright's TimeoutError: compare what is drawn
        if "Timeout" not in type(err).__name__ and "Timeout" not in str(err):
            raise
    return figures(page)


def first_difference(first: list[str], second: list[str]) -> str:
    if len(first) != len(second):
        return f"{len(first)} figures, then {len(second)}"
    for index, (a, b) in enumerate(zip(first, second, strict=True)):
        if a != b:
            data_a, title_a, format_a, axes_a = json.loads(a)
            data_b, title_b, format_b, axes_b = json.loads(b)
            return (
                f"figure {index}: title {title_a!r} vs {title_b!r}, format {format_a} vs "
                f"{format_b}, same data {data_a == data_b}, same tick labels {axes_a == axes_b}"
            )
    return "none"


# The Overview (the sidebar's controls, changed by hand there) and three pages that between them
# hold every kind of control the app has; the URL's format per kind is what the browser adds to
# the headless test, which covers every page (tests/test_url_links.py).
LINK_PAGES = ("views/overview.py", "views/embeddings.py", "views/head_view.py", "views/qkv.py")


def link_cases() -> list[tuple[AppPage, dict[str, str]]]:
    """The LINK_PAGES as they open."""
    return [(app_page, {}) for app_page in PAGES if app_page.path in LINK_PAGES]


LINK_CASES = link_cases()
LINK_CASE_IDS = [
    Path(p.path).stem + "".join(f"-{v.split()[-1].lower()}" for v in tab.values())
    for p, tab in LINK_CASES
]


@pytest.mark.parametrize("app_page, on_tab", LINK_CASES, ids=LINK_CASE_IDS)
def test_every_control_survives_a_copied_link_and_fits_a_phone(
    browser, server, app_page: AppPage, on_tab: dict[str, str]
):
    """Change every control, copy the URL and reopen it in a fresh context, on a phone in dark
    mode: the same figures and the same controls, and a page that fits the phone.

    The sidebar's controls are changed by hand on the first page; every other page opens
    with all of them off their defaults in its URL, so each page's reopening covers them too.
    The first page's link is also the check of the sentence box as it is painted
    (assert_the_box_is_empty_for_a_frame_only: empty for a frame, never lost, one rerun).
    The first look is also the desktop check of a light system scheme: a light app,
    and plotly's toolbar on hover. The reopening is the phone check (assert_phone_dark), on the
    page with every control changed: the 3-D view, the pair, the causal mask and so on.
    The sentence and pair come in the link (typing them, and their way into the URL, is the
    navigation tour's part: test_browser_suite.py); a page's own text boxes are typed into here,
    as controls.
    "Controls" after the reopening: the figures' data, titles, tick labels as sent and export
    format (not as drawn: a phone draws fewer ticks), what widget_state reads (texts, switches,
    sliders, the model), and the URL, which holds every other control.
    """
    by_hand = app_page == PAGES[0]
    tab = Tab(browser, server, watch_box=by_hand)
    try:
        query = {"text": LINK_SENTENCE} if by_hand else {**SIDEBAR_CHANGED, "text": SENTENCE}
        tab.goto(f"{server.url}/{app_page.url_path}?{urllib.parse.urlencode({**query, **on_tab})}")
        if by_hand:
            assert_the_box_is_empty_for_a_frame_only(tab, LINK_SENTENCE)
        assert_light_desktop(tab.page)
        changed = change_every_control(tab, sidebar=by_hand)
        if by_hand:
            assert {c[1] for c in changed} >= {label for _, label in SIDEBAR_CONTROLS}
            shown = urllib.parse.parse_qs(urllib.parse.urlsplit(tab.page.url).query)
            assert {key for key, _ in SIDEBAR_CONTROLS} <= set(shown), tab.page.url
        copied, drawn = tab.page.url, figures(tab.page)  # a page may draw none until asked
        for key, value in on_tab.items():
            assert query_of(copied).get(key) == value, f"the tab was lost: {copied[:200]}"
        state = widget_state(tab.page)
        assert not tab.errors, tab.errors
        assert not page_exceptions(tab.page), page_exceptions(tab.page)
    finally:
        tab.close()

    other = Tab(browser, server, **PHONE_DARK)  # the link sent to someone on a phone
    try:
        other.goto(copied)
        again = wait_figures(other.page, drawn)
        assert again == drawn, (
            f"{app_page.title}: the copied link drew other figures "
            f"({first_difference(drawn, again)}); changed {changed}; URL {copied}"
        )
        assert_phone_dark(other.page, f"{app_page.title} on a phone")
        wait_boxes_filled(other.page, state)
        assert widget_state(other.page) == state, "the copied link set other controls"
        assert other.page.url == copied, (
            f"reopening the link rewrote it: {copied} -> {other.page.url}"
        )
        assert not other.errors, other.errors
        assert not page_exceptions(other.page), page_exceptions(other.page)
    finally:
        other.close()
