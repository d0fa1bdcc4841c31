"""Shared helpers for real-browser checks: start the app, drive Debian's chromium with Playwright.

Playwright's own browser download is never used (it cannot be fetched here): the Python package
drives /usr/bin/chromium, installed from Debian by .ci/run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.folded import folded_by_a_question

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# A local user's server: folders on this machine and any hub id may be loaded (DEPLOY.md, "The
# public switch"). The shared test server runs so, so that typed models reach their Load button;
# a server with nothing set refuses both (tests/test_overview.py, tests/test_models.py).
# A local user's opt-ins; the budget holds bert-base's 436 MB twice over, so the picker lists it
# (a listed model that cannot be had here: the hub is a closed port).
LOCAL_USER_ENV = {
    "ATTENTION_EXPLORER_LOCAL_FOLDERS": "1",
    "ATTENTION_EXPLORER_HUB_MODELS": "*",
    "ATTENTION_EXPLORER_MEMORY_MB": "1000",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, timeout: float = 60.0) -> None:
    """Poll Streamlit's health endpoint until it answers ok (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not become healthy in {timeout:.0f} s")


@contextmanager
def running_app(
    script: str = "serve.py", cwd: Path = ROOT, extra_env: dict | None = None
) -> Iterator[str]:
    """Start `streamlit run script` on a free port; yield its URL; stop it afterwards."""
    with served_app(script, cwd, extra_env) as server:
        yield server.url


@contextmanager
def chromium() -> Iterator[object]:
    """A Playwright browser on Debian's chromium with a throwaway HOME and profile."""
    from playwright.sync_api import sync_playwright

    home = tempfile.mkdtemp(prefix="chromium-home-")
    os.environ.setdefault("HOME", home)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            env={**os.environ, "HOME": home},
        )
        try:
            yield browser
        finally:
            browser.close()
    shutil.rmtree(home, ignore_errors=True)


def wait_for_app(page: object, timeout_ms: int = 60_000) -> None:
    """Wait for the app's frame, then until its first run is over (wait_idle).

    A fresh page's script state goes from "initial" through "running" to "notRunning", so a
    cold first run is waited for too. After an action, callers wait for what they need next (a
    heading, a figure); RunWatcher.wait_settled follows a rerun from its start to its end.
    """
    page.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=timeout_ms)
    wait_idle(page, timeout_ms)


# Streamlit says no script runs, shows neither its "running" indicator nor a placeholder, and
# nothing on the page has changed for quietMs (a MutationObserver kept on the window, so the
# check can be polled with a timeout).
IDLE_JS = """
(quietMs) => {
  if (!window.__aeQuiet) {
    const quiet = {last: performance.now()};
    new MutationObserver(() => { quiet.last = performance.now(); }).observe(document.body,
      {subtree: true, childList: true, attributes: true, characterData: true});
    window.__aeQuiet = quiet;
  }
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.dataset.testScriptState === 'notRunning'
    && !document.querySelector('[data-testid="stStatusWidget"]')
    && !document.querySelector('[data-testid="stSkeleton"]')
    && performance.now() - window.__aeQuiet.last > quietMs;
}
"""


def wait_idle(page: object, timeout_ms: int = 60_000) -> None:
    """Wait until no script runs and the page has drawn what the last run sent (IDLE_JS:
    nothing on the page changed for QUIET_MS)."""
    page.wait_for_function(IDLE_JS, arg=QUIET_MS, timeout=timeout_ms, polling=50)


# Every plotly figure has drawn itself at the width of its box: after the first layout, plotly
# resizes a figure to its container, and a check of positions or overflow before that reads the
# old size.
PLOTS_FIT_JS = """
() => [...document.querySelectorAll('.js-plotly-plot')].every(plot => {
  const svg = plot.querySelector('.main-svg');
  return !!plot._fullLayout && !!svg
    && Math.abs(svg.getBoundingClientRect().width - plot.getBoundingClientRect().width) < 1.5;
})
"""


def wait_plots_fit(page: object, timeout_ms: int = 30_000) -> None:
    """Wait until the page is still (wait_idle) and every plotly figure fits its box."""
    wait_idle(page, timeout_ms)
    page.wait_for_function(PLOTS_FIT_JS, timeout=timeout_ms, polling="raf")


def page_exceptions(page: object) -> list[str]:
    """Texts of Streamlit exception boxes on the page (empty when all is well)."""
    return page.locator('[data-testid="stException"]').all_inner_texts()


