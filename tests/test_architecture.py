"""The rooms of the house: pages -> ui -> core, and nothing flows back."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports (anywhere in the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def files(room: str) -> list[Path]:
    return sorted((ROOT / room).glob("*.py"))


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_pages_do_no_tensor_math(path):
    assert not imported_modules(path) & {"torch", "numpy", "sklearn", "transformers"}


# ---- no view runs the model -------------------------------------------------------------------
# What runs a model: its forward pass and its parts, and the lab's training. Every core function
# that calls one of these, directly or through another core function, runs the model too.
MODEL_STEPS = frozenset(
    {
        "run",
        "run_ids",
        "run_with_hooks",  # the one forward path's entries (core/transformer.py)
        "run_with_cache",
        "forward_from_word_vectors",
        "multi_head_attention",
        "logits",  # a decoder's readout: final norm and output head over the vocabulary
        "top_pieces",
        "next_pieces",
        "train",  # the lab's training loop, and its two entry points (core/lab.py)
        "train_one",
        "compare",
        "train_induction",  # the lab's induction experiment: a decoder trained from scratch
    }
)


def _called_names(node: ast.AST) -> set[str]:
    """Every name a function calls: f(...) gives "f", x.f(...) gives "f"."""
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name:
                names.add(name)
    return names


def model_running_functions(sources: dict[str, str] | None = None) -> set[str]:
    """Names of the core functions that run the model (MODEL_STEPS, reached through calls).

    By name, not by module: a name shared with a function that does not run the model counts
    too, which can only make the rule stricter.
    """
    if sources is None:
        sources = {path.name: path.read_text() for path in files("core")}
    calls: dict[str, set[str]] = {}
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                calls.setdefault(node.name, set()).update(_called_names(node))
    running = set(MODEL_STEPS)
    while True:
        more = {name for name, called in calls.items() if called & running} - running
        if not more:
            return running
        running |= more


def _ui_modules(tree: ast.Module) -> set[str]:
    """Names a page binds to ui modules (from ui import state; from ui import x as y)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "ui"
        for alias in node.names
    }


def model_runs_in_page(text: str, running: set[str]) -> list[str]:
    """Calls in a page of a model-running function anywhere but through a ui module."""
    tree = ast.parse(text)
    through_ui = _ui_modules(tree)
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id in through_ui:
                continue  # ui/ runs it, through the door
            name = func.attr
        else:
            name = getattr(func, "id", "")
        if name in running:
            found.append(f"line {call.lineno}: {ast.unparse(call)[:80]}")
    return found


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_pages_run_no_model_themselves(path):
    """A page asks ui/ for every run: ui/door.py caches it and admits it (one door)."""
    assert model_runs_in_page(path.read_text(), model_running_functions()) == []


def test_the_model_run_rule_can_fail():
    running = model_running_functions(
        {
            "a.py": "def padded_run(model):\n    return model.run_with_hooks(1)\n"
            "def deeper(model):\n    return padded_run(model)\n"
            "def weights(model):\n    return model.layers[0]\n"
        }
    )
    assert {"padded_run", "deeper"} <= running and "weights" not in running
    page = (
        "from core import scaling_masking\nfrom ui import state\nfrom ui import scaling_masking_runs as runs\n"
        "a = scaling_masking.padded_run(model)\nb = runs.padded_run(model)\nc = model.run('x')\n"
        "d = state.trace(model)\ne = deeper(model)\nf = scaling_masking.weights(model)\n"
    )
    assert [line.split(":")[0] for line in model_runs_in_page(page, running)] == [
        "line 4",
        "line 6",
        "line 8",
    ]
    # the real core: the runs the pages once made themselves are found
    real = model_running_functions()
    assert {"padded_run", "repeat_example", "sublayer_sizes", "cross_attention"} <= real
    assert {"gradient_scores", "deletion_curves", "permutation_experiment", "role_scores"} <= real


@pytest.mark.parametrize("path", files("core"), ids=lambda p: p.name)
def test_core_knows_no_user_interface(path):
    assert not imported_modules(path) & {"streamlit", "plotly", "ui", "views"}


