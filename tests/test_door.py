"""ui/door.py: one cache counted in bytes, one admission limit, and a clear refusal when short."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import core
from tests.support.peak_memory import measure_in_own_process
from ui import door, embeddings_runs, explanations_runs

WAIT_S = 30  # an upper bound for a thread to reach a point it is known to reach


@pytest.fixture
def fresh_door(monkeypatch):
    """An empty cache of 1,000 bytes, free memory plentiful unless a test says otherwise."""
    monkeypatch.setattr(door, "free_bytes", lambda: 1 << 40)
    door.forget_all()
    door.set_budget(1_000)
    yield door
    door.forget_all()
    door.set_budget(door.budget_bytes())


def counting(calls: list[str]):
    """A shared function over the door that records each real computation."""

    @door.shared("a test", cost=lambda **_: 0)
    def block(name: str, size: int) -> np.ndarray:
        calls.append(name)
        return np.zeros(size, dtype=np.uint8)

    return block


# ---- sizes ------------------------------------------------------------------------------------
def test_nbytes_counts_each_buffer_once():
    array = np.zeros((10, 10), dtype=np.float32)  # 400 bytes
    tensor = torch.zeros(25)  # 100 bytes
    value = {"a": array, "b": (array[2:], array.T), "c": [tensor, tensor[5:], tensor.view(5, 5)]}
    assert door.nbytes(value) == 400 + 100 + len("a") + len("b") + len("c")


def test_nbytes_of_a_trace_is_its_arrays_plus_a_few_strings(model):
    trace = model.run("The bank of the river.", "Money grows.")
    arrays = model.trace_bytes(trace.n_tokens)
    assert arrays <= door.nbytes(trace) <= arrays + 4096
    assert model.run_bytes(trace.n_tokens) > arrays


def test_trace_bytes_is_the_sum_of_the_trace_arrays(model):
    trace = model.run("A sentence of a few words.")
    arrays = [
        trace.static,
        trace.hidden_states,
        trace.queries,
        trace.keys,
        trace.values,
        trace.attentions,
        trace.input_ids,
        trace.segments,
    ]
    assert model.trace_bytes(trace.n_tokens) == sum(a.nbytes for a in arrays)


# ---- the cache --------------------------------------------------------------------------------
def test_entries_past_the_budget_go_least_recently_used_first(fresh_door):
    calls: list[str] = []
    block = counting(calls)
    block("a", 400)
    block("b", 400)
    block("a", 400)  # a hit: "a" is now the most recently used
    block("c", 400)  # 1,200 > 1,000 bytes: "b" goes, not "a"
    assert calls == ["a", "b", "c"]
    block("a", 400)
    block("b", 400)
    assert calls == ["a", "b", "c", "b"]
    assert door.cached_bytes() <= 1_000


def test_a_result_dropped_from_the_lru_but_still_held_is_found_not_recomputed(fresh_door):
    """A page holding a Trace the LRU dropped must not make the door run the model again."""
    calls: list[str] = []
    block = counting(calls)
    held = block("a", 600)  # the page keeps this one
    block("b", 600)  # over the budget: "a" leaves the LRU, but is still alive in `held`
    assert block("a", 600) is held
    assert calls == ["a", "b"]
    del held
    block("c", 600)  # "a" was put back in the LRU, then dropped again; nothing holds it now
    block("a", 600)
    assert calls == ["a", "b", "c", "a"]


def test_a_result_larger_than_the_budget_is_returned_but_not_kept(fresh_door):
    calls: list[str] = []
    block = counting(calls)
    assert block("big", 5_000).nbytes == 5_000
    block("big", 5_000)
    assert calls == ["big", "big"]


def test_cached_arrays_are_read_only(fresh_door):
    calls: list[str] = []
    shared = counting(calls)("a", 10)
    with pytest.raises(ValueError, match="read-only"):
        shared[0] = 1


def test_arrays_in_plain_objects_and_sets_are_read_only_too(fresh_door):
    class Holder:  # a plain object: nbytes counts its attributes, so they are shared too
        def __init__(self) -> None:
            self.rows = np.zeros(3)
            self.parts = {"inner": [np.ones(2)]}
            self.frozen = frozenset({(np.arange(2).tobytes(), 1)})

    @door.shared("a test", cost=lambda **_: 0)
    def held(n: int) -> Holder:
        return Holder()

    holder = held(1)
    for array in (holder.rows, holder.parts["inner"][0]):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1


def test_a_cached_tensor_is_refused(fresh_door):
    """torch has no read-only flag: a tensor shared by every session is refused, not kept."""

    @door.shared("a test", cost=lambda **_: 0)
    def tensor_result(n: int) -> dict:
        return {"rows": torch.zeros(n)}

    with pytest.raises(TypeError, match="torch Tensor"):
        tensor_result(2)

    @door.shared("a test", cost=lambda **_: 0)
    def array_result(n: int) -> dict:
        return {"rows": np.zeros(n)}

    assert array_result(2)["rows"].flags.writeable is False


def test_an_argument_of_an_unknown_type_fails_at_the_first_call(fresh_door):
    class Unknown:  # hashed by identity, two equal ones would miss the cache
        pass

    @door.shared("a test", cost=lambda **_: 0)
    def echo(value: object) -> int:
        return 1

    with pytest.raises(TypeError, match="Unknown"):
        echo(Unknown())
    # plain values, nested tuples and frozen dataclasses are keyed by what they hold
    assert echo((1, "a", None, 2.5)) == echo([1, "a", None, 2.5]) == 1
    assert echo(core.RunOptions()) == 1


def test_arguments_with_an_underscore_are_not_part_of_the_key(fresh_door):
    calls = []

    @door.shared("a test", cost=lambda **_: 0)
    def scaled(value: int, _unused: object) -> int:
        calls.append(value)
        return value * 2

    assert scaled(3, object()) == scaled(3, object()) == 6
    assert calls == [3]


def test_a_trace_stands_in_the_key_by_what_determines_it(fresh_door, model):
    calls = []

    @door.shared("a test", cost=lambda **_: 0)
    def length(trace) -> int:
        calls.append(trace.n_tokens)
        return trace.n_tokens

    first = model.run("The bank of the river.")
    again = model.run("The bank of the river.")  # another object, the same run
    unscaled = model.run("The bank of the river.", scale=False)
    length(first), length(again), length(unscaled)
    assert calls == [first.n_tokens, first.n_tokens]


def test_two_visitors_asking_at_once_compute_once(fresh_door, monkeypatch):
    """The second caller waits at the first caller's gate and then reads the cache."""
    at_gate = threading.Condition()
    arrivals = []

    class CountingLock:
        def __init__(self):
            self.lock = threading.Lock()

        def __enter__(self):
            with at_gate:
                arrivals.append(1)
                at_gate.notify_all()
            self.lock.acquire()

        def __exit__(self, *exc):
            self.lock.release()

    monkeypatch.setattr(door, "_new_gate", CountingLock)
    calls = []

    @door.shared("a test", cost=lambda **_: 0)
    def slow(name: str) -> str:
        with at_gate:  # hold the computation until the second caller is at the gate
            assert at_gate.wait_for(lambda: len(arrivals) == 2, timeout=WAIT_S)
        calls.append(name)
        return name.upper()

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow("x"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert results == ["X", "X"] and calls == ["x"]


def test_kept_entries_count_against_the_budget_but_are_never_evicted(fresh_door):
    calls: list[str] = []
    block = counting(calls)

    @door.shared("loading a model", cost=lambda **_: 0, keep=True)
    def weights(name: str) -> np.ndarray:
        calls.append(name)
        return np.zeros(600, dtype=np.uint8)

    block("a", 300)
    weights("m")  # 600 kept: the LRU has 400 left, and "a" still fits
    assert door.cached_bytes() == 900
    block("b", 300)  # 1,200 > 1,000: "a" goes, the model stays
    weights("m"), block("b", 300), block("a", 300)
    assert calls == ["a", "m", "b", "a"]
    for name in "xyz":  # at most MAX_KEPT models: the one used least recently goes
        weights(name)
    assert len(door._kept) == door.MAX_KEPT and door.cached_bytes() <= 1_000 + 600


# ---- admission --------------------------------------------------------------------------------
def _hold_slots(count: int) -> tuple[threading.Event, list[threading.Thread]]:
    """Threads that each take a run slot and keep it until the returned event is set."""
    release, entered = threading.Event(), threading.Semaphore(0)

    def hold() -> None:
        with door.run_slot(0, "holding"):
            entered.release()
            release.wait(WAIT_S)

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for thread in threads:
        thread.start()
    for _ in threads:
        assert entered.acquire(timeout=WAIT_S)
    return release, threads


def test_at_most_run_slots_runs_at_once(fresh_door, monkeypatch):
    monkeypatch.setattr(door, "QUEUE_WAIT_S", 0)
    release, threads = _hold_slots(door.RUN_SLOTS)
    try:
        with pytest.raises(door.ServerShort, match="busy"), door.run_slot(0, "a third run"):
            pass
    finally:
        release.set()
        for thread in threads:
            thread.join(WAIT_S)
    with door.run_slot(0, "a run after them"):
        assert door.inside_a_run()
    assert not door.inside_a_run()


def test_a_run_inside_a_run_takes_no_second_slot(fresh_door, monkeypatch):
    monkeypatch.setattr(door, "QUEUE_WAIT_S", 0)
    release, threads = _hold_slots(door.RUN_SLOTS - 1)
    try:
        with door.run_slot(0, "outer"), door.run_slot(0, "inner"):
            assert door.inside_a_run()
    finally:
        release.set()
        for thread in threads:
            thread.join(WAIT_S)


def test_short_memory_evicts_least_recent_entries_then_admits(fresh_door, monkeypatch):
    """Free memory grows by what the cache gives back; the run is admitted once there is room
    for it and the reserve, and the entries used most recently stay."""
    calls: list[str] = []
    block = counting(calls)
    for name in "abcd":
        block(name, 200)  # 800 bytes cached
    # 100 bytes free beyond the reserve, and what the cache gives back
    monkeypatch.setattr(door, "free_bytes", lambda: door.RESERVE_BYTES + 900 - door.cached_bytes())
    with door.run_slot(500, "a run"):  # needs 500: "a" and "b" must go
        pass
    block("c", 200), block("d", 200), block("a", 200)
    assert calls == ["a", "b", "c", "d", "a"]


def test_a_run_that_cannot_fit_gets_a_message_not_a_crash(fresh_door, monkeypatch):
    calls: list[str] = []
    counting(calls)("a", 200)
    monkeypatch.setattr(door, "free_bytes", lambda: 10 * door.MB)
    with (
        pytest.raises(door.ServerShort, match=r"short of memory.*this run \(about 300 MB\)"),
        door.run_slot(300 * door.MB, "this run"),
    ):
        pass
    assert door.cached_bytes() == 0  # it gave back all it could first
    monkeypatch.setattr(door, "free_bytes", lambda: 1 << 40)
    release, threads = _hold_slots(door.RUN_SLOTS)  # the refusal left every slot free
    release.set()
    for thread in threads:
        thread.join(WAIT_S)


def test_the_cost_function_sees_the_arguments(fresh_door, monkeypatch):
    monkeypatch.setattr(door, "free_bytes", lambda: door.RESERVE_BYTES + 1_000)

    @door.shared("a test", cost=lambda size, **_: size)
    def block(size: int, tag: str) -> int:
        return size

    assert block(900, "fits") == 900
    with pytest.raises(door.ServerShort, match="cannot start a test"):
        block(2_000, "too big")
    assert door.cached_bytes() == 0  # the refused run emptied the cache first


# ---- settings and the machine -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("setting", "megabytes"),
    [
        ("300", 300),
        ("", door.DEFAULT_MEMORY_MB),
        ("-5", door.DEFAULT_MEMORY_MB),
        ("1e9", door.DEFAULT_MEMORY_MB),
        ("0", door.DEFAULT_MEMORY_MB),
        ("lots", door.DEFAULT_MEMORY_MB),
    ],
)
def test_the_budget_setting_falls_back_to_the_default(setting, megabytes):
    assert door.budget_bytes({door.MEMORY_SETTING: setting}) == megabytes * door.MB


