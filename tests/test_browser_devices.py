"""Every page on every device: a 390 px phone, a dark system scheme, a keyboard.

Every check opens its own browser context (own session, own colour scheme and viewport). The
phone check of every page (assert_phone_dark) runs where each page's copied link is reopened,
in tests/test_browser_links.py; the light desktop check (assert_light_desktop) where it is first
opened. Pages are discovered from app.py, so a new page is covered without touching either file.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlparse

import pytest
from conftest import section_key, section_labels
from shown import shown
from test_browser_path import NEXT_LINK
from test_browser_suite import ROW_TITLES_CUT_JS

from tests.support.browser import (
    FIGURE_SELECTOR,
    QUIET_MOTION,
    AppPage,
    RunWatcher,
    app_pages,
    page_exceptions,
    wait_idle,
    wait_plots_fit,
)
from ui import path

pytestmark = pytest.mark.browser

PAGES = app_pages()
PHONE = {"width": 390, "height": 844}  # an iPhone 12-14 class screen, in CSS pixels
SLIDER_INPUT = '[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]'

# Where the page would scroll sideways: the document and Streamlit's main scroll container.
SIDEWAYS_JS = """
() => {
  const main = document.querySelector('[data-testid="stMain"]');
  return {
    document: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    main: main ? main.scrollWidth - main.clientWidth : 0,
  };
}
"""
# Display formulas wider than their box (KaTeX never breaks a line; the box scrolls instead).
WIDE_FORMULAS_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] .katex-display')]
  .filter(e => e.scrollWidth > e.clientWidth + 3)
  .map(e => `${e.scrollWidth} px: ${e.textContent.slice(0, 40)}`)
"""
# Static tables (st.table) wider than their box that do not scroll in it: the overflow is cut
# off, and a column lost without the page scrolling sideways. A table may scroll in its own box
# on a phone (ui/preload.py), as tables do on phones; four columns fit without.
WIDE_TABLES_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stTable"]')]
  .filter(e => e.querySelector('table').getBoundingClientRect().right
    > e.getBoundingClientRect().right + 3 && !['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
  .map(e => e.textContent.slice(0, 40))
"""
# Text that sticks out of its figure, on any side: tick labels, and the titles of the figure,
# its axes, subplots (plotly draws those as annotations) and colour bars. Plotly's own check
# ("hide past div") would have hidden some tick labels; the app turns it off (ui/display.py: it
# measured every label on every draw) because its margins fit the labels. Plotly never wraps a
# title: one longer than a phone is wide is cut off at the figure's edge. Every axis of a
# subplot figure counts: plotly names the label groups xtick, x2tick, y3tick … (colour bars
# excepted).
LABELS_OUTSIDE_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].flatMap(gd => {
  const box = gd.getBoundingClientRect();
  const ticks = [...gd.querySelectorAll('g[class$="tick"], g[class$="tick2"]')]
    .filter(group => /^[xy][0-9]*tick2?$/.test(group.getAttribute('class')))
    .flatMap(group => [...group.querySelectorAll('text')]);
  const titles = [...gd.querySelectorAll(
    '.gtitle, [class^="g-x"][class$="title"] text, [class^="g-y"][class$="title"] text, '
    + '.annotation-text, .cbtitle text')];
  return [...ticks, ...titles]
    .map(label => [label, label.getBoundingClientRect()])
    .filter(([, r]) => r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1
      || r.top < box.top - 1 || r.bottom > box.bottom + 1))
    .map(([label]) => label.textContent.slice(0, 30));
})
"""
# Figure titles that start inside plotly's toolbar band: its buttons cover the top of a figure
# across its width, on hover or after a tap (ui/charts.py, clear_of_toolbar), and a title under
# them is partly hidden, however short. The toolbar has its box even while it is hidden, so no
# hover or tap is needed; a figure without a toolbar has nothing to clear.
TITLES_UNDER_TOOLBAR_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].flatMap(gd => {
  const bar = gd.querySelector('.modebar');
  const band = bar ? bar.getBoundingClientRect() : null;
  if (!band || band.height === 0) return [];
  return [...gd.querySelectorAll('.gtitle')]
    .filter(title => { const r = title.getBoundingClientRect();
      return r.height > 0 && r.top < band.bottom - 1; })
    .map(title => title.textContent.slice(0, 40));
})
"""
# The app's background colour as drawn, reduced to its mean channel (0 black .. 255 white).
BACKGROUND_JS = """
() => {
  const rgb = getComputedStyle(document.querySelector('[data-testid="stApp"]')).backgroundColor;
  const channels = rgb.match(/[0-9.]+/g).slice(0, 3).map(Number);
  return channels.reduce((a, b) => a + b, 0) / 3;
}
"""


# Formulas settle after the run does. While st.latex's KaTeX code is still on its way, Streamlit
# shows a skeleton in the formula's place (the formula came ~250 ms after the figure here);
# KaTeX's fonts load only once a formula asks for them, and document.fonts.ready does not wait for
# a font that has not started loading. A formula measured too early is set in a fallback font,
# ~35% wider (409 px instead of 304 on Head view, in CI and in 3 of 3 local runs). So: wait for
# the skeletons to go, load KaTeX's faces, and wait until the formulas' widths and the fonts'
# status have not changed for 300 ms. True when that happened within 30 s (10 s ran out once on
# 5 · Multi-head at a CI run's start, three workers starting their servers and browsers at once).
FORMULAS_SETTLED_JS = """
async () => {
  const faces = ['1em KaTeX_Main', 'italic 1em KaTeX_Main', 'italic 1em KaTeX_Math',
                 '1em KaTeX_AMS', '1em KaTeX_Size1', '1em KaTeX_Size2', '1em KaTeX_Size3',
                 '1em KaTeX_Size4'];
  const skeleton = '[data-testid="stMarkdownContainer"] [data-testid="stSkeleton"]';
  const state = () => [...document.querySelectorAll('.katex')]
    .map(e => e.getBoundingClientRect().width.toFixed(1)).join(',') + '|' + document.fonts.status;
  const start = performance.now();
  let last = null, since = start;
  while (performance.now() - start < 30000) {
    await new Promise(done => setTimeout(done, 50));
    if (document.querySelector(skeleton)) continue;
    if (document.querySelector('.katex')) {
      await Promise.all(faces.map(face => document.fonts.load(face).catch(() => null)));
    }
    await document.fonts.ready;
    const now = state();
    if (now !== last) { last = now; since = performance.now(); continue; }
    if (performance.now() - since >= 300) {
      await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
      return true;
    }
  }
  return false;
}
"""


def open_page(
    browser, server, app_page: AppPage, query: str = "", **context_options
) -> tuple[object, object]:
    """A fresh context on one page (with this URL query), waited until its run is over and a
    figure is drawn."""
    context = browser.new_context(**context_options)
    page = context.new_page()
    page.set_default_timeout(120_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    runs = RunWatcher(page)
    mark = runs.mark()
    page.goto(f"{server.url}/{app_page.url_path}{'?' + query if query else ''}")
    runs.wait_settled(mark, start_timeout_ms=120_000)
    # A figure, or what a page shows before one (a page may wait for a button or a message).
    page.wait_for_selector(f"{FIGURE_SELECTOR}, [data-testid='stAlert'], [data-testid='stButton']")
    assert page.evaluate(FORMULAS_SETTLED_JS), "formulas still changing 30 s after the run"
    wait_plots_fit(page)  # plotly resizes a figure to its box after the first layout
    page.errors = errors
    page.runs = runs  # it listens from the first websocket on: a later watcher would miss it
    return page, context


# A 390 px phone with a touch screen and a dark system scheme, for browser.new_context.
PHONE_DARK = {"viewport": PHONE, "color_scheme": "dark", "is_mobile": True, "has_touch": True}


def assert_phone_dark(page, where: str) -> None:
    """On a PHONE_DARK page whose run is over: a dark app, no error box, nothing wider than the
    phone (no sideways scroll, no formula scrolling in its own box, no table cut off, no tick
    label or title outside its figure), no title under plotly's toolbar, and the toolbar hidden
    until a figure is touched.

    Called on every page, opened with the sidebar's switches changed (the pair, the causal mask:
    test_every_page_and_tab_fits_a_phone below), and by the copied-link test
    (tests/test_browser_links.py), which reopens a link on a phone with every control changed.
    """
    page.wait_for_selector(f"{FIGURE_SELECTOR}, [data-testid='stAlert'], [data-testid='stButton']")
    assert page.evaluate(FORMULAS_SETTLED_JS), (
        f"{where}: formulas still changing 30 s after the run"
    )
    wait_plots_fit(page)  # plotly resizes a figure to its box after the first layout
    assert page.evaluate(BACKGROUND_JS) < 80, f"{where}: the app did not follow the dark scheme"
    assert not page_exceptions(page), page_exceptions(page)
    overflow = page.evaluate(SIDEWAYS_JS)
    assert overflow == {"document": 0, "main": 0}, f"{where} scrolls sideways: {overflow}"
    # Nor do formulas scroll inside their own box (a few px of rounding aside).
    wide = page.evaluate(WIDE_FORMULAS_JS)
    assert not wide, f"{where}: formulas wider than the phone: {wide}"
    wide = page.evaluate(WIDE_TABLES_JS)
    assert not wide, f"{where}: tables cut off at the phone's edge: {wide}"
    outside = page.evaluate(LABELS_OUTSIDE_JS)
    assert not outside, f"{where}: labels or titles cut off at the figure's edge: {outside}"
    covered = page.evaluate(TITLES_UNDER_TOOLBAR_JS)
    assert not covered, f"{where}: titles under plotly's toolbar: {covered}"
    cut = page.evaluate(ROW_TITLES_CUT_JS)
    assert not cut, f"{where}: row titles cut by the screen's bottom edge: {cut}"
    # Plotly's toolbar would sit on the figure's title: hidden until the figure is touched.
    toolbar = page.locator(".js-plotly-plot .modebar-container").first
    if toolbar.count():
        assert toolbar.evaluate("e => getComputedStyle(e).visibility") == "hidden"


# Tabs whose label is not wholly inside the visible part of their tab bar.
TABS_OUT_OF_SIGHT_JS = """
() => [...document.querySelectorAll('[data-testid="stTabs"] [role="tablist"]')].flatMap(bar => {
  const box = bar.getBoundingClientRect();
  return [...bar.querySelectorAll('[role="tab"]')]
    .filter(tab => {
      const r = tab.getBoundingClientRect();
      return r.left < box.left - 1 || r.right > box.right + 1;
    })
    .map(tab => tab.textContent);
})
"""


# True once every plotly chart on the page has drawn its svg (none: true at once).
EVERY_CHART_DRAWN_JS = """
() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
  .every(chart => chart.querySelector('.main-svg'))
