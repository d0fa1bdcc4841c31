"""Every model run any page makes, on any tab, goes through ui/door.py's one door."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import textwrap
import threading

import pytest
from conftest import assert_no_exception, each_tab, page_paths, run_page
from test_architecture import _calls, core_index

import core.lab
import core.transformer
from ui import door, traces


def model_steps() -> tuple[str, ...]:
    """The model's methods that compute with its layers, read from core/transformer.py: a public
    method that takes or returns a torch tensor, is a forward entry (torch.inference_mode), or
    calls such a method. Sizes, tokenizing and read-only views of the weights are not steps."""
    source = inspect.getsource(core.transformer.Transformer)
    methods = {
        node.name: node
        for node in ast.parse(textwrap.dedent(source)).body[0].body
        if isinstance(node, ast.FunctionDef)
    }

    def computes(node: ast.FunctionDef) -> bool:
        arguments = [*node.args.args, *node.args.kwonlyargs]
        annotations = [a.annotation for a in arguments if a.annotation] + [node.returns]
        typed = any("torch" in ast.unparse(a) for a in annotations if a is not None)
        forward = any("inference_mode" in ast.unparse(d) for d in node.decorator_list)
        return typed or forward

    steps = {name for name, node in methods.items() if computes(node)}
    while True:
        more = {
            name
            for name, node in methods.items()
            if name not in steps
            and any(
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "self"
                and call.func.attr in steps
                for call in ast.walk(node)
            )
        }
        if not more:
            return tuple(sorted(name for name in steps if not name.startswith("_")))
        steps |= more


def _optimizer_steps(function: ast.FunctionDef, optimizers: set[str]) -> bool:
    """True if the function calls x.step(...) on an x it made from an optimizer class."""
    made = {
        target.id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        and (ast.unparse(node.value.func).split(".")[-1] in optimizers
             or "optim" in ast.unparse(node.value.func))
        for target in node.targets
        if isinstance(target, ast.Name)
    }  # fmt: skip
    return any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
        and call.func.attr == "step" and isinstance(call.func.value, ast.Name)
        and call.func.value.id in made
        for call in ast.walk(function)
    )  # fmt: skip


@functools.cache
def core_runs() -> tuple[tuple[str, str], ...]:
    """(module, name) of every public core function that runs torch work: it trains (steps an
    optimizer, a core class with a step method or torch.optim's), calls a model step
    (model_steps) on anything, or calls such a function. Read from core's syntax, so a new
    run in core/ is guarded without a list to update. Functions that only read sizes or costs
    of the model (pass_bytes, run_bytes) call no step and stay out: the door calls them before
    it opens a run slot."""
    index = core_index()
    optimizers = {
        name
        for name, node in index.classes.items()
        if any(isinstance(f, ast.FunctionDef) and f.name == "step" for f in node.body)
    }
    functions = index.functions()
    steps = set(model_steps())
    bindings = {module: index.bindings(module) for module in index.trees}
    called = {key: _calls(node, bindings[key[0]]) for key, node in functions.items()}
    runs = {key for key, node in functions.items() if _optimizer_steps(node, optimizers)}
    runs |= {key for key in functions if called[key].methods & steps}
    while True:
        more = {key for key in functions if key not in runs and called[key].resolved & runs}
        if not more:
            break
        runs |= more
    return tuple(sorted(key for key in runs if not key[1].startswith("_")))


def test_the_core_runs_are_read_from_core():
    runs = set(core_runs())
    # the trainers, and runs that call the model's steps, are found by reading core/
    assert {("lab", "train"), ("lab", "compare"), ("induction", "train_induction")} <= runs
    assert {("saliency", "integrated_gradients"), ("next_word", "next_log_probs")} <= runs
    # a cost, read before a run slot opens, is no run
    assert not {("saliency", "pass_bytes"), ("saliency", "batch_plan")} & runs


def test_the_model_steps_are_read_from_the_model():
    steps = model_steps()
    assert {"run", "run_with_hooks", "forward_from_word_vectors", "next_pieces"} <= set(steps)
    assert not {"encode", "run_bytes", "trace_bytes", "word_vectors", "n_layers"} & set(steps)


@pytest.fixture
def guarded_runs(monkeypatch):
    """Record every model step, and which ones ran outside a run slot of the door."""
    runs, outside = [], []

    def guard(name, original):
        @functools.wraps(original)
        def guarded(*args, **kwargs):
            runs.append(name)
            if not door.inside_a_run():
                outside.append(name)
            return original(*args, **kwargs)

        return guarded

    for name in model_steps():
        monkeypatch.setattr(
            core.transformer.Transformer,
            name,
            guard(name, getattr(core.transformer.Transformer, name)),
        )
    # every binding of a core run in a loaded core/ui/views module: `from core.x import f`
    # made its own name for f, which a patch of core.x alone would miss
    for module_name, name in core_runs():
        module = importlib.import_module(f"core.{module_name}")
        original = getattr(module, name)
        guarded = guard(name, original)
        for loaded in list(sys.modules.values()):
            if getattr(loaded, "__name__", "").split(".")[0] not in ("core", "ui", "views"):
                continue
            for bound, value in list(vars(loaded).items()):
                if value is original:
                    monkeypatch.setattr(loaded, bound, guarded)
    door.forget_all()  # results cached by earlier tests would hide the runs
    yield runs, outside
    door.forget_all()


@pytest.mark.slow
def test_every_page_and_tab_runs_the_model_only_through_the_door(guarded_runs, monkeypatch):
    """Every page and every tab, on the default sentence, runs without an exception (this is
    also test_app.py's normal-sentence run of every page and tab), and runs the model only
    through the door."""
    from ui import lab_runs

    runs, outside = guarded_runs
    # The lab trains its comparison of many seeds in a background thread: one seed per cell
    # here, and every such thread is waited for before the runs are counted.
    monkeypatch.setattr(lab_runs, "COMPARISON_SEEDS", 1)
    monkeypatch.setattr(lab_runs, "_jobs", {})
    for page in page_paths():
        for at in each_tab(run_page(page), page):
            assert_no_exception(at)
        if page.endswith("lab.py"):  # the lab trains its switches' run on opening, and its
            at.button(key="lab_cmp_start").click().run()  # comparison when asked
            assert_no_exception(at)
    for worker in threading.enumerate():
        if worker.name == "lab-comparison":
            worker.join()
    assert "compare" in runs, "the lab's comparison ran"
    assert outside == [], f"model steps outside the door: {sorted(set(outside))}"
    # the guard saw the pages run the model (a test that saw no run would prove nothing)
    assert {"run", "run_with_hooks", "forward_from_word_vectors", "train"} <= set(runs)


def test_the_guard_catches_a_run_outside_the_door(guarded_runs, model):
    runs, outside = guarded_runs
    model.run("A run a page made itself.")
    with door.run_slot(0, "a run through the door"):
        model.run("A run through the door.")
    assert runs.count("run") == 2 and outside.count("run") == 1
    # a core run found by reading core/ is guarded too (an encoder refuses it, after the guard)
    import core.next_word

    with pytest.raises(ValueError):
        core.next_word.next_log_probs(model, "A run of a core function outside the door.")
    assert "next_log_probs" in outside


def test_a_server_short_of_memory_says_so_on_the_page(monkeypatch):
    """No free memory at all: the page explains instead of raising (or being killed)."""
    monkeypatch.setattr(door, "free_bytes", lambda: 0)
    door.forget_all()
    try:
        at = run_page(page_paths()[0], text="A sentence no one has run yet on this server.")
    finally:
        door.forget_all()
    assert_no_exception(at)
    assert any("short of memory" in warning.value for warning in at.warning)


def test_where_error_details_are_forced_off_a_failing_page_shows_one_line(monkeypatch):
    """Community Cloud forces showErrorDetails=false, which Streamlit shows as a traceback."""
    import streamlit as st

    def broken(*args, **kwargs):
        raise RuntimeError("/root/secret/path/in/a/message")

    get_option = st.get_option
    monkeypatch.setattr(
        st,
        "get_option",
        lambda key: False if key == "client.showErrorDetails" else get_option(key),
    )
    monkeypatch.setattr(traces, "trace_or_stop", broken)
    at = run_page(page_paths()[0])
    assert not at.exception
    assert [error.value for error in at.error] == [
        "This page ran into an error, and the details went to the server's log. Try another "
        "text or another page."
    ]
    monkeypatch.setattr(st, "get_option", get_option)  # the repo's setting ("none"): re-raised
    assert run_page(page_paths()[0]).exception
