"""Every model run any page makes, on any tab, goes through ui/door.py's one door."""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import threading

import pytest
from conftest import assert_no_exception, each_tab, page_paths, run_page

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
    monkeypatch.setattr(core.lab, "train", guard("train", core.lab.train))
    monkeypatch.setattr(core.lab, "compare", guard("compare", core.lab.compare))
    door.forget_all()  # results cached by earlier tests would hide the runs
    yield runs, outside
    door.forget_all()


@pytest.mark.slow
def test_every_page_and_tab_runs_the_model_only_through_the_door(guarded_runs, monkeypatch):
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