"""
# The sidebar's switches off their defaults: a pair and the causal mask give the pages their
# widest figures and longest captions.
SIDEBAR_CHANGED = "pair=The+water+rose.&scale=false&causal=true&image_format=SVG"


# The phone walk in three legs, each from a fresh page to the page before the next leg's start (or
# to the end), so the workers share it. A leg moves by the pages' own Next links, in one session
# as a visitor would: a fresh browser context per page would load the app's scripts fifteen
# times (bench/RESULTS.md, Test suite: the walk takes about half the time of fresh opens).
PHONE_LEGS = ("Overview", "2b · Positional encoding", "6 · Attention heatmaps")


def assert_tabs_fit_a_phone(page, app_page: AppPage) -> None:
    """Each further tab of a page that draws one tab at a time, on the phone: a click draws that
    tab alone, the URL names it, and the phone checks hold."""
    labels, key = section_labels(app_page.path), section_key(app_page.path)
    if not labels:
        return
    # Every tab's name in sight: the bar wraps instead of hiding later tabs off to the right
    # (a link to the last tab would open with its tab out of view). Counted first: with no
    # tab bar on the page at all, "none out of sight" would pass for nothing.
    tab_count = page.locator('[data-testid="stTabs"] [role="tab"]').count()
    assert tab_count == len(labels), f"{app_page.title}: {tab_count} tabs on the page"
    hidden = page.evaluate(TABS_OUT_OF_SIGHT_JS)
    assert not hidden, f"{app_page.title}: tabs cut off at the phone's edge: {hidden}"
    for label in labels[1:]:
        where = f"{app_page.title}, {label}"
        mark = page.runs.mark()
        page.get_by_role("tab", name=label).click()
        assert page.runs.wait_settled(mark), f"opening {where} ran nothing"
        page.wait_for_selector("[role='tabpanel'] h3")  # every section opens with a heading
        page.wait_for_function(EVERY_CHART_DRAWN_JS)  # the checks below need drawn figures
        wait_plots_fit(page)  # plotly resizes a figure to its box after the first layout
        assert parse_qs(urlparse(page.url).query).get(key) == [label], page.url
        # the closed tabs' figures are gone: no section draws more than five
        assert page.locator(".js-plotly-plot").count() <= 5, where
        assert page.evaluate(SIDEWAYS_JS) == {"document": 0, "main": 0}, where
        assert not page.evaluate(WIDE_FORMULAS_JS), where
        assert not page.evaluate(LABELS_OUTSIDE_JS), where
        assert not page.evaluate(TITLES_UNDER_TOOLBAR_JS), where
        assert not page_exceptions(page) and not page.errors, where


def assert_model_view_tiles_fit_a_phone(page) -> None:
    """Attention heatmaps' model view on a phone: six heads a row, each tile at least 40 px
    wide, none past the screen's edge."""
    tiles = page.evaluate(
        "() => [...document.querySelectorAll('.ae-model-view .ae-mv-tile img')]"
        ".map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right, r.width]; })"
    )
    assert len(tiles) == 6 * 12
    assert min(width for _, _, width in tiles) >= 40
    assert max(right for _, right, _ in tiles) <= PHONE["width"]
    assert len({round(left) for left, _, _ in tiles}) == 6  # six columns