def test_cgroup_limits_are_read_for_v1_and_v2(tmp_path):
    (tmp_path / "memory/app").mkdir(parents=True)
    (tmp_path / "memory/app/memory.limit_in_bytes").write_text("723517440\n")
    (tmp_path / "v2/app").mkdir(parents=True)
    (tmp_path / "v2/app/memory.max").write_text("2899102924\n")
    (tmp_path / "unset/app").mkdir(parents=True)
    (tmp_path / "unset/app/memory.max").write_text("max\n")
    v1 = tmp_path / "v1.cgroup"
    v1.write_text("4:cpu:/\n9:memory:/app\n0::/\n")
    v2 = tmp_path / "v2.cgroup"
    v2.write_text("0::/app\n")
    assert door.cgroup_limit(str(v1), str(tmp_path)) == 723517440
    assert door.cgroup_limit(str(v2), str(tmp_path / "v2")) == 2899102924
    assert door.cgroup_limit(str(v2), str(tmp_path / "unset")) is None
    assert door.cgroup_limit(str(tmp_path / "missing"), str(tmp_path)) is None


# ---- what one request may ask for ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("pieces", "wanted", "steps"), [(512, 32, 8), (128, 64, 32), (64, 64, 64), (20, 32, 32)]
)
def test_gradient_steps_are_cut_to_the_requests_budget(pieces, wanted, steps):

    assert explanations_runs.ig_steps_for(pieces, wanted) == steps
    assert steps * pieces <= max(explanations_runs.GRADIENT_WORK, pieces)


