"""Process-wide memory housekeeping: a cheap garbage collection after every rerun, and a
malloc that gives freed blocks back to the system.

Garbage collection. Streamlit calls gc.collect() when a script run ends (config option
runner.postScriptGC) so that cyclic garbage of a rerun does not pile up. A full collection walks
every object the collector tracks, and once torch, plotly and the model are loaded that is
~250,000 objects: ~120 ms per rerun on this machine, during which the GIL is held and the figures
the page has already built wait to be sent. Almost all of those objects are modules, functions
and classes that live as long as the process, so walking them finds nothing. gc.freeze() moves
every object alive now into a permanent generation the collector skips; the collection after an
Overview rerun then walks ~4,000 objects (~1 ms).

Freezing is done at moments when nothing but long-lived objects is alive: once per process right
after app.py's imports, and once after the transformers reference model is loaded. Not after
every page: with other visitors' scripts running, their frames (and the Traces those hold) would
be frozen too, and a frozen cycle is never collected.

malloc. A 512-token run allocates and frees blocks of 1-75 MB. glibc keeps freed blocks below
its (self-raising) mmap threshold in per-thread arenas, up to 8 per core, so with many visitors
the server's memory only ever grew (bench/load_test.py). A fixed threshold of 1 MB makes every
large block a mapping of its own that goes back to the system when freed, and two arenas stop the
per-thread hoarding.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading

_lock = threading.Lock()
_startup_frozen = False
_malloc_tuned = False

# mallopt() parameters from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 1 << 20
ARENA_MAX = 2


def freeze_long_lived_objects() -> None:
    """Move every object alive now out of the collector's walk.

    The two young generations are collected first (cheap: they hold only recent objects), so
    cycles that were just dropped are freed rather than frozen. A full collection here would cost
    the ~120 ms this saves, and finds next to nothing: 27 unreachable objects after importing the
    whole app. Frozen objects are still freed by reference counting.
    """
    with _lock:
        gc.collect(1)
        gc.freeze()


def freeze_once_at_startup() -> None:
    """app.py, after its imports: the first call in a process freezes, later calls return."""
    global _startup_frozen
    if _startup_frozen:
        return
    with _lock:
        if _startup_frozen:
            return
        _startup_frozen = True
    freeze_long_lived_objects()


def tune_malloc() -> bool:
    """glibc only (Linux): large blocks in their own mappings, two arenas. True if applied."""
    global _malloc_tuned
    if _malloc_tuned or not sys.platform.startswith("linux"):
        return _malloc_tuned
    try:
        libc = ctypes.CDLL("libc.so.6")
        applied = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
        applied = libc.mallopt(_M_ARENA_MAX, ARENA_MAX) == 1 and applied
    except (OSError, AttributeError):  # another C library (musl): leave it as it is
        return False
    _malloc_tuned = applied
    return applied


def give_back_freed_memory() -> bool:
    """glibc only: return the free pages inside malloc's heaps to the system (malloc_trim).

    Blocks under the 1 MB mmap threshold (Python objects, plotly's lists of numbers, small
    arrays) are freed into the heap, where holes between live blocks stay resident. The door
    calls this before it refuses a run for lack of memory: ~50 MB came back after a 512-piece
    page in a test. True if glibc gave something back.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim(0) == 1
    except (OSError, AttributeError):
        return False