@pytest.mark.parametrize("leg", PHONE_LEGS)
def test_every_page_and_tab_fits_a_phone(browser, server, leg: str):
    """The phone checks above on every page and every tab, with the sidebar's switches changed,
    walking the course by its Next links from the leg's first page: each page as it opens
    (assert_phone_dark), then each further tab (assert_tabs_fit_a_phone). On Attention
    heatmaps, as it opens, its model view's tiles are a finger wide
    (assert_model_view_tiles_fit_a_phone)."""
    titles = [step.title for step in path.STEPS]
    first = titles.index(leg)
    following = [titles.index(other) for other in PHONE_LEGS if titles.index(other) > first]
    walk = path.STEPS[first : min(following, default=len(titles))]
    by_url = {app_page.url_path: app_page for app_page in PAGES}
    page, context = open_page(
        browser, server, by_url[path.url_path(walk[0])], SIDEBAR_CHANGED, viewport=PHONE,
        color_scheme="dark", is_mobile=True, has_touch=True, **QUIET_MOTION,
    )  # fmt: skip
    try:
        for index, step in enumerate(walk):
            app_page = by_url[path.url_path(step)]
            if index:  # the page before's own Next link, as a visitor on a phone taps it
                mark = page.runs.mark()
                page.locator(NEXT_LINK).filter(has_text=f"Next: {step.title}").click()
                assert page.runs.wait_settled(mark, start_timeout_ms=60_000), step.title
                assert urlparse(page.url).path.strip("/") == app_page.url_path, page.url
                # the pointer stayed where the link was: a figure drawn under it would count as
                # touched and show its toolbar, which assert_phone_dark checks is hidden
                page.mouse.move(0, 0)
            assert_phone_dark(page, f"{step.title} on a phone")
            # the walk kept the sidebar's switches: the pair's sentence is still in the URL
            assert parse_qs(urlparse(page.url).query).get("pair") == ["The water rose."], page.url
            if app_page.path == "views/heatmaps.py":  # its first tab: the model view
                assert_model_view_tiles_fit_a_phone(page)
            assert_tabs_fit_a_phone(page, app_page)
    finally:
        context.close()