# ---- helpers for the browser suite and the benchmarks -----------------------------------------
# Everything below is additive: the functions above keep their behaviour.

# Context options for the tests that check what a page does rather than how it looks while it
# loads: a system that asks for reduced motion. Streamlit then stops its placeholders' endless
# pulse, which repaints the whole page on every frame until the figures arrive (about a fifth of
# a page load's CPU time here; tests/test_browser_devices.py, test_reduced_motion_stops_the_pulse).
# The phone check of a copied link uses it too (it checks the layout once drawn); the menu and
# keyboard tests keep the default, so visitors' usual motion is still driven.
QUIET_MOTION = {"reduced_motion": "reduce"}

# A drawn figure: a plotly figure, not counting the blank one ui/preload.py shows while torch
# imports, an HTML heatmap (ui/html_heatmap.py, the Overview's) with its cells or cell image, or
# another HTML figure of that module: a value grid's cells (0 · Attention by hand's toy
# matrices), a value strip's image (a few tokens' wide vectors) or a bar chart's bars.
GRID_SELECTOR = "[data-testid='stMain'] .ae-heatmap :is(.ae-grid i, img.ae-cells)"
HTML_FIGURE_SELECTOR = "[data-testid='stMain'] :is(.ae-matrix .ae-grid i, .ae-matrix img.ae-cells, .ae-bars .ae-bar-row)"
FIGURE_SELECTOR = (
    ".js-plotly-plot:not(.st-key-_plotly_preload .js-plotly-plot) .main-svg, "
    f"{GRID_SELECTOR}, {HTML_FIGURE_SELECTOR}"
)
# a plotly heatmap trace with its pixels painted, or an HTML heatmap's cells
HEATMAP_SELECTOR = f".js-plotly-plot g.hm image, {GRID_SELECTOR}"
TEXT_INPUT_SELECTOR = '[data-testid="stTextInput"] input, [data-testid="stTextArea"] textarea'

# A fingerprint of every plotly figure on the page: length and hash of its data (the JSON the
# server sent, numbers included) plus the tick labels and title as drawn. Two fingerprints differ
# exactly when a figure was redrawn with other data, other tokens or another title.
FIGURE_SIGNATURES_JS = """
() => [...document.querySelectorAll('.js-plotly-plot, .ae-heatmap, .ae-matrix, .ae-bars')].map(g => {
  // an HTML value grid or bar chart: its text as drawn (title, labels, every number)
  if (g.classList.contains('ae-matrix') || g.classList.contains('ae-bars')) {
    return JSON.stringify(['html', g.textContent]);
  }
  // an HTML heatmap: every head's numbers, the head shown, title and labels as drawn
  if (g.classList.contains('ae-heatmap')) {
    const s = (g.dataset.heads || '') + '|' + g.dataset.shown;
    let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
    const texts = [...g.querySelectorAll('.ae-title, .ae-key, .ae-query')].map(e => e.textContent);
    return JSON.stringify([s.length, h, texts]);
  }
  const s = JSON.stringify(g.data || []);
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  const ticks = [...g.querySelectorAll('.xtick text, .ytick text, .gtitle')]
    .map(e => e.textContent);
  return JSON.stringify([s.length, h, ticks]);
})
"""


@dataclass(frozen=True)
class AppPage:
    """One st.Page registered in app.py, with where it lives in the browser."""

    path: str  # "views/overview.py"
    title: str  # the navigation label
    url_path: str  # "" for the default page, else the page's path segment
    default: bool


# Pages that draw one tab at a time, opened on the tab that reads the sidebar sentence (the
# first tabs of Positional encoding and of Scaling and masking do not read it).
SENTENCE_TAB = {
    "views/positional.py": {"pos_section": "7 · Word order"},
    "views/scaling_masking.py": {"sm_section": "3 · Switches"},
}


