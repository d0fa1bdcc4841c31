"""The download folder (core/downloads.py) with several sessions at once: a checkpoint that one
session is reading is never deleted to make room for another's download; the least recently
used one that nobody reads goes instead, and a download that only in-use folders block is
refused with a sentence. Threads wait for conditions (events), never for a fixed time."""

from __future__ import annotations

import os
import threading

import pytest
from test_models import SMALL, FakeHub

import core
from core import downloads, models
from core.models import ModelPolicy

WAIT_S = 60  # an upper bound for a thread to reach a point it is known to reach


def _checkpoint_bytes(model) -> int:
    return sum(f.stat().st_size for f in model.model_dir.iterdir() if f.is_file())


@pytest.fixture()
def reading_pauses(monkeypatch):
    """A load of a name in `pause_on` stops once it has its folder, before reading it, until
    `go` is set; `reading` is set when it got there."""
    reading, go = threading.Event(), threading.Event()
    pause_on: set[str] = set()
    real = models._load_dir

    def load_dir(name, model_dir):
        if name in pause_on:
            reading.set()
            assert go.wait(WAIT_S), "the test never let the load go on"
        return real(name, model_dir)

    monkeypatch.setattr(models, "_load_dir", load_dir)
    yield reading, go, pause_on
    go.set()  # a failed test's paused load goes on and ends


def test_a_folder_being_read_is_not_deleted_for_another_download(model, tmp_path, reading_pauses):
    reading, go, pause_on = reading_pauses
    checkpoint = _checkpoint_bytes(model)
    policy = ModelPolicy(
        hub_ids=frozenset({"a/one", "b/two", "c/three"}),
        max_folder_bytes=int(2.5 * checkpoint),  # room for two checkpoints, not three
        download_dir=tmp_path,
    )
    hub = FakeHub(model.model_dir, {**SMALL, "model.safetensors": checkpoint})
    core.load_model("a/one", policy, hub)
    core.load_model("b/two", policy, hub)
    os.utime(tmp_path / "models--a--one", (1, 1))  # a/one: used least recently
    os.utime(tmp_path / "models--b--two", (2, 2))

    # session 1 loads a/one again (from the folder) and is paused while reading it
    pause_on.add("a/one")
    results: dict[str, object] = {}
    first = threading.Thread(
        target=lambda: results.setdefault("a", core.load_model("a/one", policy, hub))
    )
    first.start()
    assert reading.wait(WAIT_S)
    assert downloads.in_use(tmp_path / "models--a--one")
    os.utime(tmp_path / "models--a--one", (1, 1))  # still the oldest: only its use protects it
    # session 2 downloads c/three: a/one is older but in use, so b/two makes the room
    third = core.load_model("c/three", policy, hub)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models--a--one", "models--c--three"]
    go.set()
    first.join(WAIT_S)
    assert not first.is_alive()
    loaded = results["a"]
    assert (loaded.run("bank").hidden_states == third.run("bank").hidden_states).all()
    assert hub.downloads == ["a/one", "b/two", "c/three"]  # a/one was read, not fetched again
    assert not downloads.in_use(tmp_path / "models--a--one")  # released once read


def test_a_download_blocked_only_by_folders_in_use_is_refused(model, tmp_path, reading_pauses):
    reading, go, pause_on = reading_pauses
    checkpoint = _checkpoint_bytes(model)
    policy = ModelPolicy(
        hub_ids=frozenset({"a/one", "b/two"}),
        max_folder_bytes=int(1.5 * checkpoint),  # room for one checkpoint
        download_dir=tmp_path,
    )
    hub = FakeHub(model.model_dir, {**SMALL, "model.safetensors": checkpoint})
    pause_on.add("a/one")
    first = threading.Thread(target=lambda: core.load_model("a/one", policy, hub))
    first.start()
    try:
        assert reading.wait(WAIT_S)  # a/one downloaded and being read
        with pytest.raises(core.ModelUnavailable, match=r"'b/two': .*full of models in use"):
            core.load_model("b/two", policy, hub)
        assert hub.downloads == ["a/one"]
    finally:
        go.set()
        first.join(WAIT_S)
    # once nobody reads a/one, it makes room
    core.load_model("b/two", policy, hub)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models--b--two"]


def test_two_downloads_at_once_reserve_their_bytes(tmp_path):
    """A download under way has written nothing yet: its reservation still counts, so a second
    one cannot take the same room."""
    started, finish = threading.Event(), threading.Event()
    outcome: list[object] = []

    def first_download() -> None:
        with downloads.using(tmp_path, "a/one"):
            downloads.make_room(tmp_path, "a/one", 600, 1_000)
            started.set()
            assert finish.wait(WAIT_S)

    thread = threading.Thread(target=first_download)
    thread.start()
    try:
        assert started.wait(WAIT_S)
        with downloads.using(tmp_path, "b/two"), pytest.raises(core.ModelUnavailable):
            downloads.make_room(tmp_path, "b/two", 600, 1_000)
        with downloads.using(tmp_path, "c/three"):
            outcome.append(downloads.make_room(tmp_path, "c/three", 400, 1_000))
    finally:
        finish.set()
        thread.join(WAIT_S)
    assert outcome == [[]]  # 600 + 400 fit: nothing deleted


def test_make_room_outside_using_is_a_programming_error(tmp_path):
    with pytest.raises(RuntimeError, match="inside using"):
        downloads.make_room(tmp_path, "a/one", 10, 100)


def test_the_transformers_check_holds_a_downloaded_models_files(tmp_path):
    policy = ModelPolicy(hub_ids=frozenset({"a/one"}), download_dir=tmp_path)
    with models.files_in_use("a/one", policy):
        assert downloads.in_use(tmp_path / "models--a--one")
    assert not downloads.in_use(tmp_path / "models--a--one")
    with models.files_in_use(core.BUNDLED, policy):
        assert not downloads.in_use(tmp_path / "models--minilm")