def assert_light_desktop(page) -> None:
    """A light system scheme gives a light app, and a mouse user sees plotly's toolbar on hover
    (the phone rule above does not apply). Called on every page by the copied-link test
    (tests/test_browser_links.py), which opens each page in a light desktop context anyway.

    Hover the figure's root div, not its svg: plotly's svg layers take no pointer events, so
    where the svg's centre falls between two subplots the hover never lands on it.
    """
    assert page.evaluate(BACKGROUND_JS) > 200, "a light system scheme should give a light app"
    assert not page_exceptions(page), page_exceptions(page)
    toolbar = page.locator(".js-plotly-plot .modebar-container").first
    if toolbar.count():
        toolbar.locator("xpath=ancestor::div[contains(@class,'js-plotly-plot')]").hover()
        assert toolbar.evaluate("e => getComputedStyle(e).visibility") == "visible"


# Every CSS animation seen running while a page loads (transitions, short and one-off, are not
# counted): polled every 20 ms from the first paint on, as "name duration-ms iterations".
ANIMATIONS_SEEN_JS = """
(() => {
  window.__animations = new Set();
  const poll = () => {
    for (const animation of document.getAnimations()) {
      if (animation.playState !== 'running' || !animation.animationName) continue;
      const timing = animation.effect.getComputedTiming();
      window.__animations.add(
        `${animation.animationName} ${timing.duration} ${timing.iterations}`);
    }
    setTimeout(poll, 20);
  };
  poll();
})();
"""


