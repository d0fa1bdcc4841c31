"""Browser work of this app versus the plain reference app, side by side, in headless chromium.

The server side of this app is already lighter than the reference (bench/bench_speed.py); what a
school laptop or phone feels is the browser's main thread. This bench counts it the way Chromium
does: CDP `Performance.getMetrics` TaskDuration (seconds the renderer's main thread spent on
tasks), read before and after an action in the same tab. Both apps run at once and are measured
alternately, so background load hits both alike.

- load: a fresh browser context (empty cache, so plotly.js is parsed again, as on a first visit)
  opens the page; counted until the run is over, the figure is drawn and 0.5 s have passed.
- update: a new ~32-piece sentence committed with Ctrl+Enter in the sidebar box; counted the same.
- long: the update to a 512-piece sentence (the heaviest input the model takes).
- scrub: ArrowRight on the head slider -> the new head drawn (latency in ms, and browser work);
  --presses of them per round (heads 1, 2, ...): one head's lines can take twice another's.

Pages of this app are read from app.py; "all pages" averages the load and update over them and
divides by the reference's one page.

    python bench/bench_browser.py                   # Overview + all pages, 3 rounds
    python bench/bench_browser.py --throttle 4      # Chromium's CPU slowed 4x (a school laptop)
    python bench/bench_browser.py --pages overview --rounds 5 --profile /tmp/overview.cpuprofile
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.browser, the harness the tests share
sys.path.insert(0, str(ROOT / "bench"))  # for bench_speed

from bench_speed import sentences  # noqa: E402
from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402

from tests.support.browser import (  # noqa: E402
    FIGURE_SELECTOR,
    SENTENCE_TAB,
    RunWatcher,
    app_pages,
    chromium,
    served_app,
)

VIEWPORT = {"width": 1300, "height": 1400}
# What shows that a page is drawn: its first figure. A page that drew none until the visitor
# asked would wait for its first button instead (Attention, learned now opens on a trained run).
BUTTON_PAGES: set[str] = set()
BUTTON_SELECTOR = "[data-testid='stMain'] [data-testid='stButton']"
# A head switch that redraws nothing in this long: the open tab has no figure of one head (the
# first tabs of 4 · Multi-head attention and 3 · Scaling and masking show fixed heads or random
# scores), so there is no latency to time; the run says so.
SCRUB_WAIT_MS = 15_000
SETTLE_MS = 500  # trailing work after the run (plotly's resize, fonts) is part of the cost
# True once every plotly chart of the page has drawn its svg (none: true at once).
EVERY_CHART_DRAWN_JS = """
() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
  .every(chart => chart.querySelector('.main-svg'))