def app_pages() -> list[AppPage]:
    """Every page of app.py's navigation, in the course's order, with its title and URL path
    (ui/path.py, from which app.py builds its navigation)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from ui import path

    return [
        AppPage(step.file, step.title, path.url_path(step), step is path.STEPS[0])
        for step in path.STEPS
    ]


# Pages (on their SENTENCE_TAB) whose every figure drawn from the sentence waits below a
# "predict, then see" question (ui/predict.py): a visitor answers before a typed sentence
# redraws anything there. Read from the views' code, not listed (tests/support/folded.py);
# tests/test_predict.py checks the reading against the pages as they run.
FOLDED_BY_A_QUESTION = folded_by_a_question([page.path for page in app_pages()], SENTENCE_TAB)


# The frontend draws a run's elements some time after the run's last message arrived (long
# after, on a loaded machine): wait until Streamlit says the script is not running, no
# placeholder skeleton is left, and the page has not changed for QUIET_MS.
QUIET_MS = 300
QUIET_JS = """
(quietMs) => new Promise((resolve) => {
  let last = performance.now();
  const observer = new MutationObserver(() => { last = performance.now(); });
  observer.observe(document.body, {subtree: true, childList: true, attributes: true,
                                   characterData: true});
  const check = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    const idle = app && app.dataset.testScriptState === 'notRunning'
      && !document.querySelector('[data-testid="stSkeleton"]');
    if (idle && performance.now() - last > quietMs) { observer.disconnect(); resolve(true); }
    else setTimeout(check, 50);
  };
  check();
})
"""


def wait_drawn(page: object) -> None:
    """Wait until the frontend has drawn what the last run sent (see QUIET_JS)."""
    page.evaluate(QUIET_JS, QUIET_MS)


def figure_signatures(page: object) -> list[str]:
    """The fingerprint of every figure currently drawn (see FIGURE_SIGNATURES_JS)."""
    return page.evaluate(FIGURE_SIGNATURES_JS)


def wait_for_figure(page: object, timeout_ms: int = 60_000) -> None:
    """Wait until at least one plotly figure has been drawn (its SVG exists)."""
    page.wait_for_selector(FIGURE_SELECTOR, timeout=timeout_ms)


def wait_figures_changed(page: object, before: list[str], timeout_ms: int = 30_000) -> bool:
    """Wait until the figures' fingerprints differ from `before`; False if they never do."""
    try:
        page.wait_for_function(
            f"before => JSON.stringify(({FIGURE_SIGNATURES_JS})()) !== JSON.stringify(before)"
            " && document.querySelector('.js-plotly-plot, .ae-heatmap, .ae-matrix, .ae-bars')"
            " !== null",
            arg=before,
            timeout=timeout_ms,
            polling=50,
        )
    except Exception as err:  # playwright's TimeoutError
        if "Timeout" in type(err).__name__ or "Timeout" in str(err):
            return False
        raise
    return True


def commit_text(field: object, value: str) -> None:
    """Type `value` into a Streamlit text_input/text_area and commit it like a user would.

    A text_input commits on Enter, a text_area on Ctrl+Enter; blurring commits both, and is
    what a user does when clicking elsewhere. We press the key and then blur, so the value is
    sent even if the key press raced the input event.
    """
    field.fill(value)
    is_area = field.evaluate("e => e.tagName") == "TEXTAREA"
    field.press("Control+Enter" if is_area else "Enter")
    field.evaluate("e => e.blur()")


def box_value(field: object, expected: str, timeout_ms: int = 15_000) -> str:
    """The text a box shows once it holds `expected`, or what it shows after timeout_ms.

    Streamlit 1.67 paints a text area or text input empty on its first frame and fills in its
    value from a React effect just after: every box, bound to the URL or not, opened from a link
    or not (one frame when idle, up to ~0.3 s under load; the reproduction is
    test_browser_links.py, assert_the_box_is_empty_for_a_frame_only). A run that has
    finished on the wire can still show a box empty for that moment, so read the box once the
    frontend has filled it. No rerun is involved: the value was in the run's message all along.
    """
    try:
        field.page.wait_for_function(
            "([element, expected]) => element.value === expected",
            arg=[field.element_handle(timeout=timeout_ms), expected],
            polling="raf",
            timeout=timeout_ms,
        )
    except Exception as err:  # playwright's TimeoutError: report what is shown instead
        if "Timeout" not in type(err).__name__ and "Timeout" not in str(err):
            raise
    return field.input_value()


def sidebar_text(page: object) -> object:
    """The sidebar's sentence text area (widget key "text")."""
    return page.locator('[data-testid="stSidebar"] textarea').first


def sidebar_pair(page: object) -> object:
    """The sidebar's second-sentence input (widget key "pair")."""
    return page.get_by_label("Second sentence (optional)", exact=True)


def open_nav_link(page: object, title: str) -> None:
    """Click the navigation link with this title (expanding "View more" if it is folded away)."""
    links = page.locator('[data-testid="stSidebarNav"] a, [data-testid="stTopNav"] a')
    link = links.filter(has_text=title).first
    if not link.is_visible():
        more = page.locator('[data-testid="stSidebarNavViewButton"]')
        if more.count() and more.first.is_visible():
            more.first.click()
    link.click()


