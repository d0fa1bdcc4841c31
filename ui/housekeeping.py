"""Keep Streamlit's garbage collection after every rerun cheap.

Streamlit calls gc.collect() when a script run ends (config option runner.postScriptGC) so that
cyclic garbage of a rerun does not pile up. A full collection walks every object the collector
tracks, and once torch, plotly and the model are loaded that is ~250,000 objects: ~120 ms per
rerun on this machine, during which the GIL is held and the figures the page has already built
wait to be sent. Almost all of those objects are modules, functions and classes that live as
long as the process, so walking them finds nothing.

gc.freeze() moves every object alive now into a permanent generation the collector skips; the
collection after a rerun then only walks what the rerun itself created (~0 ms instead of ~120 ms,
bench/bench_speed.py). app.py freezes after its imports and again after the page, whenever new
modules have arrived since the last time (the first run, the first visit to a page, the first
"verify against transformers"), so the frozen set grows a few times per process and then stops.
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_modules_when_frozen = 0


def freeze_imported_objects() -> None:
    """If modules were imported since the last call, move everything alive now out of gc's walk.

    The two young generations are collected first (cheap: they hold only recent objects), so
    the cycles a run has just dropped are freed rather than frozen. A full collection here would
    cost the ~120 ms this module saves, and finds next to nothing: 27 unreachable objects after
    importing the whole app. Frozen objects are still freed by reference counting; only a cycle
    among them outlives its use, which is why freezing waits for new modules instead of
    happening on every run.
    """
    global _modules_when_frozen
    if len(sys.modules) <= _modules_when_frozen:
        return
    with _lock:
        if len(sys.modules) <= _modules_when_frozen:
            return
        _modules_when_frozen = len(sys.modules)
        gc.collect(1)
        gc.freeze()
