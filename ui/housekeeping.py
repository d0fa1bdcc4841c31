"""Keep Streamlit's garbage collection after every rerun cheap.

Streamlit calls gc.collect() when a script run ends (config option runner.postScriptGC) so that
cyclic garbage of a rerun does not pile up. A full collection walks every object the collector
tracks, and once torch, plotly and the model are loaded that is ~250,000 objects: ~120 ms per
rerun on this machine, during which the GIL is held and the figures the page has already built
wait to be sent. Almost all of those objects are modules, functions and classes that live as
long as the process, so walking them finds nothing.

gc.freeze() moves every object alive now into a permanent generation the collector skips; the
collection after a rerun then only walks what the rerun itself created (~0 ms instead of ~120 ms,
bench/bench_speed.py). We freeze whenever a run has imported new modules (the first visit to a
page, the first "verify against transformers"), so the set of frozen objects grows a few times
per process and then stops.
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_modules_when_frozen = 0


def freeze_imported_objects() -> None:
    """After a run: if it imported modules, move everything alive now out of the collector's walk.

    Garbage that exists at that moment is collected first, so nothing collectable gets frozen.
    Objects frozen here are still freed by reference counting; only a cycle among them would
    outlive its use, which is why freezing waits for new modules instead of happening every run.
    """
    global _modules_when_frozen
    if len(sys.modules) <= _modules_when_frozen:
        return
    with _lock:
        if len(sys.modules) <= _modules_when_frozen:
            return
        _modules_when_frozen = len(sys.modules)
        gc.collect()
        gc.freeze()
