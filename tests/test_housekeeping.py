"""ui.housekeeping: long-lived objects leave the collector's walk; large blocks go back to the OS."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from ui import housekeeping

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()  # leave the test process as it was


def test_the_startup_freeze_happens_once_per_process(unfrozen, monkeypatch):
    monkeypatch.setattr(housekeeping, "_startup_frozen", False)
    housekeeping.freeze_once_at_startup()
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the modules, functions and classes of the test process
    keep = [[] for _ in range(50)]  # 50 new tracked objects
    housekeeping.freeze_once_at_startup()  # every later run of app.py: nothing to do
    # Not "== frozen": a frozen object that dies leaves the count, and another thread of this
    # worker process may drop one at any time (seen: 601,215 -> 601,213 under xdist).
    assert gc.get_freeze_count() <= frozen
    before = gc.get_freeze_count()
    housekeeping.freeze_long_lived_objects()  # an explicit freeze takes the new objects too
    assert gc.get_freeze_count() >= before + len(keep)


class _Node:
    """An object that can sit in a reference cycle and be watched through a weak reference."""

    def __init__(self) -> None:
        self.me = self


def test_garbage_is_collected_before_it_could_be_frozen(unfrozen):
    gc.disable()  # no automatic collection may free the cycle before the function does
    try:
        node = _Node()
        watch = weakref.ref(node)
        del node  # unreachable now, but only the collector can free a cycle
        assert watch() is not None
        housekeeping.freeze_long_lived_objects()
        assert watch() is None  # collected, not frozen for the life of the process
    finally:
        gc.enable()


_PROBE = """
import numpy as np
from ui import housekeeping
if {tuned}:
    assert housekeeping.tune_malloc()
def rss_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
big = np.ones(16 << 20, dtype=np.uint8)
del big  # a freed 16 MB mapping: untuned glibc raises its mmap threshold to 16 MB
before = rss_kb()
block = np.ones(8 << 20, dtype=np.uint8)  # 8 MB, touched
del block
print(rss_kb() - before)
"""


def _kept_kb(tuned: bool) -> int:
    """KB an 8 MB block still holds after it is freed, in a fresh interpreter."""
    code = _PROBE.format(tuned=tuned)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return int(result.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tuned_malloc_gives_a_freed_block_back_to_the_system():
    assert _kept_kb(tuned=False) > 6_000  # plain glibc keeps it in its heap (why we tune)
    assert _kept_kb(tuned=True) < 2_000  # its own mapping, unmapped when freed