def animations_during_load(browser, server, app_page: AppPage, reduced_motion: str) -> set[str]:
    context = browser.new_context(reduced_motion=reduced_motion)
    context.add_init_script(ANIMATIONS_SEEN_JS)
    page = context.new_page()
    try:
        runs = RunWatcher(page)
        page.goto(f"{server.url}/{app_page.url_path}")
        runs.wait_settled(0, start_timeout_ms=120_000)
        page.wait_for_selector(FIGURE_SELECTOR)
        return set(page.evaluate("[...window.__animations]"))
    finally:
        context.close()


def test_reduced_motion_stops_the_pulse(browser, server):
    """A visitor whose system asks for reduced motion sees no animation while a page loads.

    Streamlit (1.67) itself stops its placeholders' pulse under that setting; this keeps it so,
    for the app's own styles too. Without the setting the placeholders pulse over and over (the
    check that the watch sees them). The browser tests of links, hostile input and navigation
    run with reduced motion for that reason: the pulse repaints the whole page on every frame
    until the figures arrive, about a fifth of a page load's CPU time in headless chromium
    (12.3 s -> 9.6 s for a load of 2 · Q, K, V when it drew all seven steps at once, on a 2-core
    machine, chromium's processes summed).
    """
    qkv = next(p for p in PAGES if Path(p.path).stem == "qkv")
    pulsing = animations_during_load(browser, server, qkv, "no-preference")
    assert any(a.endswith(" Infinity") for a in pulsing), (
        f"no endless animation without the setting ({pulsing}): if Streamlit no longer pulses its "
        "placeholders, the browser tests gain nothing from reduced motion and this check can go"
    )
    still = animations_during_load(browser, server, qkv, "reduce")
    lasting = [a for a in still if float(a.split()[1]) > 1 or a.endswith(" Infinity")]
    assert not lasting, f"animations with reduced motion: {lasting}"


def test_keyboard_keeps_focus_on_a_slider_across_presses(browser, server):
    """Two ArrowRight presses on a freshly loaded page move the slider twice, focus stays on it.

    The first press used to rerun the page with one element fewer at the top (the one-off
    plotly preload), the frontend rebuilt every widget, and focus fell to the body. On a page
    whose sliders rerun it: 4 · Multi-head attention, on tab 1, whose Layer slider drives it
    (the Overview, Attention heatmaps and the Head view switch heads in the browser, tested
    below and in test_explore_pages.py). The same visit checks that a link naming the tab opens
    it with its figures drawn.
    """
    multi_head = next(p for p in PAGES if p.path == "views/multi_head.py")
    tab = urlencode({"mh_section": "1 · All heads"})
    page, context = open_page(
        browser, server, multi_head, tab, viewport={"width": 1300, "height": 1200}
    )
    try:
        # a link that names a tab opens it: its four named-head grids drawn (the layer's grid of
        # every head waits below its question, ui/predict.py), with no error in the page
        page.wait_for_function(
            "document.querySelectorAll('[data-testid=\"stMain\"] .js-plotly-plot').length >= 4"
        )
        assert page.errors == []
        runs = page.runs
        slider = page.locator(SLIDER_INPUT).first
        label = slider.get_attribute("aria-label")
        start = int(slider.input_value())
        slider.focus()
        for step in (1, 2):
            mark = runs.mark()
            page.keyboard.press("ArrowRight")
            assert runs.wait_settled(mark), f"press {step} changed nothing"
            focused = page.evaluate(
                "() => [document.activeElement.tagName, document.activeElement.ariaLabel,"
                " document.activeElement.value]"
            )
            assert focused == ["INPUT", label, str(start + step)], f"after press {step}"
        assert f"{label.lower()}={start + 2}" in page.url  # the link keeps the slider's value
    finally:
        context.close()


# The Overview's HTML heatmap (ui/html_heatmap.py) as drawn: title and note, the colour bar's top,
# every cell's painted colour and printed number, row after row, or the cell image's pixels.
GRID_SHOWN_JS = """
() => {
  const fig = document.querySelector('[data-testid="stMain"] .ae-heatmap');
  if (!fig) return null;
  // past 12 pieces the cells are one image: its pixels as decoded, or null until it is
  const pixelsOf = image => {
    if (!image || !image.complete || !image.naturalWidth) return image ? [] : null;
    const canvas = document.createElement('canvas');
    canvas.width = image.naturalWidth; canvas.height = image.naturalHeight;
    const context = canvas.getContext('2d');
    context.drawImage(image, 0, 0);
    return Array.from(context.getImageData(0, 0, canvas.width, canvas.height).data);
  };
  const cells = [...fig.querySelectorAll('.ae-grid i')];
  return {title: fig.querySelector('.ae-title').textContent,
          note: fig.querySelector('.ae-note').textContent,
          top: fig.querySelector('.ae-top').textContent,
          colours: cells.map(c => getComputedStyle(c).backgroundColor),
          inks: cells.map(c => getComputedStyle(c).color),
          numbers: cells.map(c => c.textContent),
          pixels: pixelsOf(fig.querySelector('img.ae-cells'))};
}
"""


