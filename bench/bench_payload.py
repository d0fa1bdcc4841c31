"""Largest websocket frame per rerun at a 512-token input, per page (target ≤ 20 MB).

Starts the app, opens each page in Debian's chromium through Playwright and records every
frame the browser receives (page.on("websocket") -> ws.on("framereceived")). One rerun is the
first load of the page; a second is moving the head slider one step with the keyboard.

    python bench/bench_payload.py
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.browser, the harness the tests share

from tests.support.browser import chromium, page_exceptions, running_app, wait_idle  # noqa: E402

SENTENCES = [
    "The river bank was quiet after the storm, and the boats stayed tied to the old wooden pier.",
    "She walked to the bank in town to deposit the money her grandmother had sent for her birthday.",
    "Time flies like an arrow, but fruit flies like a banana, and linguists love that pair.",
    "When the engineers measured the bridge, they found that the cables had stretched in the heat.",
    "A small dog chased the ball across the park while the children laughed on the swings.",
]
LONG_TEXT = " ".join(SENTENCES * 12)  # ~1,100 word pieces: cut to the model's 512
ALL_HEADS = "&".join(f"hv_heads=head+{h}" for h in range(1, 12))
PAGES = {
    "Overview": "/",
    "Attention heatmaps": "/heatmaps",
    "Head view": "/head_view",
    "Head view, 12 heads, stretched": f"/head_view?{ALL_HEADS}&hv_stretch=true",
}
TARGET_MB = 20.0


class FrameLog:
    """Sizes of the websocket frames received since the last mark."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def attach(self, page: object) -> None:
        def on_socket(ws: object) -> None:
            ws.on("framereceived", lambda payload: self.sizes.append(len(payload)))

        page.on("websocket", on_socket)

    def take(self) -> tuple[float, float]:
        """(largest frame, total) in MB since the last call."""
        sizes, self.sizes = self.sizes, []
        return (max(sizes, default=0) / 1e6, sum(sizes) / 1e6)


def settle(page: object, log: FrameLog, quiet_ms: int = 1500, timeout_s: float = 120) -> None:
    """Wait until the rerun is over: no running indicator and no frame for quiet_ms."""
    deadline = time.monotonic() + timeout_s
    seen = -1
    while time.monotonic() < deadline:
        wait_idle(page, 120_000)
        if len(log.sizes) == seen:
            return
        seen = len(log.sizes)
        page.wait_for_timeout(quiet_ms)
    raise TimeoutError("the page kept receiving frames")


def with_text(path: str) -> str:
    joiner = "&" if "?" in path else "?"
    return f"{path}{joiner}text={urllib.parse.quote_plus(LONG_TEXT)}"


def main() -> None:
    rows = []
    with running_app() as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1300, "height": 1400})
        log = FrameLog()
        log.attach(page)
        # Warm up on the root page: the first request also loads the model and imports torch.
        page.goto(url)
        page.wait_for_selector(".js-plotly-plot", timeout=120_000)
        wait_idle(page, 120_000)
        for name, path in PAGES.items():
            log.take()
            start = time.perf_counter()
            page.goto(url + with_text(path))
            page.wait_for_selector(".js-plotly-plot", timeout=120_000)
            settle(page, log)
            load_s = time.perf_counter() - start
            load_max, load_total = log.take()
            head_slider = page.locator('[data-testid="stSlider"] input[type="range"]').nth(1)
            head_slider.focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(300)
            settle(page, log)
            move_max, move_total = log.take()
            errors = page_exceptions(page)
            rows.append((name, load_max, load_total, load_s, move_max, move_total, errors))

    print(f"Largest websocket frame per rerun at 512 tokens (target ≤ {TARGET_MB:.0f} MB)")
    print(f"{'page':34} {'load: max / total MB':>22} {'load s':>7} {'head+1: max / total MB':>24}")
    print("(load s includes 1.5 s of waiting for quiet)")
    for name, load_max, load_total, load_s, move_max, move_total, errors in rows:
        flag = "" if max(load_max, move_max) <= TARGET_MB else "  OVER TARGET"
        print(
            f"{name:34} {load_max:10.2f} / {load_total:7.2f} {load_s:7.1f} "
            f"{move_max:12.2f} / {move_total:7.2f}{flag}"
            + (f"  EXCEPTIONS: {errors}" if errors else "")
        )


if __name__ == "__main__":
    main()
