"""How far resident memory rises at its peak while one call runs, measured in a process of its own.

A pytest worker is a poor place to read the kernel's high-water mark: whatever else lives in it
(a lab's training thread that an earlier test left running, the caches of pages rendered before)
counts as the measured call's. CI once read 136 MB for a run that takes 106 MB on its own. Here a
fresh `python -m tests.support.peak_memory <name> [args]` does the warm-up, resets the mark
(/proc/self/clear_refs), runs the call once and prints one JSON line of what it saw.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LONG_TEXT = " ".join(["the river bank flooded and money"] * 120)  # cut to 512 pieces


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


def _peak_growth(compute: Callable[[], object]) -> tuple[object, int]:
    """compute()'s result and how far resident memory rose above where it started, at its peak."""
    from ui import housekeeping

    housekeeping.tune_malloc()  # large blocks are their own mappings, given back when freed
    gc.collect()
    with open("/proc/self/clear_refs", "w") as file:
        file.write("5")  # resets VmHWM to the current resident size
    start = _status_bytes("VmRSS")
    result = compute()
    return result, _status_bytes("VmHWM") - start


def _long_run() -> dict:
    """The bundled model's run over 512 pieces: the door's cost of it and the run's peak."""
    import core
    from ui import traces

    arguments = (core.BUNDLED, LONG_TEXT, None, True, False, True, ())
    traces._cached_trace.__wrapped__(*arguments)  # the model loaded and its pages touched first
    trace, growth = _peak_growth(lambda: traces._cached_trace.__wrapped__(*arguments))
    cost = traces._trace_cost(core.BUNDLED, LONG_TEXT, None)
    return {"growth": growth, "cost": cost, "n_tokens": trace.n_tokens}


def _folder_load(folder: str) -> dict:
    """Reading a checkpoint folder: the peak, and the bytes the loaded model holds."""
    import core
    from ui import door

    core.load_model("minilm")  # as in the app: the reading code imported and run once before
    loaded, growth = _peak_growth(lambda: core.load_folder(Path(folder)))
    return {"growth": growth, "held": door.nbytes(loaded)}


MEASUREMENTS: dict[str, Callable[..., dict]] = {
    "long_run": _long_run,
    "folder_load": _folder_load,
}


def measure_in_own_process(name: str, *arguments: str) -> dict:
    """MEASUREMENTS[name](*arguments) run in a fresh interpreter; its JSON answer."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.peak_memory", name, *arguments],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(MEASUREMENTS[sys.argv[1]](*sys.argv[2:])))