def grid_shown(page) -> dict:
    page.wait_for_function(f"({GRID_SHOWN_JS})() !== null")
    return page.evaluate(GRID_SHOWN_JS)


def press_until(page, label: str, title: str, shown_js: str) -> None:
    """ArrowRight on the slider with this label; the title shown_js reads must follow with no
    run of the script; focus stays on the slider."""
    page.locator(f'{SLIDER_INPUT}[aria-label="{label}"]').focus()
    mark = page.runs.mark()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        f"() => (({shown_js})() || {{title: ''}}).title.includes({title!r})", timeout=5_000
    )
    assert not page.runs.wait_settled(mark, start_timeout_ms=1_500), "the slider reran the page"
    assert page.evaluate("() => document.activeElement.ariaLabel") == label


def press_until_grid_titled(page, label: str, title: str) -> None:
    """press_until() on the Overview's HTML heatmap."""
    press_until(page, label, title, GRID_SHOWN_JS)


# 60-odd word pieces: more than display_policy.FITTED_SCALE_FROM keys, so every head has its own colour
# scale and a title line that says so; fewer than the ~128 that still switch in the browser.
FITTED_TEXT = " ".join(["The river bank flooded after the storm, so the bank moved its money."] * 4)
# Few enough pieces for every cell to print its weight (display_policy.NUMBERS_UP_TO).
NUMBERED_TEXT = "The bank flooded."


def without_bold(title: str) -> str:
    """Streamlit's theme wraps a title in <b> each time it styles the figure (once or twice)."""
    return title.replace("<b>", "").replace("</b>", "")


@pytest.mark.parametrize("text", [FITTED_TEXT, NUMBERED_TEXT], ids=["fitted-scale", "numbered"])
def test_overview_switches_layer_and_head_in_the_browser(browser, server, text):
    """Up to ~128 pieces (display_policy.switches_in_browser) the Overview's sliders repaint the heatmap
    in the browser. The head painted there is the one the server draws from that link: same
    title and note, same colour-bar top, and every cell the same colour and number (layer 1,
    head 2: a swapped layer and head, an off-by-one store, or a colour or rounding rule in the
    script that differs from ui/html_heatmap.py's shows another).
    """
    overview = next(p for p in PAGES if p.default)
    # the Overview opens on its takeaway's head: the link sets head 0 to step from (one load:
    # the page opens on the link, not on the default sentence first)
    page, context = open_page(
        browser,
        server,
        overview,
        f"text={quote(text)}&overview_layer=0&overview_head=0",
        viewport={"width": 1300, "height": 1200},
    )
    try:
        page.wait_for_function(f"() => (({GRID_SHOWN_JS})() || {{title: ''}}).title !== ''")
        first = grid_shown(page)
        assert first["title"] == "Layer 0, head 0: attention weights"
        assert ("colour scale fitted" in first["note"]) == (text == FITTED_TEXT)
        assert any(first["numbers"]) == (text == NUMBERED_TEXT)
        assert (first["pixels"] is None) == (text == NUMBERED_TEXT)
        press_until_grid_titled(page, "Head", "Layer 0, head 1:")
        press_until_grid_titled(page, "Head", "Layer 0, head 2:")
        press_until_grid_titled(page, "Layer", "Layer 1, head 2:")
        page.wait_for_function(f"() => ({GRID_SHOWN_JS})().pixels?.length !== 0")
        switched = grid_shown(page)
        assert (switched["colours"], switched["pixels"]) != (first["colours"], first["pixels"])
        # the link keeps a slider that left the Overview's opening head (one still on it is
        # left out: the page opens there); reloading it below draws layer 1, head 2
        assert "overview_layer=1" in page.url.split("?")[1].split("&")
        assert page.errors == []

        mark = page.runs.mark()
        page.goto(page.url)  # the copied link: the server draws layer 1, head 2 itself
        page.runs.wait_settled(mark, start_timeout_ms=60_000)
        page.wait_for_function(f"() => (({GRID_SHOWN_JS})() || {{title: ''}}).title !== ''")
        page.wait_for_function(f"() => ({GRID_SHOWN_JS})().pixels?.length !== 0")
        drawn = grid_shown(page)
        assert drawn["title"] == "Layer 1, head 2: attention weights"
        assert drawn == switched
    finally:
        context.close()