@dataclass
class AppServer:
    """A running `streamlit run` process: its URL and pid (for RSS)."""

    url: str
    process: subprocess.Popen
    started: float  # time.monotonic() just before the process was spawned
    log_path: Path | None = None  # the server's stdout and stderr

    def log_text(self) -> str:
        """What the server printed so far (tracebacks of errors the visitor sees redacted)."""
        return self.log_path.read_text(errors="replace") if self.log_path else ""


@contextmanager
def served_app(
    script: str = "serve.py",
    cwd: Path = ROOT,
    extra_env: dict | None = None,
    wait: bool = True,
    extra_args: tuple[str, ...] = (),
    preexec: Callable[[], None] | None = None,
) -> Iterator[AppServer]:
    """Like running_app(), but yields the process too and logs stderr to a file (never a pipe
    that nobody reads: a chatty server would block once the pipe buffer is full).

    preexec runs in the child just before streamlit starts (bench/memory_tour.py moves it into a
    memory cgroup there, so every byte from the first import on is counted)."""
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "0"),
        **(extra_env or {}),
    }
    with tempfile.NamedTemporaryFile(prefix="streamlit-", suffix=".log") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                script,
                "--server.port",
                str(port),
                # loopback only: a test or bench server is no one else's to reach (it listened
                # on every interface before)
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
                *extra_args,
            ],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            if wait:
                wait_healthy(url)
            yield AppServer(url, process, started, Path(log.name))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc (Linux), in bytes."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


class RunWatcher:
    """Knows when a rerun is over by reading Streamlit's own websocket messages.

    The status widget appears only after a delay, so "wait until it is gone" can return before a
    rerun has even started. The server instead announces every run: a `new_session` message
    opens it and a `script_finished` message closes it (status FINISHED_EARLY_FOR_RERUN when a
    newer rerun interrupted it). Frames are parsed with Streamlit's own protobuf classes.
    """

    def __init__(self, page: object) -> None:
        self.events: list[tuple[float, str, str, int]] = []  # (time, kind, detail, bytes)
        self.page = page
        page.on("websocket", self._attach)

    def _attach(self, websocket: object) -> None:
        websocket.on("framereceived", self._record)

    def _record(self, payload: bytes | str) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if not isinstance(payload, bytes):
            return
        message = ForwardMsg()
        try:
            message.ParseFromString(payload)
        except Exception:  # not a ForwardMsg: ignore rather than break the test
            return
        kind = message.WhichOneof("type") or ""
        detail = ""
        if kind == "script_finished":
            detail = ForwardMsg.ScriptFinishedStatus.Name(message.script_finished)
        self.events.append((time.monotonic(), kind, detail, len(payload)))

    def mark(self) -> int:
        """A position in the event log; wait_settled(mark) waits for runs started after it."""
        return len(self.events)

    def settled_since(self, mark: int) -> bool | None:
        """True: a run started after `mark` and the last one finished; None: no run started."""
        events = self.events[mark:]
        starts = [i for i, event in enumerate(events) if event[1] == "new_session"]
        if not starts:
            return None
        return any(
            event[1] == "script_finished" and event[2] != "FINISHED_EARLY_FOR_RERUN"
            for event in events[starts[-1] :]
        )

    def wait_settled(
        self, mark: int, timeout_ms: int = 120_000, start_timeout_ms: int = 4_000
    ) -> bool:
        """Wait until the runs started after `mark` are over and the browser has painted.

        Returns False if no run started within start_timeout_ms (the action changed nothing).
        """
        deadline = time.monotonic() + timeout_ms / 1000
        start_deadline = time.monotonic() + start_timeout_ms / 1000
        while True:
            state = self.settled_since(mark)
            if state:
                break
            now = time.monotonic()
            if state is None and now > start_deadline:
                return False
            if now > deadline:
                raise TimeoutError(f"the rerun did not finish in {timeout_ms / 1000:.0f} s")
            self.page.wait_for_timeout(30)  # lets playwright deliver websocket events
        # Deltas are applied and plotly draws on the next animation frames.
        self.page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
        return True

    def largest_message(self, mark: int = 0) -> int:
        """The largest websocket message (bytes) received since `mark`."""
        return max((event[3] for event in self.events[mark:]), default=0)