@pytest.mark.parametrize(
    "path", [p for p in files("ui") if "chart" in p.name], ids=lambda p: p.name
)
def test_chart_modules_are_pure(path):
    assert "streamlit" not in imported_modules(path)


def test_app_shell_imports_no_model_code():
    assert not imported_modules(ROOT / "app.py") & {"torch", "numpy", "transformers"}


def _html_calls(tree: ast.Module) -> list[ast.Call]:
    """Calls of st.html, components.html or anything else named html."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "html"
    ]


def _is_script_file(value: ast.expr | None) -> bool:
    """scripts.script_element("<a literal file name>"): a fixed .js file of the repository
    (ui/scripts.py reads it from ui/js/), no more built at run time than a literal is."""
    return (
        isinstance(value, ast.Call)
        and _called(value) == ("scripts", "script_element")
        and len(value.args) == 1
        and not value.keywords
        and isinstance(value.args[0], ast.Constant)
        and isinstance(value.args[0].value, str)
    )


def _module_string_constants(tree: ast.Module) -> set[str]:
    """Names only ever assigned a plain string literal (no f-string, no concatenation), or a
    script read from a fixed file (_is_script_file).

    Every assignment in the module counts: a name given a literal once and something built at
    run time elsewhere (a function's `global`, a later line) is not a constant.
    """
    literal, other = set(), set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            value = getattr(node, "value", None)
            is_literal = isinstance(node, ast.Assign) and (
                (isinstance(value, ast.Constant) and isinstance(value.value, str))
                or _is_script_file(value)
            )
            (literal if is_literal else other).add(target.id)
    return literal - other


def _is_html_figure(annotation: ast.expr | None) -> bool:
    """An annotation naming html_heatmap.HtmlFigure (the builder's escaped markup)."""
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "HtmlFigure"
    return isinstance(annotation, ast.Name) and annotation.id == "HtmlFigure"


def _html_figure_calls(tree: ast.Module) -> set[int]:
    """ids of the html calls that show a function's one parameter, typed HtmlFigure, as it is."""
    allowed = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or len(function.args.args) != 1:
            continue
        (parameter,) = function.args.args
        if not _is_html_figure(parameter.annotation):
            continue
        for call in _html_calls(function):
            (argument,) = call.args or [None]
            shown_as_is = isinstance(argument, ast.Name) and argument.id == parameter.arg
            if len(call.args) == 1 and not call.keywords and shown_as_is:
                allowed.add(id(call))
    return allowed


def test_no_user_text_is_rendered_as_html():
    """unsafe_allow_html and components.html are XSS doors when user text passes through them.

    st.html may only show a fixed string of the module itself (a style sheet, say): an argument
    built at run time could carry a visitor's text. A fixed script (a constant named *_JS) may
    run with unsafe_allow_javascript=True, the one keyword allowed. The one run-time markup it
    may show is an html_heatmap.HtmlFigure, handed through unchanged (the builder escapes every
    visitor text: tests/test_html_heatmap.py; and only the builder makes one: the test below).
    """
    for path in [*files("views"), *files("ui"), ROOT / "app.py"]:
        source = path.read_text()
        assert "unsafe_allow_html=True" not in source, path.name
        assert "components.html" not in source and "components.v1" not in source, path.name
        tree = ast.parse(source)
        constants = _module_string_constants(tree)
        figures = _html_figure_calls(tree)
        for call in _html_calls(tree):
            if id(call) in figures:
                continue
            fixed = [a for a in call.args if isinstance(a, ast.Name) and a.id in constants]
            assert len(call.args) == 1 and fixed and _allowed_keywords(call, fixed[0].id), (
                f"{path.name}:{call.lineno}: st.html takes only a module-level string literal"
            )


def _allowed_keywords(call: ast.Call, constant: str) -> bool:
    """No keyword, or unsafe_allow_javascript=True for a module-level script named *_JS."""
    if not call.keywords:
        return True
    if len(call.keywords) > 1:
        return False
    (keyword,) = call.keywords
    return (
        constant.endswith("_JS")
        and keyword.arg == "unsafe_allow_javascript"
        and isinstance(keyword.value, ast.Constant)
        and keyword.value.value is True
    )


def _calls_named(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) == name or getattr(node.func, "id", None) == name)
    ]


