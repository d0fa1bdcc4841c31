"""serve.py, the server's entry point: its head start fills the caches the first page reads."""

from __future__ import annotations

import ast

from conftest import ROOT, assert_no_exception, run_page

import core.transformer
from ui import door, warm_start


def test_serve_serves_app_py_with_a_head_start():
    """Streamlit finds the App by reading serve.py (streamlit run serve.py): it must name app.py
    and a lifespan, or the server would run another script, or start cold."""
    tree = ast.parse((ROOT / "serve.py").read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "App"
    ]
    assert len(calls) == 1
    assert [a.value for a in calls[0].args] == ["app.py"]
    assert [k.arg for k in calls[0].keywords] == ["lifespan"]


def test_after_the_head_start_the_first_page_runs_no_layer(monkeypatch):
    """The Overview, opened first with the default sentence, finds its model and its run in the
    door's cache: not one layer is computed while the visitor waits."""
    door.forget_all()
    warm_start.prepare()
    layers_run = []
    forward = core.transformer.Transformer.run

    def counted(self, *args, **kwargs):
        layers_run.append(self.n_layers)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(core.transformer.Transformer, "run", counted)
    at = run_page("views/overview.py")
    assert_no_exception(at)
    assert layers_run == []
