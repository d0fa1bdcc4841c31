"""Many visitors at once: N concurrent browser sessions against one local server, several rounds.

Every session is its own chromium context (own Streamlit session). In each round every session,
at the same moment, moves to its next page of the tour (so all registered pages run) and types
a new sentence of up to 512 word pieces into the sidebar; we time Ctrl+Enter -> the first frame
showing a redrawn figure (measured in the page). Meanwhile a sampler reads the resident memory
of the streamlit process and its children from /proc every 0.25 s.

Reported: failures (timeouts, exception boxes, script errors, lost connections: must be 0),
p50/p95 of keystroke -> updated figure, peak server RSS (must stay < 2.2 GB) and RSS at the end
of each round (flat after warm-up: the caches are bounded).

    python bench/load_test.py --sessions 10 --rounds 5
    python bench/load_test.py --sessions 20 --rounds 5
    python bench/load_test.py --quick        # CI: 4 sessions, 3 rounds, ~1-2 minutes
    python bench/load_test.py --tour         # one visitor opens every tab of every page: errors, RSS
Exit status 1 if there were failures or the RSS limit was crossed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.browser, the harness the tests share

from tests.support.browser import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    FIGURE_SELECTOR,
    FOLDED_BY_A_QUESTION,
    LONG_QUERY,
    SENTENCE_TAB,
    UPDATE_WATCH_JS,
    AppPage,
    RunWatcher,
    app_pages,
    chromium,
    served_app,
    tree_rss_bytes,
    visitor_tours,
)

RSS_LIMIT = 2.2e9
TOKEN_LENGTHS = (512, 32, 256, 128, 64, 384)  # per session and round, cycling: up to 512
VOCABULARY = [
    "time",
    "flies",
    "like",
    "an",
    "arrow",
    "fruit",
    "bananas",
    "river",
    "bank",
    "money",
    "water",
    "storm",
    "bridge",
    "children",
    "garden",
    "window",
    "morning",
    "evening",
    "music",
    "letter",
    "teacher",
    "student",
    "doctor",
    "city",
    "village",
    "road",
    "mountain",
    "forest",
    "ocean",
    "island",
    "winter",
    "summer",
    "coffee",
    "bread",
    "market",
    "story",
    "history",
    "science",
    "question",
    "answer",
    "friend",
    "family",
    "house",
    "street",
    "train",
    "station",
    "paper",
    "light",
    "dark",
    "green",
    "red",
]


def follows_sidebar(app_page: AppPage) -> bool:
    """Pages whose figures redraw when the sidebar sentence changes (they read it)."""
    source = (ROOT / app_page.path).read_text()
    return "trace_or_stop(" in source or "inputs.text" in source


def sentence(session: int, round_index: int) -> str:
    """A sentence unique to (session, round), of roughly TOKEN_LENGTHS[...] word pieces."""
    rng = random.Random(session * 1000 + round_index)
    n_words = TOKEN_LENGTHS[(session + round_index) % len(TOKEN_LENGTHS)] - 2
    words = [rng.choice(VOCABULARY) for _ in range(n_words)]
    return f"session {session} round {round_index}: " + " ".join(words[: max(n_words - 5, 1)])


@dataclass
class Report:
    latencies_ms: list[float] = field(default_factory=list)
    per_round_ms: dict[int, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    rss_round_end: list[int] = field(default_factory=list)
    rss_after_warmup: int = 0
    peak_rss: int = 0
    server_log: str = ""  # written when something failed


class RssSampler(threading.Thread):
    """Reads the server's resident memory (process + children) every `period` seconds."""

    def __init__(self, pid: int, period: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.period, self.peak, self.last = pid, period, 0, 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.last = tree_rss_bytes(self.pid)
            self.peak = max(self.peak, self.last)
            self.stopping.wait(self.period)


async def settled(runs: RunWatcher, mark: int, timeout_s: float = 180.0) -> bool:
    """Async twin of RunWatcher.wait_settled: the runs started after `mark` are over."""
    deadline = time.monotonic() + timeout_s
    start_deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        state = runs.settled_since(mark)
        if state:
            return True
        if state is None and time.monotonic() > start_deadline:
            return False
        await asyncio.sleep(0.03)
    raise TimeoutError("run did not finish")


class Session:
    """One visitor: a browser context on the app, touring the pages and typing sentences."""

    def __init__(self, index: int, base_url: str, tour: list[AppPage]) -> None:
        self.index, self.base_url, self.tour = index, base_url, tour
        self.script_errors: list[str] = []
        self.closed = False
        self.websocket: object | None = None
        self.close_reason = ""

    async def start(self, browser: object) -> None:
        self.context = await browser.new_context(viewport={"width": 1300, "height": 1400})
        await self.context.add_init_script(UPDATE_WATCH_JS)
        self.page = await self.context.new_page()
        self.page.set_default_timeout(180_000)
        self.runs = RunWatcher(self.page)
        self.page.on("pageerror", lambda error: self.script_errors.append(str(error)))
        self.page.on("websocket", self._track)
        self.page.on("console", self._console)
        await self.visit(self.tour[self.index % len(self.tour)])

    async def start_or_fail(self, browser: object, report: Report) -> None:
        """start(), but a session that cannot open its first page is a failure, not a crash."""
        self.started = False
        try:
            await self.start(browser)
            self.started = True
        except Exception as err:
            shot = Path(tempfile.gettempdir()) / f"load-session-{self.index}.png"
            shown = []  # what the visitor read instead of a figure: an error box or a warning
            with contextlib.suppress(Exception):
                await self.page.screenshot(path=str(shot))
                shown = await self.page.locator(
                    '[data-testid="stException"], [data-testid="stAlert"]'
                ).all_inner_texts()
            report.failures.append(
                f"session {self.index} could not open {self.page.url[:80]} ({shot}): "
                f"{type(err).__name__}: {str(err)[:160]}"
                + (f"; the page showed: {shown[0][:160]!r}" if shown else "")
            )

    def _track(self, websocket: object) -> None:
        self.websocket = websocket
        websocket.on("close", lambda _: self._lost(websocket))

    def _console(self, message: object) -> None:
        if "onclose" in message.text:  # Streamlit's frontend logs the close code and reason
            self.close_reason = message.text[:160]

    def _lost(self, websocket: object) -> None:
        # Only the page's current connection counts: on a busy machine the previous page's
        # socket can report its (intended) close after the next page has already loaded.
        if websocket is self.websocket and not self.closed:
            self.script_errors.append("websocket closed")

    async def visit(self, app_page: AppPage, figure: bool = True) -> None:
        """Open a page keeping the current URL parameters (the sentence), like the nav does; a
        page drawn in tabs opens on the tab that reads the sentence, which a new one redraws.

        figure=False: wait for the run only (the Lab draws nothing before it is trained)."""
        kept = (
            urllib.parse.parse_qsl(urllib.parse.urlsplit(self.page.url).query)
            if self.page.url.startswith("http")
            else []
        )
        tab = SENTENCE_TAB.get(app_page.path, {})
        query = urllib.parse.urlencode(
            [(k, v) for k, v in kept if k not in tab] + list(tab.items())
        )
        mark = self.runs.mark()
        self.closed = True  # a page load closes the old websocket on purpose
        await self.page.goto(
            f"{self.base_url}/{app_page.url_path}" + (f"?{query}" if query else "")
        )
        self.closed = False
        await settled(self.runs, mark, 180)
        if figure:  # a figure, or an error box in its place: that fails now, not in 3 minutes
            error_box = '[data-testid="stException"]'
            await self.page.wait_for_selector(f"{FIGURE_SELECTOR}, {error_box}", timeout=180_000)
            if await self.page.locator(error_box).count():
                raise RuntimeError("the page showed an error box instead of its figure")

    async def round(self, round_index: int, report: Report) -> None:
        where = f"session {self.index}, round {round_index}"
        try:
            app_page = self.tour[(self.index + round_index) % len(self.tour)]
            if round_index and len(self.tour) > 1:
                await self.visit(app_page)
            field_ = self.page.locator('[data-testid="stSidebar"] textarea').first
            await field_.fill(sentence(self.index, round_index))
            await self.page.evaluate("window.__updateWatch.arm()")
            mark = self.runs.mark()
            await field_.press("Control+Enter")
            await self.page.wait_for_function("window.__updateWatch.t1 !== null", timeout=180_000)
            latency = await self.page.evaluate("window.__updateWatch.t1 - window.__updateWatch.t0")
            await settled(self.runs, mark)
            errors = await self.page.locator('[data-testid="stException"]').all_inner_texts()
            if errors:
                report.failures.append(f"{where} ({app_page.title}): exception {errors[0][:200]}")
            elif self.script_errors:
                report.failures.append(f"{where}: {self.script_errors[:2]} {self.close_reason}")
                self.script_errors.clear()
            else:
                report.latencies_ms.append(latency)
                report.per_round_ms.setdefault(round_index, []).append(latency)
        except Exception as err:  # a timeout or a lost page is a failure, not a crash
            report.failures.append(f"{where}: {type(err).__name__}: {str(err)[:200]}")


async def run_load(
    sessions: int, rounds: int, report: Report, server_env: dict | None = None
) -> dict:
    from playwright.async_api import async_playwright

    # the check asks questions and draws no figure for a session to wait for; on the pages
    # FOLDED_BY_A_QUESTION a typed sentence redraws nothing until a question is answered
    tour = [
        page
        for page in app_pages()
        if follows_sidebar(page)
        and page.path != "views/check.py"
        and page.path not in FOLDED_BY_A_QUESTION
    ]
    with served_app(extra_env=server_env) as server:
        sampler = RssSampler(server.process.pid)
        sampler.start()
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            try:
                visitors = [Session(i, server.url, tour) for i in range(sessions)]
                started = time.monotonic()
                await asyncio.gather(*(v.start_or_fail(browser, report) for v in visitors))
                visitors = [v for v in visitors if v.started]
                warmup_s = time.monotonic() - started
                report.rss_after_warmup = sampler.last
                print(
                    f"{sessions} sessions open in {warmup_s:.1f} s, RSS {sampler.last / 1e6:.0f} MB",
                    flush=True,
                )
                for round_index in range(rounds):
                    started = time.monotonic()
                    await asyncio.gather(*(v.round(round_index, report) for v in visitors))
                    times = report.per_round_ms.get(round_index, [])
                    report.rss_round_end.append(sampler.last)
                    print(
                        f"round {round_index + 1}/{rounds}: {time.monotonic() - started:5.1f} s, "
                        f"p50 {statistics.median(times) if times else float('nan'):6.0f} ms, "
                        f"RSS {sampler.last / 1e6:.0f} MB, failures so far {len(report.failures)}",
                        flush=True,
                    )
                for visitor in visitors:
                    visitor.closed = True
                if report.failures:  # keep the server's tracebacks (visitors see them redacted)
                    log = Path(tempfile.gettempdir()) / "load-test-server.log"
                    log.write_text(server.log_text())
                    report.server_log = str(log)
            finally:
                await browser.close()
        sampler.stopping.set()
        sampler.join()
        report.peak_rss = sampler.peak
    return {"pages": [p.title for p in tour]}


def tour_memory() -> int:
    """One visitor tours every registered page, every tab and expander opened (default sentence,
    then ~512 word pieces); RSS after each tour and every page/tab that showed an error.

    Exit status 1 on any error shown or when the server is gone; bench/memory_tour.py runs the
    same tour inside a memory cgroup and with five visitors."""
    pages = app_pages()
    results = []
    tours = [("default sentence", {}), ("~512 word pieces", LONG_QUERY)]
    with served_app() as server, chromium() as browser:
        for name, failures in visitor_tours(browser, server, tours, timeout_s=300.0):
            results.append((name, tree_rss_bytes(server.process.pid), failures))
            print(f"{name}: RSS {results[-1][1] / 1e6:.0f} MB", flush=True)
    print()
    for name, rss, failures in results:
        print(f"RSS after a tour of all {len(pages)} pages, {name}: {rss / 1e6:.0f} MB")
        for failure in failures:
            print(f"  - {failure}")
    ok = all(not failures for _, _, failures in results) and len(results) == 2
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="CI size: 4 sessions, 3 rounds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment for the server, e.g. MALLOC_ARENA_MAX=2 (repeatable)",
    )
    parser.add_argument(
        "--tour",
        action="store_true",
        help="instead: one visitor opens every tab and expander of every page, at the default "
        "sentence and at 512 word pieces; lists every page/tab that showed an error, RSS after "
        "each tour (bench/memory_tour.py does this inside a memory cgroup)",
    )
    args = parser.parse_args()
    if args.tour:
        return tour_memory()
    if args.quick:
        args.sessions, args.rounds = 4, 3

    report = Report()
    server_env = dict(item.split("=", 1) for item in args.server_env)
    extra = asyncio.run(run_load(args.sessions, args.rounds, report, server_env))
    p50, p95 = percentile(report.latencies_ms, 0.5), percentile(report.latencies_ms, 0.95)
    growth = (
        report.rss_round_end[-1] / report.rss_round_end[min(1, len(report.rss_round_end) - 1)] - 1
        if report.rss_round_end
        else 0.0
    )
    print()
    print(
        f"sessions x rounds     : {args.sessions} x {args.rounds} ({len(extra['pages'])} pages in the tour)"
    )
    print(f"updates measured      : {len(report.latencies_ms)}")
    print(f"failures              : {len(report.failures)}")
    for failure in report.failures[:20]:
        print(f"  - {failure}")
    if report.server_log:
        print(f"  server log with tracebacks: {report.server_log}")
    print(f"keystroke -> figure   : p50 {p50:.0f} ms, p95 {p95:.0f} ms")
    print(
        f"peak server RSS       : {report.peak_rss / 1e6:.0f} MB (limit {RSS_LIMIT / 1e6:.0f} MB)"
    )
    rounds_text = ", ".join(f"{rss / 1e6:.0f}" for rss in report.rss_round_end)
    print(f"RSS after warm-up     : {report.rss_after_warmup / 1e6:.0f} MB")
    print(f"RSS at end of rounds  : {rounds_text} MB (growth after round 2: {growth:+.0%})")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "sessions": args.sessions,
                    "rounds": args.rounds,
                    "pages": extra["pages"],
                    "latencies_ms": report.latencies_ms,
                    "p50_ms": p50,
                    "p95_ms": p95,
                    "failures": report.failures,
                    "peak_rss_bytes": report.peak_rss,
                    "rss_after_warmup_bytes": report.rss_after_warmup,
                    "rss_round_end_bytes": report.rss_round_end,
                },
                indent=2,
            )
        )
    ok = not report.failures and report.peak_rss < RSS_LIMIT
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