# ui/html_heatmap.py's builders of an HtmlFigure, each tested in tests/test_html_heatmap.py
# one_head_grid: attention_grid of one head's weights (tests/test_html_heatmap.py)
HTML_BUILDERS = {
    "attention_grid",
    "one_head_grid",
    "model_view",
    "value_grid",
    "value_strip",
    "bar_rows",
}
# The modules that make an HtmlFigure, escaping every text in it: ui/html_heatmap.py
# (tests/test_html_heatmap.py) and the model map's and course progress's ui/model_map_chart.py
# (tests/test_model_map.py), which ui/model_map.py shows as it is.
HTML_FIGURE_MAKERS = {"html_heatmap.py", "model_map_chart.py"}


def _called(node: ast.expr) -> tuple[str, str] | None:
    """(module, function) of a call module.function(...), else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
    ):
        return node.func.value.id, node.func.attr
    return None


def _is_builder_call(node: ast.expr, wrappers: frozenset[tuple[str, str]] = frozenset()) -> bool:
    """html_heatmap.<a builder>(...), or a call of a wrapper that returns one."""
    called = _called(node)
    return called is not None and (
        (called[0] == "html_heatmap" and called[1] in HTML_BUILDERS) or called in wrappers
    )


def _own_returns(function: ast.FunctionDef) -> list[ast.Return]:
    """The function's return statements, not those of functions defined inside it."""
    found, todo = [], list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return found


def _builder_wrappers(paths: list[Path]) -> frozenset[tuple[str, str]]:
    """(module, function) of the functions in ui/ whose every return is a builder call, e.g.
    matrix_charts.pair_grid: choosing a colour range, then html_heatmap.value_grid(...)."""
    wrappers = set()
    for path in paths:
        for function in ast.parse(path.read_text()).body:
            if not isinstance(function, ast.FunctionDef):
                continue
            returns = _own_returns(function)
            if returns and all(_is_builder_call(node.value) for node in returns):
                wrappers.add((path.stem, function.name))
    return frozenset(wrappers)


def test_html_figures_come_only_from_the_tested_builder():
    """show_html_figure is handed html_heatmap's builder call itself (or a ui function's that
    returns one), and no module but HTML_FIGURE_MAKERS makes an HtmlFigure (a NewType is not
    checked at run time)."""
    wrappers = _builder_wrappers(files("ui"))
    assert ("matrix_charts", "pair_grid") in wrappers  # the rule sees the wrappers in use
    for path in [*files("views"), *files("ui"), ROOT / "app.py"]:
        tree = ast.parse(path.read_text())
        for call in _calls_named(tree, "show_html_figure"):
            assert len(call.args) == 1 and _is_builder_call(call.args[0], wrappers), (
                f"{path.name}:{call.lineno}: show_html_figure takes html_heatmap's builder call"
            )
        if path.name not in HTML_FIGURE_MAKERS:
            assert not _calls_named(tree, "HtmlFigure"), path.name
        for call in _calls_named(tree, "_show_stores"):
            assert path.name == "display.py" and _shows_stores_aside(tree, call), (
                f"{path.name}:{call.lineno}: _show_stores takes what stores_aside(...) returned"
            )


def _shows_stores_aside(tree: ast.Module, call: ast.Call) -> bool:
    """_show_stores(name) inside a function whose only assignment to name is stores_aside(...):
    the stores' element as html_heatmap.stores_element made it."""
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Name):
        return False
    name = call.args[0].id
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or call not in ast.walk(function):
            continue
        values = [
            node.value
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ]
        return len(values) == 1 and _calls_named(values[0], "stores_aside") == [values[0]]
    return False


