"""The one door: every cached result and every model run of the app, behind one memory budget.

One Streamlit process serves every visitor (Community Cloud guarantees it 690 MB). Two rules keep
any mix of visitors and pages inside that:

1. **One cache, counted in bytes.** Every result a page asks for (loaded models, Traces, derived
   statistics, projections, gradients, lab runs) lives in one least-recently-used cache whose
   size is the bytes of the arrays it holds (`cachetools.LRUCache` with a size function). When a
   new entry would pass the budget, the entries used longest ago go first, whichever page made
   them. The budget is `ATTENTION_EXPLORER_MEMORY_MB` (DEPLOY.md). A result is computed once
   even when several visitors ask for it at the same moment: the others wait for it.
2. **One admission limit.** A result that is not in the cache is computed inside a run slot: at
   most RUN_SLOTS at once, whatever the number of visitors (with one torch thread each, more
   would add no speed on two cores, only memory). A run states what it will hold in memory while
   it works; if the server does not have that much free even after the cache gave back what it
   could, the visitor gets a message (ServerShort), not a server the kernel kills mid-page.

Cached values are shared by every session, so their numpy arrays are made read-only here.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import hashlib
import inspect
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import cachetools
import numpy as np
import torch

import core
from ui import housekeeping

MB = 1_000_000
DEFAULT_MEMORY_MB = 200  # the cache's budget when the server's settings name none (README)
MEMORY_SETTING = "ATTENTION_EXPLORER_MEMORY_MB"
RUN_SLOTS = 2  # model runs computing at once, for all visitors together
QUEUE_WAIT_S = 120.0  # a run that cannot get a slot within this long is told the server is busy
# Memory the process needs beyond what a run states: figures being built and sent, Streamlit's
# own buffers, and the library files it keeps mapped (resident_bytes counts anonymous memory
# only). A run is admitted only if this much stays free after it.
RESERVE_BYTES = 80 * MB

P = ParamSpec("P")
R = TypeVar("R")


SHORT_OF_MEMORY = (
    "The server is short of memory right now. Try a shorter text, or again in a minute."
)


class ServerShort(RuntimeError):
    """The server cannot take this run now: too little memory left, or too long a queue."""


# ---- sizes ------------------------------------------------------------------------------------
def nbytes(value: object) -> int:
    """Bytes of the arrays and tensors in a value, counting each buffer once.

    Walks tuples, lists, dicts, dataclasses and plain objects' attributes. Everything else
    (numbers, short strings, a tokenizer's Rust object) counts as a small constant: the budget is
    about arrays, which are 99 % of what the cache holds.
    """
    seen: set[int] = set()

    def size(item: object) -> int:
        if id(item) in seen:
            return 0
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            base = item if item.base is None else item.base  # a view counts its whole buffer
            if isinstance(base, np.ndarray) and base is not item:
                return size(base)
            return item.nbytes
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            if storage.data_ptr() in seen:
                return 0
            seen.add(storage.data_ptr())
            return storage.nbytes()
        if isinstance(item, torch.nn.Module):
            return sum(size(t) for t in (*item.parameters(), *item.buffers()))
        if isinstance(item, str | bytes):
            return len(item)
        if isinstance(item, dict):
            return sum(size(k) + size(v) for k, v in item.items())
        if isinstance(item, tuple | list | set | frozenset):
            return sum(size(part) for part in item)
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return sum(size(getattr(item, f.name)) for f in dataclasses.fields(item))
        if hasattr(item, "__dict__") and not isinstance(item, type):
            return sum(size(v) for v in vars(item).values())
        return 16

    return size(value)


def _read_only(value: object, tensors: bool = False) -> None:
    """Make every numpy array inside a cached value read-only: it is shared by every session.

    Walks what nbytes walks (tuples, lists, sets, dict keys and values, dataclasses, plain
    objects' attributes). A torch tensor has no read-only flag, so a shared one could be changed
    in place by any session: a cached result holding one is refused (TypeError; hand numpy
    arrays to the cache). A torch module (a reference model) and tensors=True (a loaded model
    kept apart) pass: models whose weights every run only reads.
    """
    seen: set[int] = set()

    def walk(item: object) -> None:
        if id(item) in seen:
            return
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            if item.flags.owndata or item.base is not None:
                with contextlib.suppress(ValueError):
                    item.setflags(write=False)
        elif isinstance(item, torch.nn.Module):
            return
        elif isinstance(item, torch.Tensor):
            if not tensors:
                raise TypeError(
                    f"a cached result holds a torch {type(item).__name__}, which cannot be made "
                    "read-only for the sessions sharing it: return numpy arrays"
                )
        elif isinstance(item, str | bytes | type):
            return
        elif isinstance(item, dict):
            for key, part in item.items():
                walk(key)
                walk(part)
        elif isinstance(item, tuple | list | set | frozenset):
            for part in item:
                walk(part)
        elif dataclasses.is_dataclass(item):
            for f in dataclasses.fields(item):
                walk(getattr(item, f.name))
        elif hasattr(item, "__dict__"):
            for part in vars(item).values():
                walk(part)

    walk(value)


def pieces(model: core.Transformer, text: str, pair: str | None = None) -> int:
    """Word pieces a run of text (and pair) would hold, 0 for text with none: what a cost
    function needs before the run (tokenizing takes well under a millisecond)."""
    try:
        return len(model.encode(text, pair).input_ids)
    except core.EmptyInput:
        return 0


def run_bytes(model: core.Transformer, *texts: str) -> int:
    """Peak bytes of one forward pass over each text, added up."""
    return sum(model.run_bytes(pieces(model, text)) for text in texts)


# ---- memory the process may still use ---------------------------------------------------------
def _read_int(path: str) -> int | None:
    try:
        with open(path) as file:
            text = file.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def cgroup_limit(cgroups: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """This process's memory limit from its cgroup (v1 or v2), or None where none is set."""
    try:
        with open(cgroups) as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):  # cgroup v1: an unset limit is ~2^63
            limit = _read_int(f"{root}/memory{path}/memory.limit_in_bytes")
        elif controllers == "":  # cgroup v2: memory.max holds "max" or bytes
            limit = _read_int(f"{root}{path}/memory.max")
        else:
            continue
        if limit is not None and limit < 1 << 50:
            return limit
    return None


def resident_bytes() -> int:
    """This process's anonymous resident memory (RssAnon): what the kernel cannot give back.

    Not the whole RSS: ~150 MB of it are mapped library files (torch's), page cache that a
    memory cgroup reclaims before it kills; RESERVE_BYTES leaves room for them to stay mapped.
    """
    try:
        with open("/proc/self/status") as file:
            for line in file:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    import resource  # not Linux: the peak, which is more than the current

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _available_on_machine() -> int | None:
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def free_bytes() -> int | None:
    """What this process may still allocate: its cgroup's limit less its anonymous resident
    memory, or the machine's available memory, whichever is smaller; None where neither can
    be read."""
    room = []
    limit = cgroup_limit()
    if limit is not None:
        room.append(limit - resident_bytes())
    available = _available_on_machine()
    if available is not None:
        room.append(available)
    return min(room) if room else None


# ---- the cache --------------------------------------------------------------------------------
def budget_bytes(settings: dict[str, str] | os._Environ = os.environ) -> int:
    """The cache's budget: ATTENTION_EXPLORER_MEMORY_MB, or DEFAULT_MEMORY_MB if unset or bad."""
    text = str(settings.get(MEMORY_SETTING, "")).strip()
    megabytes = int(text) if text.isdigit() and 0 < int(text) <= 1_000_000 else DEFAULT_MEMORY_MB
    return megabytes * MB


_lock = threading.RLock()
_log = logging.getLogger(__name__)
_budget = budget_bytes()
# Loaded models are kept apart from the LRU: every session's page holds its model, so dropping
# one from the cache would free nothing and load a second copy on the next click. They count
# against the budget all the same: the LRU gets what they leave (_resize).
MAX_KEPT = 2  # models loaded at once; a third replaces the one used least recently
_kept: collections.OrderedDict[tuple, tuple[object, int]] = collections.OrderedDict()
_results: cachetools.LRUCache = cachetools.LRUCache(maxsize=_budget, getsizeof=nbytes)
_computing: dict[tuple, threading.Lock] = {}  # one lock per key being computed
# Results dropped from the LRU that something still holds (the page drawing a 512-piece Trace
# holds it while a tab asks for a statistic of it): dropping them freed nothing, and running the
# model again would hold a second copy. A lookup finds them here for as long as they live.
_alive: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_new_gate = threading.Lock  # what makes those locks (a test counts who waits at one)


def _resize() -> None:
    """Give the LRU the budget less the kept entries' bytes, keeping what still fits."""
    global _results
    kept_bytes = sum(size for _, size in _kept.values())
    maxsize = max(0, _budget - kept_bytes)
    if maxsize == _results.maxsize:
        return
    old, _results = _results, cachetools.LRUCache(maxsize=maxsize, getsizeof=nbytes)
    for key, value in old.items():  # oldest first; the LRU drops what no longer fits
        with contextlib.suppress(ValueError):
            _results[key] = value


def set_budget(n_bytes: int) -> None:
    """Use another budget (ui.models.policy() applies the server's setting once its secrets
    are read); what is cached stays as far as it fits."""
    global _budget
    with _lock:
        _budget = n_bytes
        _resize()


def cached_bytes() -> int:
    """Bytes the cache holds now, kept entries included."""
    with _lock:
        return int(_results.currsize) + sum(size for _, size in _kept.values())


def cache_budget() -> int:
    """The budget in bytes, for everything cached together."""
    return _budget


def forget_all() -> None:
    """Empty the cache (tests; a deployer's restart does the same)."""
    with _lock:
        _results.clear()
        _kept.clear()
        _alive.clear()
        _resize()


def _lookup(key: tuple) -> tuple[bool, object]:
    """(True, value) for a cached key (now the most recently used), else (False, None)."""
    with _lock:
        if key in _kept:
            _kept.move_to_end(key)
            return True, _kept[key][0]
        if key in _results:
            return True, _results[key]
        value = _alive.get(key)
        if value is not None:
            with contextlib.suppress(ValueError):  # back in the LRU: it is in use again
                _results[key] = value
            return True, value
    return False, None


def _store(key: tuple, value: object, keep: bool) -> None:
    with _lock:
        if keep:
            _kept[key] = (value, nbytes(value))
            while len(_kept) > MAX_KEPT:
                _kept.popitem(last=False)
            _resize()
            return
        with contextlib.suppress(ValueError):  # larger than the budget: not kept
            _results[key] = value
        with contextlib.suppress(TypeError):  # a tuple or a float cannot be referred to weakly
            _alive[key] = value


def trace_key(trace: core.Trace) -> tuple:
    """What determines a Trace: model, word pieces, sentence ids and the run's switches."""
    options = trace.options
    return (
        trace.model_name,
        trace.input_ids.tobytes(),
        trace.segments.tobytes(),
        options.scale,
        options.causal,
        options.positions,
        tuple(sorted(options.ablate)),
    )


# Arguments that are their own key: immutable values whose hash and equality are by content.
_PLAIN_KEYS = (type(None), bool, int, float, complex, str, bytes, np.generic, enum.Enum)


def _key_part(value: object) -> object:
    """A hashable stand-in for an argument: a Trace by what determines it, a model by its name,
    arrays by their bytes' digest, lists as tuples, frozen dataclasses field by field.

    Any other type raises TypeError: hashed by identity, two equal arguments would run twice
    and one changed in place would return a stale result.
    """
    if isinstance(value, core.Trace):
        return ("trace", *trace_key(value))
    if isinstance(value, core.Transformer):
        return ("model", value.name)
    if isinstance(value, np.ndarray):
        digest = hashlib.blake2b(np.ascontiguousarray(value).tobytes(), digest_size=16).digest()
        return ("array", value.shape, value.dtype.str, digest)
    if isinstance(value, _PLAIN_KEYS):
        return value
    if isinstance(value, list | tuple):
        return tuple(_key_part(part) for part in value)
    if isinstance(value, dict):
        return tuple(sorted((key, _key_part(part)) for key, part in value.items()))
    if isinstance(value, set | frozenset):
        return frozenset(_key_part(part) for part in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"a cached run's argument {type(value).__name__} is not frozen")
        fields = (_key_part(getattr(value, f.name)) for f in dataclasses.fields(value))
        return (type(value).__qualname__, *fields)
    raise TypeError(
        f"a cached run cannot key an argument of type {type(value).__name__}: pass plain "
        "values, arrays, a Trace or the model (or teach ui/door.py's _key_part the type)"
    )


def _evict_until(free_needed: int) -> bool:
    """Drop least-recently-used entries until free_bytes() ≥ free_needed; True if it is."""
    with _lock:
        trimmed = False
        while True:
            free = free_bytes()
            if free is None or free >= free_needed:
                return True
            if not trimmed:  # holes in malloc's heap first: cheaper than dropping results
                trimmed = True
                housekeeping.give_back_freed_memory()
                continue
            if not _results:
                return False
            _results.popitem()  # large arrays are their own mappings: freed at once


# ---- admission --------------------------------------------------------------------------------
_slots = threading.BoundedSemaphore(RUN_SLOTS)
_in_flight_bytes = 0  # what admitted runs said they would hold
_here = threading.local()  # .depth: runs this thread is inside (a run may ask for another)


def inside_a_run() -> bool:
    """True while this thread computes inside a run slot (tests check every model run is)."""
    return getattr(_here, "depth", 0) > 0


@contextlib.contextmanager
def run_slot(cost_bytes: int, what: str) -> Iterator[None]:
    """Hold one of the RUN_SLOTS while a run of ~cost_bytes works; ServerShort if it cannot be.

    A run that asks for another result inside its slot (a projection needing Traces) computes
    that one in the same slot: a visitor holds at most one slot, so two can never wait on each
    other.
    """
    if inside_a_run():
        _admit_bytes(cost_bytes, what)
        _here.depth += 1
        try:
            yield
        finally:
            _here.depth -= 1
            _release_bytes(cost_bytes)
        return
    if not _slots.acquire(timeout=QUEUE_WAIT_S):
        raise ServerShort(
            "The server is busy with other visitors' runs. Try again in a minute, or with a "
            "shorter text."
        )
    try:
        _admit_bytes(cost_bytes, what)
        _here.depth = 1
        try:
            yield
        finally:
            _here.depth = 0
            _release_bytes(cost_bytes)
    finally:
        _slots.release()


def _admit_bytes(cost_bytes: int, what: str) -> None:
    """Count a run's bytes as in flight, or ServerShort if the memory is not there."""
    global _in_flight_bytes
    with _lock:
        if not _evict_until(cost_bytes + _in_flight_bytes + RESERVE_BYTES):
            # the deployer's log says why a visitor was refused (the page says it in one line)
            _log.warning(
                "refused %s: %d MB asked, %d MB in flight, %d MB kept free, %s MB free, "
                "%d MB cached",
                what,
                cost_bytes // MB,
                _in_flight_bytes // MB,
                RESERVE_BYTES // MB,
                "?" if (free := free_bytes()) is None else free // MB,
                cached_bytes() // MB,
            )
            size = f" (about {cost_bytes // MB} MB)" if cost_bytes >= MB else ""
            raise ServerShort(
                f"The server is short of memory right now and cannot start {what}{size}. "
                "Try a shorter text, or again in a minute."
            )
        _in_flight_bytes += cost_bytes


def _release_bytes(cost_bytes: int) -> None:
    global _in_flight_bytes
    with _lock:
        _in_flight_bytes -= cost_bytes


def shared(
    what: str,
    *,
    cost: Callable[..., int],
    spinner: str | None = None,
    keep: bool = False,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: the result is cached in the one cache and computed through the one door.

    The key is the function and its arguments; arguments whose names start with "_" are left
    out of it, as in Streamlit's own caches; a Trace stands in the key by what determines it
    (trace_key) and a model by its name. cost(**arguments) states the bytes the computation
    holds at its peak (its result included), before it starts: it is required, so no run can
    enter the door as 0 bytes by omission (tests/test_door.py measures a few against their real
    peak). A cost function may raise (a model too large for this server) to refuse the run
    before anything is read.
    keep: the result is kept apart from the LRU (a loaded model: see MAX_KEPT).
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
            key = (function.__module__, function.__qualname__) + tuple(
                (name, _key_part(value))
                for name, value in arguments.items()
                if not name.startswith("_")
            )
            found, value = _lookup(key)
            if found:
                return value
            cost_bytes = int(cost(**arguments))
            # The slot comes before the key's gate: whoever computes a key always holds a slot,
            # so a run waiting for another visitor's result can never block the run making it.
            with run_slot(cost_bytes, what):
                return _get_or_compute(key, lambda: _call(function, arguments, spinner), keep)

        wrapper.cost = cost  # type: ignore[attr-defined]  # tests bind it to the arguments
        return wrapper

    return decorate


def _call(function: Callable[..., R], arguments: dict[str, Any], spinner: str | None) -> R:
    if spinner is None:
        return function(**arguments)
    import streamlit as st  # only a page's thread shows a spinner

    with st.spinner(spinner):
        return function(**arguments)


def _get_or_compute(key: tuple, compute: Callable[[], R], keep: bool = False) -> R:
    with _lock:
        found, value = _lookup(key)
        if found:
            return value
        gate = _computing.get(key) or _computing.setdefault(key, _new_gate())
    with gate:  # a second visitor asking for the same result waits for the first
        found, value = _lookup(key)
        if found:
            return value
        try:
            value = compute()
            _read_only(value, tensors=keep)
            _store(key, value, keep)
        finally:
            with _lock:
                _computing.pop(key, None)
    return value