# Keystroke -> updated figure, measured inside the page. Install once per page (add_init_script
# or evaluate), then per measurement: `window.__updateWatch.arm()`, press Enter (or Ctrl+Enter),
# and wait for `window.__updateWatch.t1 !== null`; the latency is t1 - t0 in ms. t0 is the
# Enter keydown; t1 the first animation frame on which any figure shows data it did not have at
# arm() time. Figures are hashed only when plotly replaced their data array (cheap per frame).
UPDATE_WATCH_JS = """
(() => {
  if (window.__updateWatch) return;
  const cache = new WeakMap();
  const hashOf = (g) => {
    // an HTML heatmap (ui/html_heatmap.py) is a new element for every new sentence: its
    // heads' numbers are hashed once per element, as a plotly figure's data is hashed once per
    // data object below. (Read whole on every frame, a 32-piece figure's ~0.2 MB of heads was
    // copied and hashed again at each animation frame while the update was timed.)
    if (g.classList.contains('ae-heatmap')) {
      let h = cache.get(g);
      if (h === undefined) {
        const s = g.dataset.heads || '';
        let x = 0;
        for (let i = 0; i < s.length; i++) x = (x * 31 + s.charCodeAt(i)) | 0;
        h = 'heads:' + s.length + ':' + x;
        cache.set(g, h);
      }
      return h;
    }
    // an HTML value grid or bar chart (ui/html_heatmap.py): its text, numbers included
    if (!g.classList.contains('js-plotly-plot')) return 'html:' + g.textContent;
    const data = g.data;
    if (!data) return 'none';
    let h = cache.get(data);
    if (h !== undefined) return h;
    const s = JSON.stringify(data);
    let x = 0;
    for (let i = 0; i < s.length; i++) x = (x * 31 + s.charCodeAt(i)) | 0;
    h = s.length + ':' + x;
    cache.set(data, h);
    return h;
  };
  const plots = () => [...document.querySelectorAll('.js-plotly-plot, .ae-heatmap, .ae-matrix, .ae-bars')];
  const w = {t0: null, t1: null, base: null};
  w.arm = () => {
    w.t0 = null; w.t1 = null;
    w.base = new Set(plots().map(hashOf));
    const loop = () => {
      if (w.t1 !== null) return;
      if (w.t0 !== null && plots().map(hashOf).some(h => !w.base.has(h))) {
        w.t1 = performance.now();
        return;
      }
      requestAnimationFrame(loop);
    };
    requestAnimationFrame(loop);
  };
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && w.base !== null && w.t0 === null) w.t0 = performance.now();
  }, true);
  window.__updateWatch = w;
})()
"""


