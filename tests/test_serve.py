"""serve.py, the server's entry point: its head start fills the caches the first page reads."""

from __future__ import annotations

import ast
import subprocess
import sys

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


def _run_fresh(script: str) -> list[str]:
    """Run a script in a fresh interpreter (nothing imported yet) from the repository; the
    lines it printed."""
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return result.stdout.strip().splitlines()


# Run in a fresh interpreter: what the Overview's first run imports, and whether pandas is in
# full before a page builds its first plotly figure (ui/preload.py's figures_ready).
_FIRST_RUNS = """
import sys
import plotly.graph_objects as go
from streamlit.testing.v1 import AppTest

pandas_at_first_figure = []
build = go.Figure.__init__


def recording(self, *args, **kwargs):
    if not pandas_at_first_figure:
        pandas_at_first_figure.append("pandas" in sys.modules)
    build(self, *args, **kwargs)


go.Figure.__init__ = recording
at = AppTest.from_file("app.py", default_timeout=300)
at.run()
assert not at.exception, [e.value for e in at.exception]
print(sorted({name.split(".")[0] for name in sys.modules}))
at.switch_page("views/heatmaps.py")
at.run()
assert not at.exception, [e.value for e in at.exception]
print(pandas_at_first_figure)
"""


def test_the_overview_imports_only_what_it_draws():
    """A visitor's first page is the Overview: its first run (what the head start imports too)
    loads no pandas, scikit-learn, SciPy or transformers. A page that draws with plotly then
    has pandas in full before its first figure is built."""
    overview_modules, pandas_at_first_figure = _run_fresh(_FIRST_RUNS)[-2:]
    imported = set(ast.literal_eval(overview_modules))
    assert "torch" in imported and "tokenizers" in imported  # the run really happened
    assert imported.isdisjoint({"pandas", "pyarrow", "sklearn", "scipy", "transformers"})
    assert ast.literal_eval(pandas_at_first_figure) == [True]


# Run in a fresh interpreter: one thread's import of pandas is held half done (its module is in
# sys.modules, its body not yet run), as when a visitor's page imports it while the server's
# head start imports the app's modules. Meanwhile another thread does what the head start and a
# plotly page do: import the app's modules, get ready for figures, build one and serialize it.
_HALF_IMPORTED_PANDAS = """
import importlib.abc
import sys
import threading
import traceback

half_done, go_on = threading.Event(), threading.Event()


class HeldLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        half_done.set()  # in sys.modules, with nothing in it yet
        assert go_on.wait(120)
        self.loader.exec_module(module)


class HoldPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "pandas":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("pandas")
        spec.loader = HeldLoader(spec.loader)
        return spec


import importlib.util
import streamlit  # registers Streamlit's plotly template, as the server has before any page

sys.meta_path.insert(0, HoldPandas())
visitor = threading.Thread(target=lambda: __import__("pandas"))
visitor.start()
assert half_done.wait(120)

errors = []


def head_start_then_figure():
    try:
        from ui import display, door, model_map, page_switches, predict, state  # noqa: F401
        from ui import preload
        import plotly.graph_objects as go

        preload.figures_ready()
        go.Figure(go.Heatmap(z=[[0.1, 0.9]])).to_json()
    except Exception:
        errors.append(traceback.format_exc())


worker = threading.Thread(target=head_start_then_figure)
worker.start()


def waits_for_pandas(thread):
    # the worker is blocked on pandas' import lock (importlib's _ModuleLock.acquire)
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "acquire" and "importlib" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


while worker.is_alive() and not waits_for_pandas(worker):
    worker.join(0.01)  # poll: the worker either fails (reads half a pandas) or waits
go_on.set()
worker.join(120)
visitor.join(120)
print(errors)
"""


def test_a_half_imported_pandas_breaks_no_figure_and_no_import():
    """On a cold server, a visitor's page imports pandas while the head start imports the app's
    modules: the modules import, and a figure is built only once pandas is whole."""
    assert ast.literal_eval(_run_fresh(_HALF_IMPORTED_PANDAS)[-1]) == []
