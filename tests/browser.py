"""Shared helpers for real-browser checks: start the app, drive Debian's chromium with Playwright.

Playwright's own browser download is never used (it cannot be fetched here): the Python package
drives /usr/bin/chromium, installed from Debian by .ci/run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
    script: str = "app.py", cwd: Path = ROOT, extra_env: dict | None = None
) -> Iterator[str]:
    """Start `streamlit run script` on a free port; yield its URL; stop it afterwards."""
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "0"),
        **(extra_env or {}),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            script,
            "--server.port",
            str(port),
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


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
    """Wait until the script has finished running and at least one plot is on the page."""
    page.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=timeout_ms)
    wait_idle(page, timeout_ms)


def wait_idle(page: object, timeout_ms: int = 60_000) -> None:
    """Wait for Streamlit's "running" indicator to come and go."""
    page.wait_for_timeout(300)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms
    )


def page_exceptions(page: object) -> list[str]:
    """Texts of Streamlit exception boxes on the page (empty when all is well)."""
    return page.locator('[data-testid="stException"]').all_inner_texts()