def bound_text_keys(app_page: AppPage) -> list[str]:
    """Keys of the page's own text inputs/areas that live in the URL (bind="query-params")."""
    import ast

    keys = []
    for node in ast.walk(ast.parse((ROOT / app_page.path).read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
            "text_input",
            "text_area",
        ):
            kwargs = {k.arg: k.value for k in node.keywords}
            bind, key = kwargs.get("bind"), kwargs.get("key")
            bound = isinstance(bind, ast.Constant) and bind.value == "query-params"
            if bound and isinstance(key, ast.Constant):
                keys.append(str(key.value))
    return keys


# ---- every tab of every page -----------------------------------------------------------------
# The load test's tour, the memory tours (bench/memory_tour.py) and the hostile-tokenizer test
# open every tab the same way, through open_every_tab(). Tabs and expanders are found in the
# page as drawn, so a tab or expander added later is opened without touching this file.

# Streamlit 1.67 draws st.tabs as react-aria tabs: [role=tab] (data-testid="stTab") inside a
# [role=tablist]; only the open tab's panel exists. widgets.section_tabs reruns on a click and
# draws only the open tab.
TAB_SELECTOR = '[data-testid="stMain"] [role="tablist"] [role="tab"]'
# Expanders (widgets.folded reruns the page when one opens and draws its content only then; a
# plain st.expander opens in the browser alone).
EXPANDER_SELECTOR = '[data-testid="stMain"] [data-testid="stExpander"]'
FIRST_CLOSED_EXPANDER_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stExpander"]')]
  .findIndex(e => !e.querySelector('details').open)
"""
# The index-th expander is open and shows something beyond its summary line.
EXPANDER_DRAWN_JS = """
(index) => {
  const e = document.querySelectorAll('[data-testid="stMain"] [data-testid="stExpander"]')[index];
  const details = e && e.querySelector('details');
  return Boolean(details) && details.open && [...details.children]
    .some(c => c.tagName !== 'SUMMARY' && c.innerText.trim().length > 0);
}
"""
# What a visitor sees as a failure: an exception box or an st.error message.
ERROR_SELECTOR = '[data-testid="stException"], [data-testid="stAlertContentError"]'
# Idle and drawn, checked once (the caller polls, so every wait stays bounded): Streamlit says
# the script is not running (the frontend says "running" from the click that asks for a rerun
# on), no placeholder skeleton is left, and nothing in the page changed for quietMs (a
# MutationObserver installed on the first call; a new page load installs a new one).
IDLE_AND_QUIET_JS = """
(quietMs) => {
  if (window.__aeLastChange === undefined) {
    window.__aeLastChange = performance.now();
    new MutationObserver(() => { window.__aeLastChange = performance.now(); })
      .observe(document.body, {subtree: true, childList: true, attributes: true,
                               characterData: true});
    return false;
  }
  const app = document.querySelector('[data-testid="stApp"]');
  return Boolean(app) && app.dataset.testScriptState === 'notRunning'
    && !document.querySelector('[data-testid="stSkeleton"]')
    && performance.now() - window.__aeLastChange > quietMs;
}
"""
# Where a clicked tab is: "drawn" (selected, and its panel holds something), "empty" (selected,
# nothing in its panel yet) or "not selected" (the click did not take).
TAB_STATE_JS = """
(index) => {
  const tab = document.querySelectorAll(
    '[data-testid="stMain"] [role="tablist"] [role="tab"]')[index];
  if (!tab || tab.getAttribute('aria-selected') !== 'true') return 'not selected';
  const panel = document.getElementById(tab.getAttribute('aria-controls'));
  return panel && panel.innerText.trim().length > 0 ? 'drawn' : 'empty';
}
"""


# The longest input a visitor can give: 510 words of one word piece each, 512 pieces with [CLS]
# and [SEP] (the bundled model's maximum), as the `text` the sidebar reads from the URL.
_WORDS = (
    "the river bank flooded and money in the bank grew while time flies like an arrow "
    "but fruit flies like a banana"
).split()
LONG_QUERY = {"text": " ".join((_WORDS * 40)[:510])}


class ServerGone(RuntimeError):
    """The app server died (the kernel's OOM killer, a crash) or stopped answering: a visitor's
    page would just hang, so the tour stops here and says so."""


class Liveness:
    """Tells whether the server still serves: its process runs and /_stcore/health answers.

    check() raises ServerGone at once when the process has exited, or when the health endpoint
    has not answered for `silent_s` (a busy server may answer slowly; a dead one never does).
    The endpoint is asked at most every `period_s`, so check() is cheap enough to call from
    every polling loop.
    """

    def __init__(self, server: AppServer, silent_s: float = 60.0, period_s: float = 2.0) -> None:
        self.server, self.silent_s, self.period_s = server, silent_s, period_s
        self.last_ok = self.last_asked = time.monotonic()

    def check(self) -> None:
        code = self.server.process.poll()
        if code is not None:
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            raise ServerGone(f"the server process is gone ({how})")
        now = time.monotonic()
        if now - self.last_asked < self.period_s:
            return
        self.last_asked = now
        try:
            with urllib.request.urlopen(f"{self.server.url}/_stcore/health", timeout=5) as reply:
                if reply.read().strip() == b"ok":
                    self.last_ok = time.monotonic()
        except OSError:
            pass
        if time.monotonic() - self.last_ok > self.silent_s:
            raise ServerGone(f"/_stcore/health has not answered for {self.silent_s:.0f} s")


def settle(
    page: object,
    runs: RunWatcher,
    mark: int,
    liveness: Liveness | None = None,
    *,
    expect_run: bool = False,
    timeout_s: float = 300.0,
    what: str = "the page",
) -> None:
    """Wait until the runs started after `mark` are over and the frontend has drawn them.

    expect_run: a run must start first (a page load); otherwise an action that started none (a
    plain expander) is done once the page is idle and quiet. Polls every 50 ms; raises
    ServerGone when the server dies, TimeoutError after timeout_s.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        state = runs.settled_since(mark)
        run_over = state is True or (state is None and not expect_run)
        if run_over and page.evaluate(IDLE_AND_QUIET_JS, QUIET_MS):
            return
        if liveness is not None:
            liveness.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} was not drawn in {timeout_s:.0f} s")
        page.wait_for_timeout(50)  # a polling step; lets playwright deliver websocket events


# The one door's refusals (ui/door.py: ServerShort) are warnings, but for a tour they are
# failures: the visitor asked for a page and got "try again" instead.
REFUSALS = ("short of memory", "busy with other visitors")


def shown_errors(page: object) -> list[str]:
    """Texts of the exception boxes, st.error messages and the door's refusals on the page."""
    errors = page.locator(ERROR_SELECTOR).all_inner_texts()
    warnings = page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts()
    refusals = [text for text in warnings if any(words in text for words in REFUSALS)]
    return [text[:300] for text in errors + refusals]


@dataclass
class TabSeen:
    """One tab as a visitor saw it once drawn ("" for a page without tabs)."""

    tab: str
    errors: list[str]


def open_expanders(
    page: object,
    runs: RunWatcher,
    liveness: Liveness | None = None,
    timeout_s: float = 300.0,
    most: int = 30,
    empty_s: float = 30.0,
) -> int:
    """Open every closed expander of the page's main area, one by one, each drawn before the
    next (opening one may draw more); returns how many were opened."""
    opened = 0
    while opened < most:
        index = page.evaluate(FIRST_CLOSED_EXPANDER_JS)
        if index < 0:
            break
        mark = runs.mark()
        page.locator(EXPANDER_SELECTOR).nth(index).locator("summary").first.click()
        settle(page, runs, mark, liveness, timeout_s=timeout_s, what="an opened expander")
        # On a loaded machine the page can be idle and quiet before the rerun that draws the
        # content has even started (as for tabs): wait, bounded, until the content is there.
        empty_since = time.monotonic()
        while not page.evaluate(EXPANDER_DRAWN_JS, index):
            if time.monotonic() - empty_since > empty_s:
                break  # an expander that draws nothing is left as it is
            if liveness is not None:
                liveness.check()
            page.wait_for_timeout(100)  # a polling step
        settle(page, runs, runs.mark(), liveness, timeout_s=timeout_s, what="an opened expander")
        opened += 1
    return opened


def open_every_tab(
    page: object,
    runs: RunWatcher,
    liveness: Liveness | None = None,
    on_tab: Callable[[str], None] | None = None,
    timeout_s: float = 300.0,
) -> list[TabSeen]:
    """Open every tab of the page in turn, the open one first, and every expander in each.

    The page must be drawn already (settle()). Tabs are read from the page after each click, so
    tabs drawn inside a tab are opened too. Each tab counts once it is selected, its panel holds
    something and the page is idle and quiet. on_tab(label) runs on each drawn tab (a test's
    checks). Returns what each tab showed; raises ServerGone or TimeoutError.
    """
    seen: list[TabSeen] = []
    done: set[tuple[int, str]] = set()

    def tabs() -> list[tuple[tuple[int, str], bool]]:
        # (tab list's position among the page's tab lists, label), and whether it is open
        return page.evaluate(
            """(selector) => {
              const lists = [...document.querySelectorAll('[data-testid="stMain"] [role="tablist"]')];
              return [...document.querySelectorAll(selector)].map(t => [
                [lists.indexOf(t.closest('[role="tablist"]')), t.innerText.trim()],
                t.getAttribute('aria-selected') === 'true']);
            }""",
            TAB_SELECTOR,
        )

    def record(label: str) -> None:
        open_expanders(page, runs, liveness, timeout_s)
        seen.append(TabSeen(label, shown_errors(page)))
        if on_tab is not None:
            on_tab(label)

    present = tabs()
    for key, is_open in present:
        if is_open:
            done.add(tuple(key))
    record(" + ".join(key[1] for key, is_open in present if is_open))
    while True:
        present = tabs()
        todo = [i for i, (key, _) in enumerate(present) if tuple(key) not in done]
        if not todo:
            return seen
        index = todo[0]
        key = tuple(present[index][0])
        done.add(key)
        try:
            problem = open_tab(page, runs, index, liveness, timeout_s)
            if problem:
                seen.append(TabSeen(key[1], [problem]))
                continue
            record(key[1])
        except ServerGone as err:
            raise ServerGone(f"{key[1]}: {err}") from err


# A click waits this long for its tab to be there and clickable (Playwright's own default is
# the page's whole step timeout, which would hide a page that lost its tabs for minutes).
CLICK_TIMEOUT_MS = 30_000


def open_tab(
    page: object,
    runs: RunWatcher,
    index: int,
    liveness: Liveness | None = None,
    timeout_s: float = 300.0,
    clicks: int = 3,
    empty_s: float = 30.0,
) -> str | None:
    """Click the index-th tab and wait until it is selected and its content drawn; None when it
    is, else what went wrong.

    On a loaded machine a click can be lost (the page still laying out under the pointer): a tab
    left unselected once the page is idle is clicked again, up to `clicks` times. A selected tab
    whose panel stays empty for empty_s after the page went idle drew nothing.
    """
    for _ in range(clicks):
        mark = runs.mark()
        tab = page.locator(TAB_SELECTOR).nth(index)
        if tab.count() == 0:  # the page lost its tabs: a refusal or an error stands instead
            return "; ".join(shown_errors(page)) or "the page no longer shows this tab"
        tab.click(timeout=CLICK_TIMEOUT_MS)
        settle(page, runs, mark, liveness, timeout_s=timeout_s, what=f"tab {index}")
        empty_since = time.monotonic()
        while True:
            state = page.evaluate(TAB_STATE_JS, index)
            if state == "drawn":
                settle(page, runs, runs.mark(), liveness, timeout_s=timeout_s, what=f"tab {index}")
                return None
            if state == "not selected" and shown_errors(page):
                return "; ".join(shown_errors(page))  # the door refused, or the page failed
            if state == "not selected":
                print(f"tab {index}: not selected once idle; clicking again", file=sys.stderr)
                break
            if time.monotonic() - empty_since > empty_s:
                return f"the tab opened but drew nothing in {empty_s:.0f} s"
            if liveness is not None:
                liveness.check()
            page.wait_for_timeout(100)  # a polling step
    return f"the tab was not selected after {clicks} clicks"


def tour_pages(
    page: object,
    runs: RunWatcher,
    base_url: str,
    pages: list[AppPage],
    query: dict[str, str] | None = None,
    liveness: Liveness | None = None,
    timeout_s: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
    """One visitor opens every page by URL (with `query`, e.g. the sentence as `text`) and every
    tab and expander on it; returns the failures seen, as "page / tab: error" lines.

    Raises ServerGone (with the page and tab it happened on) when the server dies.
    """
    failures: list[str] = []
    suffix = "?" + urllib.parse.urlencode(query) if query else ""
    for app_page in pages:
        where = app_page.title
        try:
            mark = runs.mark()
            try:
                page.goto(f"{base_url}/{app_page.url_path}{suffix}", timeout=timeout_s * 1000)
            except Exception:  # refused or cut off: a dead server says why, else it is real
                if liveness is not None:
                    liveness.check()
                raise
            settle(page, runs, mark, liveness, expect_run=True, timeout_s=timeout_s, what=where)
            for seen in open_every_tab(page, runs, liveness, timeout_s=timeout_s):
                failures += [f"{where} / {seen.tab or '-'}: {error}" for error in seen.errors]
                if progress is not None:
                    progress(f"{where} / {seen.tab or '-'}")
        except ServerGone as err:
            raise ServerGone(f"{where}: {err}") from err
        except Exception as err:  # a timeout or a lost page is a failure of this page
            if liveness is not None:
                try:
                    liveness.check()
                except ServerGone as gone:
                    raise ServerGone(f"{where}: {gone}") from err
            failures.append(f"{where}: {type(err).__name__}: {str(err)[:200]}")
    return failures


def visitor_tours(
    browser: object,
    server: object,
    tours: list[tuple[str, dict]],
    timeout_s: float,
    who: str = "",
) -> Iterator[tuple[str, list[str]]]:
    """One visitor (own context, own session) tours every page for each (name, query) in turn;
    yields (name, failures) after each tour and stops after the server is gone."""
    pages = app_pages()
    liveness = Liveness(server)
    context = browser.new_context(viewport={"width": 1300, "height": 1400})
    page = context.new_page()
    page.set_default_timeout(timeout_s * 1000)
    runs = RunWatcher(page)
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)[:200]))
    try:
        for name, query in tours:
            try:
                failures = tour_pages(
                    page,
                    runs,
                    server.url,
                    pages,
                    query,
                    liveness,
                    timeout_s,
                    progress=lambda where, name=name: print(f"  {who}{name}: {where}", flush=True),
                )
            except ServerGone as err:
                yield name, [f"SERVER GONE at {err}"]
                return
            failures += [f"script error: {error}" for error in script_errors]
            script_errors.clear()
            yield name, failures
    finally:
        with contextlib.suppress(Exception):  # the browser may be going down with the server
            context.close()