def test_the_html_rule_can_fail():
    figure = ast.parse(
        "def show(figure: html_heatmap.HtmlFigure) -> None:\n    st.html(figure)\n"
        "def show_text(text: str) -> None:\n    st.html(text)\n"
        "def show_more(figure: HtmlFigure) -> None:\n    st.html(figure + text)\n"
    )
    shown, text, more = _html_calls(figure)
    assert _html_figure_calls(figure) == {id(shown)}
    views = ast.parse(
        "show_html_figure(html_heatmap.attention_grid(a, t, 0, 0, True))\n"
        'show_html_figure(HtmlFigure(f"<b>{name}</b>"))\n'
    )
    stores = ast.parse(
        "def a(fig):\n    aside = stores_aside(fig)\n    _show_stores(aside)\n"
        "def b(text):\n    _show_stores(text)\n"
        "def c(fig):\n    aside = stores_aside(fig)\n    aside = aside + x\n    _show_stores(aside)\n"
    )
    kept, raw, changed = _calls_named(stores, "_show_stores")
    assert _shows_stores_aside(stores, kept)
    assert not _shows_stores_aside(stores, raw) and not _shows_stores_aside(stores, changed)
    built, forged = _calls_named(views, "show_html_figure")
    assert _is_builder_call(built.args[0]) and not _is_builder_call(forged.args[0])
    wrapped = ast.parse("show_html_figure(charts.grid(a))\nshow_html_figure(charts.other(a))\n")
    known, unknown = (call.args[0] for call in _calls_named(wrapped, "show_html_figure"))
    wrappers = frozenset({("charts", "grid")})
    assert _is_builder_call(known, wrappers) and not _is_builder_call(unknown, wrappers)
    nested = ast.parse(
        "def grid(m):\n    def title(h):\n        return str(h)\n"
        "    return html_heatmap.value_grid(m)\n"
        "def forged(m):\n    if m:\n        return html_heatmap.value_grid(m)\n    return m\n"
    ).body
    assert [len(_own_returns(f)) for f in nested] == [1, 2]
    assert not _is_builder_call(ast.parse("html_heatmap.stores_element(s)").body[0].value)
    assert _calls_named(views, "HtmlFigure")
    built = ast.parse('import streamlit as st\nname = input()\nst.html(f"<b>{name}</b>")\n')
    fixed = ast.parse('import streamlit as st\nCSS = "<style></style>"\nst.html(CSS)\n')
    assert _html_calls(built)[0].args[0].__class__ is ast.JoinedStr
    assert "CSS" in _module_string_constants(fixed) and not _module_string_constants(built)
    script = ast.parse(
        'import streamlit as st\nX_JS = "<script></script>"\n'
        "st.html(X_JS, unsafe_allow_javascript=True)\n"
        "st.html(CSS, unsafe_allow_javascript=True)\n"
        "st.html(X_JS, unsafe_allow_javascript=flag)\n"
    )
    reassigned = ast.parse('X_JS = "<script></script>"\nX_JS = f"<script>{name}</script>"\n')
    assert "X_JS" not in _module_string_constants(reassigned)
    read = ast.parse(
        'A_JS = scripts.script_element("a.js")\nB_JS = scripts.script_element(name)\n'
        'C_JS = scripts.script_element("c.js") + name\nD_JS = other.script_element("d.js")\n'
    )
    assert _module_string_constants(read) == {"A_JS"}
    first, second, third = _html_calls(script)
    assert _allowed_keywords(first, "X_JS")
    assert not _allowed_keywords(second, "CSS") and not _allowed_keywords(third, "X_JS")


