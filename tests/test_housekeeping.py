"""ui.housekeeping: objects alive after a run that imported modules leave the collector's walk."""

from __future__ import annotations

import gc
import sys
import types
import weakref

import pytest

from ui import housekeeping


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()  # leave the test process as it was
    sys.modules.pop("_housekeeping_probe", None)


def test_a_run_that_imported_modules_freezes_what_is_alive(unfrozen, monkeypatch):
    monkeypatch.setattr(housekeeping, "_modules_when_frozen", 0)
    housekeeping.freeze_imported_objects()
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the modules, functions and classes of the test process
    housekeeping.freeze_imported_objects()  # no new module since: nothing to do
    assert gc.get_freeze_count() == frozen

    sys.modules["_housekeeping_probe"] = types.ModuleType("_housekeeping_probe")
    keep = [object() for _ in range(10)] + [[] for _ in range(10)]  # 10 tracked lists
    housekeeping.freeze_imported_objects()  # a new module: freeze again, the lists with it
    assert gc.get_freeze_count() >= frozen + 10
    assert keep


class _Node:
    """An object that can sit in a reference cycle and be watched through a weak reference."""

    def __init__(self) -> None:
        self.me = self


def test_garbage_is_collected_before_it_could_be_frozen(unfrozen, monkeypatch):
    monkeypatch.setattr(housekeeping, "_modules_when_frozen", 0)
    gc.disable()  # no automatic collection may free the cycle before the function does
    try:
        node = _Node()
        watch = weakref.ref(node)
        del node  # unreachable now, but only the collector can free a cycle
        assert watch() is not None
        housekeeping.freeze_imported_objects()
        assert watch() is None  # collected, not frozen for the life of the process
    finally:
        gc.enable()