def test_a_projection_reads_sentences_up_to_its_budget(model):

    line = " ".join(["word"] * 300)  # 302 pieces each with [CLS] and [SEP]
    sentences = tuple([line] * 12)
    kept, notes = embeddings_runs.within_projection_budget(model, sentences)
    assert len(kept) == embeddings_runs.PROJECTION_PIECES // 302 == 6
    assert notes == (
        "Lines 7 to 12 are left out: one projection reads at most 2,048 word pieces, and the "
        "lines above already have 1,812.",
    )
    assert embeddings_runs.within_projection_budget(model, sentences[:3]) == (sentences[:3], ())


def test_the_heap_is_trimmed_before_a_cached_result_is_dropped(fresh_door, monkeypatch):
    """Short of memory: malloc's free pages go back first; a cached result is dropped only if
    that was not enough."""
    calls: list[str] = []
    block = counting(calls)
    block("a", 400)
    trims: list[int] = []
    monkeypatch.setattr(door, "free_bytes", lambda: door.RESERVE_BYTES + 100 if trims else 0)
    monkeypatch.setattr(
        door.housekeeping, "give_back_freed_memory", lambda: trims.append(1) or True
    )
    with door.run_slot(100, "a run"):
        pass
    assert trims == [1]
    block("a", 400)  # still cached: the trim made the room
    assert calls == ["a"]