# Attention heatmaps' three figures that follow the sliders: the model view's framed tile (HTML,
# its layer and head), the up-close heatmap (the Overview's HTML grid: title, note and every
# cell's number), and the shared word's rows in two sentences (section 4).
HEATMAPS_SHOWN_JS = """
() => {
  const plots = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')];
  const having = key => plots.find(g => g.layout && g.layout.meta && key in g.layout.meta);
  const rows = having('bar_lengths');
  const heatmap = document.querySelector('[data-testid="stMain"] .ae-heatmap');
  const framed = [...document.querySelectorAll('[data-testid="stMain"] .ae-mv-tile.ae-mv-on')];
  if (framed.length !== 1 || !heatmap || !rows || !rows._fullData) return null;
  // past 12 pieces the cells are one image: its pixels as decoded (null until they are)
  const image = heatmap.querySelector('img.ae-cells');
  let pixels = [];
  if (image) {
    if (!image.complete || !image.naturalWidth) return null;
    const canvas = document.createElement('canvas');
    canvas.width = image.naturalWidth; canvas.height = image.naturalHeight;
    canvas.getContext('2d').drawImage(image, 0, 0);
    pixels = Array.from(canvas.getContext('2d')
      .getImageData(0, 0, canvas.width, canvas.height).data);
  }
  return {frame: [Number(framed[0].dataset.layer), Number(framed[0].dataset.head)],
          title: heatmap.querySelector('.ae-title').textContent,
          note: heatmap.querySelector('.ae-note').textContent,
          weights: [...heatmap.querySelectorAll('.ae-grid i')].map(cell => cell.textContent)
            .concat(pixels),
          rowsTitle: rows._fullLayout.title.text,
          bars: rows._fullData.map(bars => Array.from(bars.y))};
}
"""


def test_attention_heatmaps_switch_frame_heatmap_and_rows_in_the_browser(browser, server):
    """On Attention heatmaps the sliders move the grid's frame and redraw the up-close heatmap
    and section 4's rows with no run of the script; a reload of the resulting link draws the
    same three on the server (so no store is another head's, or misplaced). Then a click on a
    head's tile selects it (click_a_head_in_the_model_view)."""
    heatmaps = next(p for p in PAGES if Path(p.path).stem == "heatmaps")
    text = quote("Unbelievably, the riverbank flooded.")
    page, context = open_page(
        browser,
        server,
        heatmaps,
        f"text={text}&hm_renorm=true",
        viewport={"width": 1300, "height": 1200},
    )
    try:
        page.wait_for_function(f"({HEATMAPS_SHOWN_JS})() !== null")
        opened = page.evaluate(HEATMAPS_SHOWN_JS)
        assert opened["title"] == "Layer 0, head 0: attention weights"
        assert opened["note"] == "without special pieces" and opened["weights"]
        press_until(page, "Head", "Layer 0, head 1:", HEATMAPS_SHOWN_JS)
        press_until(page, "Layer", "Layer 1, head 1:", HEATMAPS_SHOWN_JS)
        switched = page.evaluate(HEATMAPS_SHOWN_JS)
        assert shown(without_bold(switched["rowsTitle"])).endswith("looks: layer 1, head 1")
        assert switched["frame"] != opened["frame"] and switched["bars"] != opened["bars"]
        assert page.errors == []

        mark = page.runs.mark()
        page.goto(page.url)  # the copied link: the server draws layer 1, head 1 itself
        page.runs.wait_settled(mark, start_timeout_ms=60_000)
        page.wait_for_function(f"({HEATMAPS_SHOWN_JS})() !== null")
        drawn = page.evaluate(HEATMAPS_SHOWN_JS)
        assert drawn["frame"] == switched["frame"] == [1, 1]
        for key in ("title", "rowsTitle"):
            assert without_bold(drawn[key]) == without_bold(switched[key])
        # every cell's printed number, or every pixel of the cells' image
        assert drawn["weights"] == switched["weights"]
        for served, shown_bars in zip(drawn["bars"], switched["bars"], strict=True):
            assert shown_bars == pytest.approx(served, abs=1e-6)

        click_a_head_in_the_model_view(page)
    finally:
        context.close()