"""

# ArrowRight on a focused slider -> the first animation frame after a figure has been redrawn
# (plotly's "plotly_afterplot", which both a new figure from the server and a switch in the
# browser end with; an HTML heatmap's "ae-headshown"). Listening costs nothing per frame; comparing the figures' data every frame
# (as this bench first did) added its own main-thread work to what it measured.
SCRUB_WATCH_JS = """
(() => {
  if (window.__scrub) return;
  const w = {t0: null, t1: null, plotted: false};
  // A figure drawn anew by the server's run may be a new element: one met after the key press
  // that is drawn already counts as plotted.
  const hookAll = () => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
      if (gd.__scrubHooked) continue;
      gd.__scrubHooked = true;
      gd.on('plotly_afterplot', () => { if (w.t0 !== null) w.plotted = true; });
      if (w.t0 !== null && gd._fullLayout) w.plotted = true;
    }
  };
  // an HTML heatmap (ui/html_heatmap.py) announces a head it has painted
  document.addEventListener('ae-headshown', () => { if (w.t0 !== null) w.plotted = true; });
  w.arm = () => {
    w.t0 = null; w.t1 = null; w.plotted = false;
    hookAll();
    const loop = () => {
      if (w.t1 !== null) return;
      if (w.t0 !== null) hookAll();
      if (w.plotted) { w.t1 = performance.now(); return; }
      requestAnimationFrame(loop);
    };
    requestAnimationFrame(loop);
  };
  document.addEventListener('keydown', e => {
    if (e.key === 'ArrowRight' && w.t0 === null) w.t0 = performance.now();
  }, true);
  window.__scrub = w;
})()
"""


class Tab:
    """One browser context and page on an app, with a CDP session for Chromium's own counters."""

    def __init__(self, browser: object, throttle: float, drawn: str = FIGURE_SELECTOR) -> None:
        self.drawn = drawn
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.page.set_default_timeout(180_000)
        self.runs = RunWatcher(self.page)
        self.cdp = self.context.new_cdp_session(self.page)
        self.cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
        if throttle > 1:
            self.cdp.send("Emulation.setCPUThrottlingRate", {"rate": throttle})

    def task_ms(self) -> float:
        metrics = self.cdp.send("Performance.getMetrics")["metrics"]
        return 1000 * next(m["value"] for m in metrics if m["name"] == "TaskDuration")

    def settle(self, mark: int, start_timeout_ms: int = 4_000) -> None:
        self.runs.wait_settled(mark, timeout_ms=300_000, start_timeout_ms=start_timeout_ms)
        self.page.wait_for_selector(self.drawn, timeout=300_000)
        # every plotly chart drawn too: a page whose first figure is HTML would otherwise be
        # counted before plotly.js has loaded and drawn the rest
        self.page.wait_for_function(EVERY_CHART_DRAWN_JS, timeout=300_000, polling=50)
        self.page.wait_for_timeout(SETTLE_MS)

    def load(self, url: str) -> float:
        """Main-thread ms from navigation to the settled page."""
        before = self.task_ms()
        mark = self.runs.mark()
        self.page.goto(url)
        self.settle(mark, start_timeout_ms=120_000)
        return self.task_ms() - before

    def update(self, text: str) -> float:
        """Main-thread ms for committing a new sidebar sentence (or the reference's only box);
        NaN on a page with sentences of its own, where the sidebar's box is greyed out."""
        box = self.page.locator("textarea").first
        if not box.is_enabled():
            return float("nan")
        box.fill(text)
        before = self.task_ms()
        mark = self.runs.mark()
        box.press("Control+Enter")
        self.settle(mark)
        return self.task_ms() - before

    def scrub(self) -> tuple[float, float] | None:
        """(latency ms, main-thread ms) of ArrowRight on the Head slider; None without one."""
        # Found by its label: on some pages the second slider is not a head (a position, a
        # window), and what it changes may not be a plotly figure at all.
        heads = self.page.locator(
            '[data-testid="stMain"] [data-testid="stSlider"] input[type="range"][aria-label="Head"]'
        )
        if heads.count() == 0:
            return None
        self.page.evaluate(SCRUB_WATCH_JS)
        slider = heads.first
        slider.focus()
        self.page.evaluate("window.__scrub.arm()")
        before = self.task_ms()
        mark = self.runs.mark()
        self.page.keyboard.press("ArrowRight")
        try:
            self.page.wait_for_function("window.__scrub.t1 !== null", timeout=SCRUB_WAIT_MS)
        except PlaywrightTimeout:  # the open tab draws nothing that depends on the head
            self.runs.wait_settled(mark, start_timeout_ms=1_500)
            print("  (a head switch redrew nothing within 15 s: no scrub time for this page)")
            return None
        latency = self.page.evaluate("window.__scrub.t1 - window.__scrub.t0")
        self.runs.wait_settled(mark, start_timeout_ms=1_500)  # a client-side switch runs nothing
        self.page.wait_for_timeout(SETTLE_MS)
        return float(latency), self.task_ms() - before

    def close(self) -> None:
        self.context.close()


def profile_load(browser: object, url: str, out: Path, throttle: float) -> None:
    """Chromium's sampling profiler over one page load; the file opens in DevTools' Performance."""
    tab = Tab(browser, throttle)
    tab.cdp.send("Profiler.enable")
    tab.cdp.send("Profiler.setSamplingInterval", {"interval": 200})
    tab.cdp.send("Profiler.start")
    tab.load(url)
    tab.update(sentences(1, 32, seed=11)[0])
    profile = tab.cdp.send("Profiler.stop")["profile"]
    out.write_text(json.dumps(profile))
    print(f"profile written to {out}")
    print_top_functions(profile)
    tab.close()