# ---- every run states its cost, and the costs hold ----------------------------------------------
def test_a_shared_function_cannot_be_declared_without_a_cost():
    import inspect

    cost = inspect.signature(door.shared).parameters["cost"]
    assert cost.kind is inspect.Parameter.KEYWORD_ONLY and cost.default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="cost"):
        door.shared("a run")  # type: ignore[call-arg]


def test_the_word_piece_table_costs_what_it_holds_and_fits_the_budget(model):
    """The vocabulary view normalises the table in chunks: its traced peak (numpy buffers and the
    pieces' strings) stays near its float32 result, under its stated cost, and well inside the
    default budget; its rows are v / ‖v‖, computed here in float64."""
    import tracemalloc

    from ui import models, vocabulary

    models.load_model(model.name)  # loaded (and its weights touched) before measuring
    cost = vocabulary._vocabulary_cost(model.name)
    tracemalloc.start()
    try:
        table, real_pieces = vocabulary._vocabulary_view.__wrapped__(model.name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0.8 * cost <= peak <= cost, (peak, cost)
    assert (
        peak < 0.4 * door.DEFAULT_MEMORY_MB * door.MB
    )  # it was ~188 MB, the whole table in float64
    words = np.array(model.word_vectors(), dtype=np.float64)
    expected = words / np.linalg.norm(words, axis=1, keepdims=True)
    assert table.dtype == np.float32 and table.shape == words.shape
    np.testing.assert_allclose(table, expected, rtol=0, atol=1e-6)
    assert real_pieces.shape == (model.dims.vocab_size,) and not real_pieces[0]  # [PAD]


def test_a_long_run_costs_at_least_what_it_holds_at_its_peak():
    """The door's cost of a 512-piece run covers the run's peak, measured in a process of its
    own (tests/support/peak_memory.py says why), and is not wildly above it."""
    measured = measure_in_own_process("long_run")
    assert measured["n_tokens"] == 512
    growth, cost = measured["growth"], measured["cost"]
    assert growth <= cost, (growth, cost)
    assert cost <= 2 * growth  # an honest cost, not a wild one


def test_a_half_precision_checkpoint_is_costed_at_float32_before_it_is_read(model, tmp_path):
    """MiniLM saved in float16 takes half the file and the same memory once read: the cost from
    its header covers the load's measured peak, and the held bytes are the loaded model's."""
    import shutil

    from safetensors.torch import load_file, save_file

    import core
    from core.models import load_size

    folder = tmp_path / "minilm-half"
    shutil.copytree(model.model_dir, folder, ignore=shutil.ignore_patterns("1_Pooling"))
    tensors = load_file(str(folder / "model.safetensors"))
    save_file({k: v.half() if v.is_floating_point() else v for k, v in tensors.items()},
              str(folder / "model.safetensors"))  # fmt: skip
    float_numbers = sum(v.numel() for v in tensors.values() if v.is_floating_point())
    del tensors
    local = core.models.policy_from_settings({"ATTENTION_EXPLORER_LOCAL_FOLDERS": "1"})
    size = load_size(str(folder), local)
    measured = measure_in_own_process("folder_load", str(folder))
    growth = measured["growth"]
    assert 0 <= measured["held"] - size.held_bytes < 64 * 1024  # its tensors, and some names
    assert size.held_bytes <= 4 * float_numbers  # the pooler is in the file, not in the model
    assert growth <= size.peak_bytes, (growth, size.peak_bytes)
    assert size.peak_bytes <= 2 * growth


def test_a_model_past_half_the_budget_is_refused_before_a_tensor_is_read(model, monkeypatch):
    """The door's cost of a load reads config.json and the header only: with a 150 MB budget
    MiniLM (90 MB as float32) is refused, and no tensor was read to decide."""
    import core
    from core import weights
    from ui import models

    models.policy()  # the server's settings read (they set the budget once)
    monkeypatch.setattr(door, "_budget", 150 * door.MB)
    monkeypatch.setattr(
        weights, "_read_tensors", lambda *_: pytest.fail("a tensor was read before the check")
    )
    with pytest.raises(core.models.ModelTooLarge, match=r"90 MB.*at most 75 MB.*half"):
        models._load_cost(core.BUNDLED)
    monkeypatch.setattr(door, "_budget", 200 * door.MB)
    assert models._load_cost(core.BUNDLED) >= door.nbytes(model)


def test_every_shared_function_in_ui_has_a_cost_that_takes_its_arguments():
    """cost(**arguments) is called with every argument of the function: a cost that names one
    the function lacks (or misses one without **_) would fail only when its page first ran."""
    import importlib
    import inspect
    import pkgutil
    from pathlib import Path

    import ui

    found = []
    for module_info in pkgutil.iter_modules(ui.__path__):
        module = importlib.import_module(f"ui.{module_info.name}")
        for name, value in vars(module).items():
            cost = getattr(value, "cost", None)
            if not (callable(value) and callable(cost) and hasattr(value, "__wrapped__")):
                continue
            if value.__module__ != module.__name__:
                continue  # imported from another module: checked there
            parameters = inspect.signature(value.__wrapped__).parameters
            inspect.signature(cost).bind(**dict.fromkeys(parameters))
            found.append(f"{module.__name__}.{name}")
    decorated = sum(
        (path.read_text().count("@door.shared(")) for path in Path(ui.__path__[0]).glob("*.py")
    )
    assert len(found) == decorated, found  # every decorated function was checked