def click_a_head_in_the_model_view(page) -> None:
    """A click on a head's tile in Attention heatmaps' model view moves both sliders to that
    head (as arrow keys would), the frame and the up-close heatmap follow, and the link keeps
    it; no dialog, no script error, no exception."""
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tile = page.locator(
        "[data-testid='stMain'] .ae-model-view .ae-mv-tile[data-layer='4'][data-head='9']"
    )
    tile.scroll_into_view_if_needed()
    tile.click()
    page.wait_for_function(
        "() => document.querySelector('.ae-mv-tile.ae-mv-on')?.dataset.head === '9'"
        " && document.querySelector('.ae-mv-tile.ae-mv-on')?.dataset.layer === '4'"
    )
    wait_idle(page)
    assert not dialogs and not page.errors and not page_exceptions(page), "after the click"
    sliders = {
        name: page.locator(f'{SLIDER_INPUT}[aria-label="{name}"]').first.input_value()
        for name in ("Layer", "Head")
    }
    assert sliders == {"Layer": "4", "Head": "9"}
    query = dict(parse_qsl(urlparse(page.url).query))
    assert {"layer": "4", "head": "9"}.items() <= query.items(), page.url
    titles = page.locator("[data-testid='stMain'] .ae-heatmap .ae-title").all_text_contents()
    assert any(t.startswith("Layer 4, head 9") for t in titles), titles


def test_menu_switches_a_dark_system_to_light_and_back(browser, server):
    """The ⋮ menu's theme choice overrides the system scheme, both ways."""
    overview = next(p for p in PAGES if p.default)
    page, context = open_page(
        browser, server, overview, viewport={"width": 1200, "height": 800}, color_scheme="dark"
    )
    try:
        assert page.evaluate(BACKGROUND_JS) < 60, "a dark system scheme gives a dark app"
        for choice, is_light in (("Light", True), ("Dark", False)):
            page.locator('[data-testid="stMainMenu"]').click()
            page.get_by_role("menuitemradio", name=choice).click()
            page.wait_for_function(
                f"() => ({BACKGROUND_JS})() {'>' if is_light else '<'} {200 if is_light else 60}"
            )
            page.keyboard.press("Escape")  # the menu stays open after a choice
            page.locator('[data-testid="stMainMenuPopover"]').wait_for(state="hidden")
        assert not page_exceptions(page)
    finally:
        context.close()


# ---- phones and keyboards -------------------------------------------------------------------------
# Pixels between the bottom of the page title's text and the bottom of its heading.
TITLE_UNDER_TEXT_JS = """
() => {
  const heading = document.querySelector('[data-testid="stMain"] h1');
  return heading.getBoundingClientRect().bottom
    - heading.firstElementChild.getBoundingClientRect().bottom;
}
"""


def test_a_phone_sees_where_to_type_on_the_overview(browser, server):
    """On a 390 px phone the sidebar is folded away, and the Overview shows the sentence box in
    the page instead (ui/sidebar.py, sentence_box_in_page); a sentence typed there is the one the
    heatmap draws. (A desktop, with the sidebar open, sees one box only, the sidebar's:
    test_browser_overview.py, test_a_desktop_overview_follows_typing_focus_and_a_long_text.)"""
    overview = next(p for p in PAGES if p.default)
    page, context = open_page(browser, server, overview, **PHONE_DARK)
    try:
        box = page.locator("[data-testid='stMain'] .st-key-page_sentence textarea")
        assert box.is_visible() and box.bounding_box()["y"] < PHONE["height"]  # first screen
        # the title ends where its text does: Streamlit's heading-link icon, wrapped onto a line
        # of its own at this width, left a blank band under it (widgets.page_title)
        under_text = page.evaluate(TITLE_UNDER_TEXT_JS)
        assert under_text < 30, f"{under_text:.0f} px of the title's box lie under its text"
        sidebar_box = page.locator('[data-testid="stSidebar"] textarea').first.bounding_box()
        assert sidebar_box["x"] + sidebar_box["width"] <= 0  # folded away, off the screen
        mark = page.runs.mark()
        box.fill("Fruit flies like a banana.")
        box.evaluate("e => e.blur()")  # a phone has no Ctrl+Enter: leaving the box commits
        page.runs.wait_settled(mark, start_timeout_ms=30_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('.ae-heatmap .ae-query')]"
            ".some(e => e.textContent === 'banana')"
        )
        assert "text=Fruit" in page.url  # the sidebar's sentence, and so the link's
    finally:
        context.close()