def test_runtime_path_never_imports_transformers():
    """transformers costs seconds to import; the app needs only tokenizers and its own encoder."""
    import subprocess
    import sys

    script = (
        "import sys, core, ui.charts, ui.display, ui.widgets\n"
        "core.load_model('minilm').run('the bank of the river', 'money grows')\n"
        "assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=120)


# Modules named after what several pages share, not after one page (README, "One name per page").
SHARED_FIGURE_AND_RUN_MODULES = {"matrix", "induction", "next_word"}


def _imported_ui_modules(path: Path) -> set[str]:
    """The ui modules a script imports (from ui import x, y; from ui.x import …)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "ui":
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ui."):
            names.add(node.module.split(".")[1])
    return names


def test_figure_and_run_modules_follow_the_pages():
    """Every ui/<name>_charts.py and ui/<name>_runs.py is named after a page whose view imports
    it, or after a concept several pages share; and every page's own core module, where one
    exists, is imported by its view: a newcomer finds a figure's code in two hops."""
    pages = {path.stem for path in files("views")}
    for path in files("ui"):
        stem = path.stem
        for suffix in ("_charts", "_runs"):
            if not stem.endswith(suffix):
                continue
            owner = stem.removesuffix(suffix)
            if owner in SHARED_FIGURE_AND_RUN_MODULES:
                continue
            assert owner in pages, f"ui/{stem}.py is named after no page"
            assert stem in _imported_ui_modules(ROOT / "views" / f"{owner}.py"), (
                f"views/{owner}.py does not use ui/{stem}.py, named after it"
            )
    for page in pages:
        if (ROOT / "core" / f"{page}.py").exists():
            view = (ROOT / "views" / f"{page}.py").read_text()
            assert re.search(rf"from core import [^\n]*\b{page}\b|import core\.{page}\b", view), (
                f"views/{page}.py does not use core/{page}.py"
            )


# ---- one layer loop: the forward path in core/transformer.py -----------------------------------
# What runs a layer of a loaded model when called: the path's entries, and attention itself.
RUNS_LAYERS = frozenset(
    {
        "run",
        "run_ids",
        "run_with_hooks",
        "run_with_cache",
        "forward_from_word_vectors",
        "multi_head_attention",
    }
)


def transformer_private_methods() -> set[str]:
    """The Transformer's own private methods (its per-layer step and the step's parts), read
    from core/transformer.py: no other module may call them."""
    tree = ast.parse((ROOT / "core" / "transformer.py").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Transformer"]
    return {
        node.name
        for node in cls.body
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("_")
        and not node.name.startswith("__")
    }


def _over_layers(iterable: ast.expr) -> bool:
    """range(... n_layers ...) or something's .layers: an iteration over a model's layers."""
    return any(
        (isinstance(node, ast.Attribute) and node.attr in ("n_layers", "layers"))
        or (isinstance(node, ast.Name) and node.id == "n_layers")
        for node in ast.walk(iterable)
    )


def layer_loops(source: str, private: set[str]) -> list[str]:
    """Calls of the Transformer's private methods on anything but self, and loops over a
    model's layers whose body runs a layer (RUNS_LAYERS)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in private
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        loops = []
        if isinstance(node, ast.For):
            loops = [(node.iter, node.body)]
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            loops = [(generator.iter, [node]) for generator in node.generators]
        for iterable, body in loops:
            called = set().union(*(_called_names(statement) for statement in body))
            if _over_layers(iterable) and called & RUNS_LAYERS:
                found.append(
                    f"line {node.lineno}: a loop over the layers runs {called & RUNS_LAYERS}"
                )
    return found


@pytest.mark.parametrize(
    "path",
    [p for p in [*files("core"), *files("ui"), *files("views"), ROOT / "app.py"]
     if p.name != "transformer.py" or p.parent.name != "core"],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)  # fmt: skip
def test_only_the_transformer_loops_over_its_layers(path):
    """The layer loop is written once, in core/transformer.py: every experiment reads and
    replaces values at its hook points (run_with_hooks, run_with_cache) instead of stepping
    through the layers itself."""
    assert layer_loops(path.read_text(), transformer_private_methods()) == []


def test_the_layer_loop_rule_can_fail():
    private = transformer_private_methods()
    assert {"_layer_step", "_forward", "_embed", "_layer_norm", "_head_keep"} <= private
    source = (
        "def a(model, x):\n    for layer in range(model.n_layers):\n"
        "        x = model._layer_step(x, layer)\n"
        "def b(model, names):\n    for layer in range(model.n_layers):\n"
        "        model.run_with_cache(ids, names=names, stop_at_layer=layer + 1)\n"
        "def c(model, w):\n    return [multi_head_attention(x, x, w) for w in model.layers]\n"
        "def d(model):\n    return [hook_name('x', layer) for layer in range(model.n_layers)]\n"
        "def e(model, cache):\n    for layer in range(model.n_layers):\n        cache[layer].norm()\n"
        "class F:\n    def _layer_norm(self, x):\n        return self._layer_norm(x)\n"
    )
    # a, b and c step through the layers; d and e loop over them without running one, and
    # F's private method of the same name is its own
    found = sorted(line.split(":")[0] for line in layer_loops(source, private))
    assert found == ["line 3", "line 5", "line 8"]