def print_top_functions(profile: dict, top: int = 25) -> None:
    """Self time per function and script, heaviest first (a quick look without DevTools)."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    deltas = profile.get("timeDeltas", [])
    self_us: dict[tuple[str, str], float] = {}
    for sample, delta in zip(profile.get("samples", []), deltas, strict=False):
        frame = nodes[sample]["callFrame"]
        name = (frame.get("functionName") or "(anonymous)", Path(frame.get("url", "")).name)
        self_us[name] = self_us.get(name, 0.0) + delta
    total = sum(self_us.values()) or 1.0
    for (function, script), us in sorted(self_us.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{us / 1000:8.1f} ms {100 * us / total:5.1f}%  {function[:40]:40s} {script[:40]}")


def median(values: list[float]) -> float:
    """The median of the numbers measured (NaN: nothing to measure on that page)."""
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="loads and updates per page")
    parser.add_argument("--throttle", type=float, default=1.0, help="CDP CPU throttling rate")
    parser.add_argument(
        "--pages", default="all", help="'overview', 'all' or comma-separated view stems"
    )
    parser.add_argument("--no-long", action="store_true", help="skip the 512-piece updates")
    parser.add_argument(
        "--presses", type=int, default=5, help="head-slider key presses timed per round"
    )
    parser.add_argument("--profile", type=Path, help="write a CPU profile of an Overview load")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    pages = app_pages()
    if args.pages == "overview":
        pages = [p for p in pages if p.default]
    elif args.pages != "all":
        wanted = set(args.pages.split(","))
        pages = [p for p in pages if Path(p.path).stem in wanted]
    texts = sentences(2 * args.rounds + 2, 32)
    long_text = sentences(1, 512, seed=3)[0]

    ours: dict[str, dict[str, list[float]]] = {
        Path(p.path).stem: {"load": [], "update": [], "long": [], "scrub_ms": [], "scrub": []}
        for p in pages
    }
    reference: dict[str, list[float]] = {"load": [], "update": [], "long": []}
    with (
        chromium() as browser,
        served_app("app.py") as app,
        served_app("bench/reference_app.py") as ref,
    ):
        if args.profile:
            profile_load(browser, app.url, args.profile, args.throttle)
        for round_index in range(args.rounds):
            for page_index, app_page in enumerate(pages):
                stem = Path(app_page.path).stem
                # Alternate who goes first; the reference is measured next to every page.
                order = ["ours", "ref"] if (round_index + page_index) % 2 == 0 else ["ref", "ours"]
                for who in order:
                    button_page = who == "ours" and stem in BUTTON_PAGES
                    tab = Tab(
                        browser, args.throttle, BUTTON_SELECTOR if button_page else FIGURE_SELECTOR
                    )
                    # a page drawn in tabs opens on the tab that reads the sentence, so that
                    # its update redraws what a new sentence changes
                    url = f"{app.url}/{app_page.url_path}" if who == "ours" else ref.url
                    if who == "ours" and app_page.path in SENTENCE_TAB:
                        url += "?" + urlencode(SENTENCE_TAB[app_page.path])
                    data = ours[stem] if who == "ours" else reference
                    data["load"].append(tab.load(url))
                    tab.update(texts[0])  # warm-up: the first update of a tab compiles code
                    data["update"].append(tab.update(texts[1 + 2 * round_index]))
                    for _ in range(args.presses if who == "ours" else 0):
                        scrub = tab.scrub()
                        if not scrub:  # no head slider, or the open tab does not draw a head
                            break
                        data["scrub_ms"].append(scrub[0])
                        data["scrub"].append(scrub[1])
                    if not args.no_long and round_index == 0:
                        data["long"].append(tab.update(long_text))
                    tab.close()
                print(
                    f"round {round_index + 1}/{args.rounds} {stem:16s} load "
                    f"{ours[stem]['load'][-1]:7.0f} ms (ref {reference['load'][-1]:6.0f}), update "
                    f"{ours[stem]['update'][-1]:6.0f} ms (ref {reference['update'][-1]:5.0f})",
                    flush=True,
                )

    ref_load, ref_update = median(reference["load"]), median(reference["update"])
    ref_long = median(reference["long"])
    title = f"browser main-thread work (TaskDuration), CPU throttle {args.throttle:g}x"
    print(f"\n{title}\n{'page':18s}{'load ms':>9s}{'ratio':>7s}{'update ms':>11s}{'ratio':>7s}"
          f"{'512 upd ms':>11s}{'ratio':>7s}{'scrub ms':>10s}")  # fmt: skip
    rows = {}
    for stem, data in ours.items():
        row = {
            "load_ms": median(data["load"]),
            "update_ms": median(data["update"]),
            "long_update_ms": median(data["long"]),
            "scrub_latency_ms": median(data["scrub_ms"]),
            "scrub_work_ms": median(data["scrub"]),
        }
        rows[stem] = row
        print(
            f"{stem:18s}{row['load_ms']:9.0f}{row['load_ms'] / ref_load:6.2f}x"
            f"{row['update_ms']:11.0f}{row['update_ms'] / ref_update:6.2f}x"
            f"{row['long_update_ms']:11.0f}{row['long_update_ms'] / ref_long:6.2f}x"
            f"{row['scrub_latency_ms']:10.0f}"
        )
    print(f"{'reference':18s}{ref_load:9.0f}{'':7s}{ref_update:11.0f}{'':7s}{ref_long:11.0f}")
    mean_load = statistics.mean(r["load_ms"] for r in rows.values())
    # the pages with sentences of their own have no sidebar update to count
    updated = [r["update_ms"] for r in rows.values() if r["update_ms"] == r["update_ms"]]
    mean_update = statistics.mean(updated) if updated else float("nan")
    print(f"{'mean of pages':18s}{mean_load:9.0f}{mean_load / ref_load:6.2f}x"
          f"{mean_update:11.0f}{mean_update / ref_update:6.2f}x"
          f"  (update: the {len(updated)} pages that read the sidebar's sentence)")  # fmt: skip
    longs = {
        s: r["long_update_ms"]
        for s, r in rows.items()
        if r["long_update_ms"] == r["long_update_ms"]
    }
    if longs:
        heaviest = max(longs, key=longs.get)
        print(f"heaviest at 512 pieces: {heaviest} {longs[heaviest]:.0f} ms = "
              f"{longs[heaviest] / ref_long:.2f}x the reference's 512-piece update")  # fmt: skip
    if args.json:
        payload = {"throttle": args.throttle, "pages": rows, "reference": reference, "ours": ours}
        args.json.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
