"""The largest websocket message per rerun at 512 tokens, for every page registered in app.py.

For each page: open it with a 512-word-piece sentence in the URL (first run), then type another
512-piece sentence (a rerun); every ForwardMsg the server sends is parsed with Streamlit's own
protobuf classes and sized. Limit (issue 6): <= 20 MB per message; Streamlit refuses > 200 MB.
bench/bench_payload.py (head view) looks at one page in detail; this covers them all.

    python bench/bench_payload_pages.py [--json payload.json]
Exit status 1 if a page crosses the limit or shows an exception.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.browser, the harness the tests share

from tests.support.browser import (  # noqa: E402
    FIGURE_SELECTOR,
    AppPage,
    RunWatcher,
    app_pages,
    bound_text_keys,
    chromium,
    commit_text,
    page_exceptions,
    served_app,
    sidebar_text,
)

LIMIT_BYTES = 20_000_000
# ~600 words of one word piece each: cut to the model's 512 positions.
LONG_A = " ".join(["the river bank flooded after the storm"] * 90)
LONG_B = " ".join(["children watched the water from the old bridge"] * 80)


BUTTON_SELECTOR = "[data-testid='stMain'] [data-testid='stButton']"


def measure(browser: object, base_url: str, app_page: AppPage) -> dict:
    """Largest and total bytes of the first run and of a rerun at 512 tokens.

    The page's own text boxes that live in the URL get the long text too (they may cut it).
    """
    page = browser.new_page(viewport={"width": 1300, "height": 1400})
    runs = RunWatcher(page)
    try:
        mark = runs.mark()
        query = {key: LONG_A for key in ["text", *bound_text_keys(app_page)]}
        page.goto(f"{base_url}/{app_page.url_path}?" + urllib.parse.urlencode(query))
        runs.wait_settled(mark, start_timeout_ms=120_000, timeout_ms=300_000)
        # a figure, or the button of a page that draws none until pressed (Attention, learned)
        page.wait_for_selector(f"{FIGURE_SELECTOR}, {BUTTON_SELECTOR}", timeout=120_000)
        first = (runs.largest_message(mark), sum(e[3] for e in runs.events[mark:]))
        mark = runs.mark()
        commit_text(sidebar_text(page), LONG_B)
        runs.wait_settled(mark, timeout_ms=300_000)
        rerun = (runs.largest_message(mark), sum(e[3] for e in runs.events[mark:]))
        largest_kind = max(runs.events, key=lambda e: e[3])[1] if runs.events else ""
        return {
            "first_run_largest": first[0],
            "first_run_total": first[1],
            "rerun_largest": rerun[0],
            "rerun_total": rerun[1],
            "largest_kind": largest_kind,
            "exceptions": page_exceptions(page),
        }
    finally:
        page.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    with served_app() as server, chromium() as browser:
        for app_page in app_pages():
            results[app_page.title] = measure(browser, server.url, app_page)
            row = results[app_page.title]
            print(
                f"{app_page.title[:34]:34s} largest message: first run "
                f"{row['first_run_largest'] / 1e6:7.3f} MB, rerun {row['rerun_largest'] / 1e6:7.3f} MB"
                f"  (all messages of the rerun: {row['rerun_total'] / 1e6:.2f} MB)",
                flush=True,
            )
    worst_title = max(
        results, key=lambda t: max(results[t]["first_run_largest"], results[t]["rerun_largest"])
    )
    worst = max(results[worst_title]["first_run_largest"], results[worst_title]["rerun_largest"])
    failing = [t for t, r in results.items() if r["exceptions"]]
    print(f"\nlargest message of any page at 512 tokens: {worst / 1e6:.3f} MB ({worst_title})")
    print(f"limit {LIMIT_BYTES / 1e6:.0f} MB: {'PASS' if worst <= LIMIT_BYTES else 'FAIL'}")
    if failing:
        print(f"pages showing an exception at 512 tokens: {failing}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if worst <= LIMIT_BYTES and not failing else 1


if __name__ == "__main__":
    sys.exit(main())
