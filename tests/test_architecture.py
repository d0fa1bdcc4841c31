"""The rooms of the house: pages -> ui -> core, and nothing flows back."""

from __future__ import annotations

import ast
import contextlib
import functools
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


# ---- a view takes from core/ only types, constants and pure functions of arrays ---------------
# Read from the code, not from a list of names: a core function takes the model if a parameter
# is annotated with the model (Transformer) or with a class holding its weights (a class with a
# torch field), if it builds the model, calls one of the model's methods, or calls such a function.
# A view hands no such function anything: it asks ui/<page>_runs.py, which runs it through
# ui/door.py (one cache, one admission limit).
MODEL = "Transformer"


def _names_in(node: ast.AST) -> set[str]:
    """Every name and attribute a piece of syntax mentions (torch.Tensor gives torch, Tensor),
    within quoted annotations too."""
    found = set()
    for part in ast.walk(node):
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            with contextlib.suppress(SyntaxError):
                found |= _names_in(ast.parse(part.value, mode="eval"))
        elif isinstance(part, ast.Name):
            found.add(part.id)
        elif isinstance(part, ast.Attribute):
            found.add(part.attr)
    return found


def _is_property(function: ast.FunctionDef) -> bool:
    return any(
        _names_in(decorator) & {"property", "cached_property"}
        for decorator in function.decorator_list
    )


class CoreIndex:
    """What core/ defines, read from its syntax trees (module stem -> tree)."""

    def __init__(self, trees: dict[str, ast.Module]) -> None:
        self.trees = trees
        self.classes = {
            node.name: node
            for tree in trees.values()
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
        }
        model = self.classes.get(MODEL)
        # the model's methods (its sizes, read as properties, are data a view may show)
        self.model_methods = {
            node.name
            for node in (model.body if model else [])
            if isinstance(node, ast.FunctionDef)
            and not node.name.startswith("__")
            and not _is_property(node)
        }
        self.model_types = {MODEL} | self.weight_types()

    def weight_types(self) -> set[str]:
        """Classes with a field that holds a torch tensor, or another such class."""
        found: set[str] = set()
        while True:
            more = {
                name
                for name, node in self.classes.items()
                if name not in found
                and any(
                    isinstance(field, ast.AnnAssign)
                    and _names_in(field.annotation) & (found | {"torch"})
                    for field in node.body
                )
            }
            if not more:
                return found
            found |= more

    def functions(self) -> dict[tuple[str, str], ast.FunctionDef]:
        """(module, name) -> each module-level function of core."""
        return {
            (module, node.name): node
            for module, tree in self.trees.items()
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
        }

    def bindings(self, module: str) -> dict[str, tuple[str, str]]:
        """Names a core module binds: its own functions and `from core.x import f` as (x, f);
        an imported core module `m` as (m, "")."""
        bound = {
            node.name: (module, node.name)
            for node in self.trees[module].body
            if isinstance(node, ast.FunctionDef)
        }
        bound.update(_core_imports(self.trees[module]))
        return bound

    def takes_the_model(self, function: ast.FunctionDef) -> bool:
        arguments = function.args
        annotations = [
            a.annotation
            for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            if a.annotation is not None
        ]
        return any(_names_in(annotation) & self.model_types for annotation in annotations)

    @functools.cached_property
    def model_taking_functions(self) -> set[tuple[str, str]]:
        """(module, name) of every core function that takes the model, builds it, calls one of
        its methods, or calls (through the names its module binds) another such function."""
        functions = self.functions()
        taking = {key for key, node in functions.items() if self.takes_the_model(node)}
        bindings = {module: self.bindings(module) for module in self.trees}
        called = {key: _calls(node, bindings[key[0]]) for key, node in functions.items()}
        while True:
            more = {
                key
                for key in functions
                if key not in taking
                and (
                    called[key].resolved & taking
                    or called[key].methods & self.model_methods
                    or MODEL in called[key].names | {name for _, name in called[key].resolved}
                )
            }
            if not more:
                return taking
            taking |= more


class _Calls:
    def __init__(self) -> None:
        self.resolved: set[tuple[str, str]] = set()  # core functions, by (module, name)
        self.methods: set[str] = set()  # x.f(...) on anything but a core module: "f"
        self.names: set[str] = set()  # f(...) of a name the module does not bind to core


def _core_imports(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """from core import m -> (m, ""); from core.m import f -> (m, f); import core -> ("", "")."""
    bound: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "core":
                for alias in node.names:
                    bound[alias.asname or alias.name] = (alias.name, "")
            elif node.module.startswith("core."):
                module = node.module.split(".")[1]
                for alias in node.names:
                    bound[alias.asname or alias.name] = (module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "core" or alias.name.startswith("core."):
                    parts = alias.name.split(".")
                    bound[alias.asname or "core"] = (
                        parts[1] if alias.asname and len(parts) > 1 else "",
                        "",
                    )
    return bound


def _resolve(
    call: ast.Call, bound: dict[str, tuple[str, str]], package: dict[str, tuple[str, str]]
) -> tuple[str, object]:
    """What a call calls: ("core", (module, name)) for a core function, ("method", "f") for
    x.f(...) on anything but a core module, ("name", "f") for a name not bound to core."""
    func = call.func
    if isinstance(func, ast.Name):
        if func.id in bound and bound[func.id][1]:
            return "core", bound[func.id]
        return "name", func.id
    if not isinstance(func, ast.Attribute):
        return "name", ""
    base = func.value
    owner = bound.get(base.id) if isinstance(base, ast.Name) else None
    if owner == ("", ""):  # core.f(...), as core/__init__ exports it
        return "core", package.get(func.attr, ("__init__", func.attr))
    if owner is not None and not owner[1]:
        return "core", (owner[0], func.attr)  # module.f(...)
    return "method", func.attr


def _calls(
    node: ast.AST,
    bound: dict[str, tuple[str, str]],
    package: dict[str, tuple[str, str]] | None = None,
) -> _Calls:
    """The calls made inside node, resolved through the names its module binds to core."""
    calls = _Calls()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            kind, target = _resolve(call, bound, package or {})
            if kind == "core":
                calls.resolved.add(target)
            elif kind == "method":
                calls.methods.add(target)
            elif target:
                calls.names.add(target)
    return calls


@functools.cache
def core_index() -> CoreIndex:
    return CoreIndex({path.stem: ast.parse(path.read_text()) for path in files("core")})


def _ui_modules(tree: ast.Module) -> set[str]:
    """Names a page binds to ui modules (from ui import state; from ui import x as y)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "ui"
        for alias in node.names
    }


def model_calls_in_view(text: str, index: CoreIndex) -> list[str]:
    """Calls in a view of a core function that takes the model, or of a method of the model
    (anything but a ui module's function named like one counts: stricter, never looser)."""
    tree = ast.parse(text)
    bound = _core_imports(tree)
    package = _core_imports(index.trees["__init__"]) if "__init__" in index.trees else {}
    through_ui = _ui_modules(tree)
    taking = index.model_taking_functions
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in through_ui
        ):
            continue  # ui/ runs it, through the door
        kind, target = _resolve(call, bound, package)
        if (
            (kind == "core" and (target in taking or target[1] == MODEL))
            or (kind == "method" and target in index.model_methods)
            or (kind == "name" and target == MODEL)
        ):
            found.append(f"line {call.lineno}: {ast.unparse(call)[:80]}")
    return found


# The model's name is what the visitor picked, shown as a label: the one field a view may read.
SHOWN_FIELDS = frozenset({"name"})


def model_fields(source: str) -> frozenset[str]:
    """The Transformer's own fields, read from its __init__ (self.x = ...): its architecture,
    sizes, tokenizer and weights. Its properties (n_layers, d_model, ...) are not fields."""
    (init,) = [
        node
        for node in _transformer_class(ast.parse(source)).body
        if isinstance(node, ast.FunctionDef) and node.name == "__init__"
    ]
    return frozenset(
        target.attr
        for node in ast.walk(init)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    )


def model_fields_read_in_view(text: str, fields: frozenset[str]) -> list[str]:
    """model.<field> in a view, for a field of the Transformer but its name: what the model is
    made of reaches a page through the anatomy (ui/anatomy_text.py) or ui/, never read raw."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "model"
        and node.attr in fields - SHOWN_FIELDS
    ]


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_views_read_no_field_of_the_model(path):
    """A view may show the model's sizes (its properties) and name; its architecture, its
    tokenizer and its weights it reads through the anatomy or asks ui/ for."""
    fields = model_fields((ROOT / "core" / "transformer.py").read_text())
    assert model_fields_read_in_view(path.read_text(), fields) == []


def test_the_model_field_rule_can_fail():
    fields = model_fields((ROOT / "core" / "transformer.py").read_text())
    assert {"arch", "dims", "tokenizer", "layers", "word_embeddings", "name"} <= fields
    assert not {"n_layers", "d_model", "is_decoder"} & fields  # properties: sizes a page shows
    view = (
        "if model.arch.norm_position == 'pre':\n    pass\n"
        "x = model.n_layers\ny = model.name\nz = anatomy.arch.final_norm\n"
        "w = model.tokenizer.token_of(3)\n"
    )
    found = [line.split(":")[0] for line in model_fields_read_in_view(view, fields)]
    assert found == ["line 1", "line 6"]


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_views_hand_the_model_to_no_core_function(path):
    """A view takes from core/ only types, constants and pure functions of arrays; whatever
    takes the model goes through ui/<page>_runs.py and ui/door.py's one door."""
    assert model_calls_in_view(path.read_text(), core_index()) == []


def test_the_model_rule_can_fail():
    index = CoreIndex(
        {
            "__init__": ast.parse(
                "from core.transformer import Transformer\nfrom core.a import deeper\n"
            ),
            "transformer": ast.parse(
                "class Transformer:\n    def run(self, text): ...\n"
                "    @property\n    def d_model(self) -> int: ...\n"
                "class LayerWeights:\n    query: torch.Tensor\n"
                "class Layer:\n    weights: LayerWeights\n"
            ),
            "a": ast.parse(
                "from core.transformer import Transformer\nfrom core import b\n"
                "def padded_run(model: Transformer, n: int): ...\n"
                "def deeper(x):\n    return padded_run(x, 2)\n"
                "def through_b(x):\n    return b.of_weights(x)\n"
                "def bilinear_form(x): ...\n"
                "def runs_it(x):\n    return x.run('text')\n"
                "def builds(path):\n    return Transformer(path)\n"
            ),
            "b": ast.parse(
                "def of_weights(layer: Layer | None): ...\n"
                "def cosine(a: np.ndarray, b: np.ndarray) -> float: ...\n"
                "def bilinear_form(model: 'Transformer'): ...\n"
            ),
        }
    )
    assert index.model_types == {"Transformer", "LayerWeights", "Layer"}
    assert index.model_methods == {"run"}
    taking = index.model_taking_functions
    assert {("a", n) for n in ("padded_run", "deeper", "through_b", "runs_it", "builds")} <= taking
    assert ("b", "of_weights") in taking and ("b", "bilinear_form") in taking
    assert ("a", "bilinear_form") not in taking and ("b", "cosine") not in taking
    view = (
        "import core\nfrom core import a, b\nfrom core.a import deeper as d\nfrom ui import a_runs\n"
        "x = a.padded_run(model, 1)\ny = a_runs.padded_run(model, 1)\nz = model.run('x')\n"
        "w = b.cosine(p, q)\nv = d(model)\nu = a.bilinear_form(p)\nt = core.deeper(m)\n"
        "s = model.d_model\n"
    )
    assert [line.split(":")[0] for line in model_calls_in_view(view, index)] == [
        "line 5",
        "line 7",
        "line 9",
        "line 11",
    ]
    # the real core: the functions that take the model or run it are found, the math is not
    real = core_index()
    found = real.model_taking_functions
    assert {("context", "static_sentence"), ("multi_head", "value_weighted_norms")} <= found
    assert {("head_stats", "every_layer_head_view_weights"), ("models", "load_model")} <= found
    assert {("scaling_masking", "padded_run"), ("explanations", "gradient_scores")} <= found
    assert {"run", "word_vectors", "position_vectors"} <= real.model_methods
    assert ("attention", "masked_softmax") not in found and ("positional", "cosine") not in found


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


# The functions of ui/display.py that take an HTML form to draw (html=, strip=): a view hands
# each a lambda that returns html_heatmap's builder call (or a few, side by side), and the one
# function that shows what such a form returned is display._show_html_form.
FORM_TAKERS = {"show_matrix": ("html", "strip"), "show_bars": ("html",)}
FORM_POSITIONS = {"html": 1, "strip": 6}  # (shape or n_labels, html, plotly, key, filename, …)


def _is_builder_form(node: ast.expr | None, wrappers: frozenset[tuple[str, str]]) -> bool:
    """A lambda returning a builder call, a tuple of them, or tuple(<builder call> for …)."""
    if not isinstance(node, ast.Lambda):
        return False
    body = node.body
    if isinstance(body, ast.Tuple):
        return bool(body.elts) and all(_is_builder_call(e, wrappers) for e in body.elts)
    if (
        isinstance(body, ast.Call)
        and isinstance(body.func, ast.Name)
        and body.func.id == "tuple"
        and len(body.args) == 1
        and isinstance(body.args[0], ast.GeneratorExp)
    ):
        return _is_builder_call(body.args[0].elt, wrappers)
    return _is_builder_call(body, wrappers)


def _form_arguments(call: ast.Call, name: str) -> list[ast.expr]:
    """The html= and strip= forms a call of show_matrix / show_bars passes (by keyword or place);
    None (no HTML form: plotly draws it) is no form."""
    found = []
    for form in FORM_TAKERS[name]:
        keyword = [k.value for k in call.keywords if k.arg == form]
        position = FORM_POSITIONS[form]
        found += keyword or ([call.args[position]] if len(call.args) > position else [])
    return [form for form in found if not (isinstance(form, ast.Constant) and form.value is None)]


def _inside_function(tree: ast.Module, call: ast.Call, name: str) -> bool:
    return any(
        isinstance(node, ast.FunctionDef) and node.name == name and call in ast.walk(node)
        for node in ast.walk(tree)
    )


def test_html_figures_come_only_from_the_tested_builder():
    """show_html_figure is handed html_heatmap's builder call itself (or a ui function's that
    returns one), or, inside display._show_html_form only, what a form returned: every form
    handed to show_matrix / show_bars is a lambda returning builder calls. No module but
    HTML_FIGURE_MAKERS makes an HtmlFigure (a NewType is not checked at run time)."""
    wrappers = _builder_wrappers(files("ui"))
    assert ("matrix_charts", "pair_grid") in wrappers  # the rule sees the wrappers in use
    forms_checked = 0
    for path in [*files("views"), *files("ui"), ROOT / "app.py"]:
        tree = ast.parse(path.read_text())
        for call in _calls_named(tree, "show_html_figure"):
            shows_a_form = path.name == "display.py" and _inside_function(
                tree, call, "_show_html_form"
            )
            assert shows_a_form or (
                len(call.args) == 1 and _is_builder_call(call.args[0], wrappers)
            ), f"{path.name}:{call.lineno}: show_html_figure takes html_heatmap's builder call"
        for name in FORM_TAKERS:
            for call in _calls_named(tree, name):
                for form in _form_arguments(call, name):
                    forms_checked += 1
                    assert _is_builder_form(form, wrappers), (
                        f"{path.name}:{call.lineno}: {name}'s HTML form is a lambda returning "
                        "html_heatmap's builder call"
                    )
        for call in _calls_named(tree, "_show_html_form"):
            (argument,) = call.args
            assert path.name == "display.py" and isinstance(argument, ast.Name), path.name
            assert argument.id in ("html", "strip"), f"{path.name}:{call.lineno}"
        if path.name not in HTML_FIGURE_MAKERS:
            assert not _calls_named(tree, "HtmlFigure"), path.name
        for call in _calls_named(tree, "_show_markup"):  # what show_html_figure was handed
            assert path.name == "display.py" and _inside_function(tree, call, "show_html_figure"), (
                f"{path.name}:{call.lineno}: _show_markup is show_html_figure's alone"
            )
        for call in _calls_named(tree, "_show_stores"):
            assert path.name == "display.py" and _shows_stores_aside(tree, call), (
                f"{path.name}:{call.lineno}: _show_stores takes what stores_aside(...) returned"
            )
    assert forms_checked >= 10  # the rule saw the views' and display's forms


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
    forms = ast.parse(
        "show_bars(n, html=lambda: html_heatmap.bar_rows(a), plotly=p, key='k')\n"
        "show_matrix(s, lambda: (charts.grid(a), html_heatmap.value_grid(b)), p, 'k')\n"
        "show_matrix(s, lambda: tuple(charts.grid(m) for m in ms), p, 'k')\n"
        "show_bars(n, html=lambda: HtmlFigure(text), plotly=p, key='k')\n"
        "show_matrix(s, html=figure, plotly=p, key='k', strip=lambda: charts.grid(a))\n"
    )
    verdicts = [
        [_is_builder_form(form, wrappers) for form in _form_arguments(call, call.func.id)]
        for call in ast.walk(forms)
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") in FORM_TAKERS
    ]
    assert verdicts == [[True], [True], [True], [False], [False, True]]
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


# Modules named after what several pages share, not after one page (README, "`ui/` stays flat,
# named by page").
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
    exists, is imported by its view or by the page's runs (ui/<page>_runs.py, which a view asks
    for whatever takes the model): a newcomer finds a figure's code in two hops."""
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
            readers = [ROOT / "views" / f"{page}.py", ROOT / "ui" / f"{page}_runs.py"]
            assert any(
                re.search(rf"from core import [^\n]*\b{page}\b|import core\.{page}\b", text)
                for text in (path.read_text() for path in readers if path.exists())
            ), f"neither views/{page}.py nor ui/{page}_runs.py uses core/{page}.py"


def _page_of(stem: str, pages: set[str]) -> str | None:
    """The page a ui module belongs to: its name is the page's, or starts with it and "_"."""
    for page in sorted(pages, key=len, reverse=True):
        if stem == page or stem.startswith(page + "_"):
            return page
    return None


def shared_modules_importing_pages(ui_files: dict[str, str], pages: set[str]) -> list[str]:
    """ "module -> page module" for every shared ui module (named after no page) that imports a
    page's module (ui module stem -> its source)."""
    found = []
    for stem, text in sorted(ui_files.items()):
        if _page_of(stem, pages):
            continue
        tree = ast.parse(text)
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "ui":
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ui."):
                imported.add(node.module.split(".")[1])
        found += [f"{stem} -> {name}" for name in sorted(imported) if _page_of(name, pages)]
    return found


def test_shared_ui_modules_import_no_pages_module():
    """A module several pages share (display, widgets, state, …) depends on no page: a page's
    modules may use the shared ones, never the other way round."""
    pages = {path.stem for path in files("views")}
    sources = {path.stem: path.read_text() for path in files("ui")}
    assert shared_modules_importing_pages(sources, pages) == []
    # the rule can fail, and leaves a page's own modules free
    example = {
        "display": "from ui import charts, explanations_charts\n",
        "widgets": "from ui.lab_runs import training_bar\n",
        "lab_runs": "from ui import widgets, display\n",
        "head_view_hover": "from ui import head_view_charts\n",
    }
    assert shared_modules_importing_pages(example, {"lab", "explanations", "head_view"}) == [
        "display -> explanations_charts",
        "widgets -> lab_runs",
    ]


def _draws_figures(module: str) -> bool:
    """A ui module that decides or draws figures: the policy, display, a chart module, the HTML
    builder. A size read from any of them is a display size."""
    return module in ("display_policy", "display", "html_heatmap") or "chart" in module


def sizes_compared_in(text: str) -> list[str]:
    """Comparisons in a view with a display size: display_policy.X, a chart module's X, or an X
    imported from one of them by name."""
    tree = ast.parse(text)
    imported_sizes = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ui.")
        and _draws_figures(node.module.split(".")[1])
        for alias in node.names
        if alias.name.isupper()
    }  # fmt: skip
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for part in ast.walk(node):
            if (
                isinstance(part, ast.Attribute)
                and isinstance(part.value, ast.Name)
                and _draws_figures(part.value.id)
                and part.attr.isupper()
            ) or (isinstance(part, ast.Name) and part.id in imported_sizes):
                found.append(f"line {node.lineno}: {ast.unparse(node)[:70]}")
                break
    return found


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_views_leave_html_or_plotly_to_the_display_policy(path):
    """A view draws a matrix or bars through display.show_matrix / show_bars, which ask
    ui/display_policy.py: it compares no size with the policy's limits itself."""
    assert sizes_compared_in(path.read_text()) == []


def test_the_size_rule_can_fail():
    view = (
        "if len(tokens) <= display_policy.BARS_UP_TO:\n    pass\n"
        "x = n > display_policy.DRAW_LIMIT\ny = display.show_bars(n, html=h, plotly=p, key='k')\n"
        "z = trace.n_tokens > multi_head_charts.GRID_MAX\nw = n > explanations_runs.MAX_PIECES\n"
        "from ui.display_policy import DRAW_LIMIT as LIMIT\nv = n <= LIMIT\n"
    )
    found = [line.split(":")[0] for line in sizes_compared_in(view)]
    assert found == ["line 1", "line 3", "line 5", "line 8"]


def _whole_number(node: ast.expr | None, at_least: int = 0) -> bool:
    """A whole-number literal (or arithmetic of them, 72 * 128 * 128) of at least at_least."""
    if isinstance(node, ast.BinOp):
        return _whole_number(node.left) and _whole_number(node.right)
    return (
        isinstance(node, ast.Constant)
        and type(node.value) is int
        and (at_least == 0 or node.value >= at_least)
    )


# A figure's own layout, not how much of a matrix or how many labels it draws: pixels, time.
LAYOUT_SUFFIXES = ("_PX", "_MS")
# From here a number compared with a size or given as a limit is a size (0-3 count things:
# an empty input, one row, a pair, the three axes of a 3-D projection).
SIZE_FROM = 4


def size_constants_in(text: str) -> list[str]:
    """Sizes written into a chart module instead of read from ui/display_policy.py: a
    module-level name bound to a whole number (but *_PX, *_MS), a whole number from SIZE_FROM
    up in a comparison (an assert states an invariant: not a choice), and such a default for a
    parameter that limits what is drawn (max_*, *_up_to, limit)."""
    tree = ast.parse(text)
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and _whole_number(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if not all(name.endswith(LAYOUT_SUFFIXES) for name in names):
                found.append(f"line {node.lineno}: {ast.unparse(node)[:70]}")
    asserted = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert)
        for part in ast.walk(node)
    }
    for node in ast.walk(tree):
        sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
        if id(node) not in asserted and any(_whole_number(side, SIZE_FROM) for side in sides):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:70]}")
        if isinstance(node, ast.FunctionDef):
            arguments = node.args
            positional = [*arguments.posonlyargs, *arguments.args]
            pairs = [
                *zip(positional[::-1], arguments.defaults[::-1], strict=False),
                *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
            ]
            for argument, default in pairs:
                name = argument.arg
                limits = name.startswith("max_") or name.endswith("_up_to") or name == "limit"
                if limits and _whole_number(default, SIZE_FROM):
                    found.append(f"line {node.lineno}: {node.name}({name}={ast.unparse(default)})")
    return found


@pytest.mark.parametrize(
    "path", [p for p in files("ui") if "chart" in p.name], ids=lambda p: p.name
)
def test_chart_modules_read_their_sizes_from_the_display_policy(path):
    """How many rows, cells and labels a figure draws is decided in ui/display_policy.py, the
    one place a reader looks for it; a chart module reads it from there."""
    assert size_constants_in(path.read_text()) == []


def test_the_chart_size_rule_can_fail():
    module = (
        "GRID_MAX = 48\nTOP_PX = 160\nBUDGET = 64 * 96\nCOLOUR = '#fff'\nSHARE = 0.5\n"
        "def f(n, limit=32, height=420, max_rows=display_policy.DRAW_LIMIT):\n"
        "    assert n <= 256\n    if n > 6:\n        return n == 3\n"
        "    return n <= display_policy.NUMBERS_UP_TO\n"
    )
    found = sorted(line.split(":")[0] for line in size_constants_in(module))
    assert found == ["line 1", "line 3", "line 6", "line 8"]


def test_every_size_of_the_display_policy_lives_in_one_module():
    """The sizes that choose HTML, an image or plotly are assigned in ui/display_policy.py only
    (every whole number it names, read from it)."""
    policy = ast.parse((ROOT / "ui" / "display_policy.py").read_text())
    sizes = {
        target.id
        for node in policy.body
        if isinstance(node, ast.Assign) and _whole_number(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert {"NUMBERS_UP_TO", "DRAW_LIMIT", "SWITCH_IN_BROWSER_UP_TO_WEIGHTS"} <= sizes
    for path in [*files("ui"), *files("views")]:
        if path.name == "display_policy.py":
            continue
        assigned = {
            target.id
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert not assigned & sizes, f"{path.name} sets {sorted(assigned & sizes)}"


def test_a_pages_flags_live_in_the_one_manifest():
    """What the shared sidebar does on a page is a field of its ui/path.py Step: app.py names no
    page (a set of page names there would be a second manifest, drifting from the first)."""
    pages = {path.stem for path in files("views")}
    literals = {
        node.value
        for node in ast.walk(ast.parse((ROOT / "app.py").read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert not literals & pages, sorted(literals & pages)


# ---- one layer loop: the forward path in core/transformer.py -----------------------------------
def _called_names(node: ast.AST) -> set[str]:
    """Every name a piece of code calls: f(...) gives "f", x.f(...) gives "f"."""
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name:
                names.add(name)
    return names


def _transformer_class(tree: ast.Module) -> ast.ClassDef:
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == MODEL]
    return cls


def _self_calls(function: ast.AST) -> set[str]:
    """The methods a method calls on self: self.f(...) gives "f"."""
    return {
        call.func.attr
        for call in ast.walk(function)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
    }


def _steps_called(body: list[ast.stmt], index: str) -> set[str]:
    """Methods of self a loop's body calls or hands on (checkpoint(self.f, ...)) with its index
    among the arguments: `for layer in ...: x = self._step(x, layer)` gives "_step"."""
    found = set()
    for call in ast.walk(ast.Module(body=body, type_ignores=[])):
        if not isinstance(call, ast.Call) or index not in _names_in(call):
            continue
        for part in [call.func, *call.args]:
            if (
                isinstance(part, ast.Attribute)
                and isinstance(part.value, ast.Name)
                and part.value.id == "self"
            ):
                found.add(part.attr)
    return found


def runs_layers(source: str) -> frozenset[str]:
    """What runs a layer of a loaded model when called, read from core/transformer.py's source:
    the Transformer's public methods that reach its layer step (the private method its own loop
    calls with the loop's index), and the core functions that step calls (attention itself)."""
    tree = ast.parse(source)
    methods = {
        node.name: node
        for node in _transformer_class(tree).body
        if isinstance(node, ast.FunctionDef)
    }
    steps = {
        name
        for method in methods.values()
        for loop in ast.walk(method)
        if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
        for name in _steps_called(loop.body, loop.target.id)
        if name.startswith("_") and name in methods
    }
    reaching = set(steps)
    while True:
        more = {
            name
            for name, method in methods.items()
            if name not in reaching and _self_calls(method) & reaching
        }
        if not more:
            break
        reaching |= more
    from_core = {name for name, (module, _) in _core_imports(tree).items() if module}
    attention = set().union(*(_called_names(methods[step]) for step in steps)) & from_core
    return frozenset({name for name in reaching if not name.startswith("_")} | attention)


@functools.cache
def transformer_runs_layers() -> frozenset[str]:
    return runs_layers((ROOT / "core" / "transformer.py").read_text()) | attention_parts()


def attention_parts(source: str | None = None) -> frozenset[str]:
    """The pieces attention is computed from, read from core/attention.py: multi_head_attention
    (the layer step's attention) and the functions of the module it calls, directly or through
    each other. A loop over layers that calls one computes attention itself."""
    tree = ast.parse(source or (ROOT / "core" / "attention.py").read_text())
    defined = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    found = {"multi_head_attention"} & set(defined)
    while True:
        more = set().union(*(_called_names(defined[name]) for name in found)) & set(defined)
        if more <= found:
            return frozenset(name for name in found if not name.startswith("_"))
        found |= more


# The name of a module's one function allowed its own layer loop: `OWN_LAYER_LOOP = forward`,
# after the function, whose docstring says why it is not the explained model.
OWN_LAYER_LOOP = "OWN_LAYER_LOOP"


def own_layer_loops(source: str) -> set[str]:
    """The functions a module names as its own layer loop (OWN_LAYER_LOOP = <function>)."""
    return {
        node.value.id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Name)
        and any(isinstance(t, ast.Name) and t.id == OWN_LAYER_LOOP for t in node.targets)
    }


def transformer_private_methods() -> set[str]:
    """The Transformer's own private methods (its per-layer step and the step's parts), read
    from core/transformer.py: no other module may call them."""
    tree = ast.parse((ROOT / "core" / "transformer.py").read_text())
    return {
        node.name
        for node in _transformer_class(tree).body
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


def layer_loops(source: str, private: set[str], running: frozenset[str] | None = None) -> list[str]:
    """Calls of the Transformer's private methods on anything but self, and loops over a
    model's layers whose body runs a layer (running: transformer_runs_layers() by default)."""
    running = transformer_runs_layers() if running is None else running
    tree = ast.parse(source)
    exempt = {
        id(node)
        for function in tree.body
        if isinstance(function, ast.FunctionDef) and function.name in own_layer_loops(source)
        for node in ast.walk(function)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
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
            if _over_layers(iterable) and called & running:
                found.append(f"line {node.lineno}: a loop over the layers runs {called & running}")
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


def test_a_layer_loop_of_attentions_pieces_is_one_too():
    """A loop over layers that computes attention from core/attention.py's pieces is a second
    layer loop, unless its module names it OWN_LAYER_LOOP; and one function in the whole tree
    does: core/induction.py's forward, the toy decoder the lab trains from scratch."""
    toy = (
        "from core.attention import masked_softmax, split_heads\n"
        "def forward(decoder, x):\n    for layer in decoder.layers:\n"
        "        x = x + masked_softmax(split_heads(x @ layer.w, 2))\n    return x\n"
        "def stats(decoder, x):\n    return [x.mean() for layer in decoder.layers]\n"
    )
    private = transformer_private_methods()
    assert [line.split(":")[0] for line in layer_loops(toy, private)] == ["line 3"]
    assert layer_loops(toy + "OWN_LAYER_LOOP = forward\n", private) == []
    second = toy.replace(
        "def stats(decoder, x):\n    return [x.mean()",
        "def again(decoder, x):\n    return [masked_softmax(x)",
    )
    assert len(layer_loops(second + "OWN_LAYER_LOOP = forward\n", private)) == 1
    parts = attention_parts(
        "def multi_head_attention(x):\n    return merge(soft(x))\n"
        "def soft(x):\n    return _keep(x)\ndef merge(x): ...\ndef _keep(x): ...\ndef other(x): ...\n"
    )
    assert parts == {"multi_head_attention", "soft", "merge"}
    assert {"masked_softmax", "attention_scores", "split_heads"} <= attention_parts()
    marked = {
        f"{path.parent.name}/{path.name}": own_layer_loops(path.read_text())
        for path in [*files("core"), *files("ui"), *files("views"), ROOT / "app.py"]
        if own_layer_loops(path.read_text())
    }
    assert marked == {"core/induction.py": {"forward"}}


def test_what_runs_a_layer_is_read_from_the_transformer():
    """The loop rule's names come from core/transformer.py: a new entry that reaches the layer
    step is covered without editing the test, and a method that does not reach it is not."""
    toy = (
        "from core.attention import attend, causal\n"
        "class Transformer:\n"
        "    def _step(self, x, layer):\n        return attend(x, causal(3))\n"
        "    def _loop(self, x, last):\n        for layer in range(last):\n"
        "            x = self._step(x, layer)\n        return x\n"
        "    def go(self, x):\n        return self._loop(x, 2)\n"
        "    def go_twice(self, x):\n        return self.go(self.go(x))\n"
        "    def sizes(self):\n        for i in range(3):\n            print(i)\n"
        "    def embed(self, x):\n        return self._norm(x)\n"
    )
    assert runs_layers(toy) == {"go", "go_twice", "attend", "causal"}
    real = transformer_runs_layers()
    assert {"run", "run_ids", "run_with_hooks", "run_with_cache"} <= real
    assert {"forward_from_word_vectors", "multi_head_attention"} <= real
    assert not {"encode", "logits", "word_vectors", "position_ids"} & real


# ---- every figure a view draws goes through the display policy --------------------------------
# A matrix (a plotly Heatmap) goes through display.show_matrix, bars (a plotly Bar) through
# display.show_bars: ui/display_policy.py decides their form. show_figure is for the rest
# (lines, scatters, diagrams), and a view never calls st.plotly_chart itself.
POLICY_FOR = {"Heatmap": "show_matrix", "Bar": "show_bars"}


def _ui_bindings(tree: ast.Module, module: str, defined: set[tuple[str, str]]) -> dict:
    """Names a ui module binds to ui functions: its own, and `from ui.x import f` as (x, f)."""
    bound = {name: (module, name) for (owner, name) in defined if owner == module}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ui."):
            owner = node.module.split(".")[1]
            for alias in node.names:
                bound[alias.asname or alias.name] = (owner, alias.name)
    return bound


def _ui_call_target(call: ast.Call, bound: dict) -> tuple[str, str] | None:
    """(module, function) of f(...) bound to a ui function, or of module.f(...)."""
    func = call.func
    if isinstance(func, ast.Name):
        return bound.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id, func.attr
    return None


@functools.cache
def figure_kinds() -> dict[tuple[str, str], frozenset[str]]:
    """(ui module, function) -> the plotly traces it draws among POLICY_FOR's (go.Heatmap(...),
    go.Bar(...), figure.add_heatmap(...), figure.add_bar(...)), in its body or through the ui
    functions it calls, read from ui/."""
    trees = {path.stem: ast.parse(path.read_text()) for path in files("ui")}
    functions = {
        (module, node.name): node
        for module, tree in trees.items()
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }
    kinds: dict[tuple[str, str], set[str]] = {key: set() for key in functions}
    calls: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for (module, name), node in functions.items():
        bound = _ui_bindings(trees[module], module, set(functions))
        calls[(module, name)] = set()
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            if isinstance(call.func, ast.Attribute):  # go.Heatmap(...), figure.add_heatmap(...)
                drawn = call.func.attr.removeprefix("add_").capitalize()
                if drawn in POLICY_FOR:
                    kinds[(module, name)].add(drawn)
            target = _ui_call_target(call, bound)
            if target in functions:
                calls[(module, name)].add(target)
    while True:
        grown = False
        for key, called in calls.items():
            more = set().union(*(kinds[c] for c in called)) - kinds[key]
            if more:
                kinds[key] |= more
                grown = True
        if not grown:
            return {key: frozenset(found) for key, found in kinds.items()}


def _figure_source(figure: ast.expr, scope: ast.AST, line: int) -> ast.expr | None:
    """What a figure argument was built by: the call itself, or the value last assigned to its
    name before `line` in the enclosing function (or module); None when nothing was assigned
    (a parameter, a loop's variable)."""
    if not isinstance(figure, ast.Name):
        return figure
    assigned = [
        node
        for node in ast.walk(scope)
        if isinstance(node, ast.Assign)
        and node.lineno < line
        and any(isinstance(t, ast.Name) and t.id == figure.id for t in node.targets)
    ]
    return max(assigned, key=lambda node: node.lineno).value if assigned else None


def figures_around_the_policy(text: str, kinds: dict[tuple[str, str], frozenset[str]]) -> list[str]:
    """show_figure calls in a view whose figure is a matrix or bars (or is not a ui chart
    function's figure at all), and any st.plotly_chart of a view's own."""
    tree = ast.parse(text)
    scopes = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute | ast.Name):
            continue
        name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
        if name == "plotly_chart":
            found.append(f"line {call.lineno}: st.plotly_chart: a view shows figures via display")
        if name != "show_figure":
            continue
        figure = (
            call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "fig")
        )
        scope = next((s for s in reversed(scopes) if call in ast.walk(s)), tree)
        source = _figure_source(figure, scope, call.lineno)
        target = _ui_call_target(source, {}) if isinstance(source, ast.Call) else None
        if target not in kinds:
            found.append(f"line {call.lineno}: {ast.unparse(figure)} is no ui chart's figure")
            continue
        for kind in sorted(kinds[target]):
            found.append(f"line {call.lineno}: a {kind} goes through display.{POLICY_FOR[kind]}")
    return found


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_views_draw_matrices_and_bars_through_the_display_policy(path):
    """Every matrix a view draws goes through display.show_matrix and every set of bars through
    show_bars, which ask ui/display_policy.py; show_figure takes the other figures."""
    assert figures_around_the_policy(path.read_text(), figure_kinds()) == []


def test_the_figure_rule_can_fail():
    kinds = figure_kinds()
    assert "Heatmap" in kinds[("positional_charts", "position_heatmap")]
    assert "Heatmap" in kinds[("scaling_masking_charts", "reduced_heatmap")]  # via charts
    assert "Bar" in kinds[("charts", "weight_bars")]
    assert not kinds[("embeddings_charts", "projection_figure")]
    view = (
        "fig = positional_charts.position_heatmap(m, 't')\n"
        "display.show_figure(fig, key='a')\n"
        "display.show_figure(embeddings_charts.projection_figure(p), key='b')\n"
        "def f(fig):\n    display.show_figure(fig, 'c')\n"
        "display.show_figure(charts.weight_bars(l, s, 't', 'y'), key='d')\n"
        "st.plotly_chart(fig)\n"
        "display.show_matrix(m.shape, None, lambda: positional_charts.position_heatmap(m, 't'), 'e')\n"
    )
    found = [line.split(":")[0] for line in figures_around_the_policy(view, kinds)]
    assert sorted(found) == ["line 2", "line 5", "line 6", "line 7"]


# ---- a view computes nothing with an array's size, and transposes nothing ----------------------
# An array's size may travel whole to the display policy (display.show_matrix(x.shape, ...)) or
# be read for prose (x.shape[1]). Computing with it (x.shape[1] - 1, x.shape[-1] < n,
# min(x.shape), n, d = x.shape) or transposing (x.T) is array work, which belongs to
# ui/<page>_runs.py or core/<page>.py with a test. Reading the code for it is cheap and exact;
# a size first copied into a name and then computed with passes unseen (no data flow is
# followed). Array work through methods (.mean(), .max()) is the next rule's.
SIZE_ARITHMETIC = (ast.BinOp, ast.Compare, ast.UnaryOp, ast.AugAssign, ast.BoolOp)
SIZE_BUILTINS = {"min", "max", "range", "sum", "abs", "divmod"}


def _mentions_shape(node: ast.AST) -> bool:
    return any(isinstance(part, ast.Attribute) and part.attr == "shape" for part in ast.walk(node))


def array_size_work(text: str) -> list[str]:
    """Lines of a view that compute with an array's .shape or transpose an array."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute) and node.attr == "T":
            found.add(f"line {node.lineno}: a transpose (.T)")
        if isinstance(node, SIZE_ARITHMETIC):
            operands = [node]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in SIZE_BUILTINS:
            operands = node.args
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple | ast.List):
            operands = [node.value] if isinstance(node.value, ast.Attribute) else []
        else:
            operands = []
        if any(_mentions_shape(operand) for operand in operands):
            found.add(f"line {node.lineno}: arithmetic on .shape")
    return sorted(found)


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_views_compute_nothing_with_an_arrays_size(path):
    assert array_size_work(path.read_text()) == []


def test_the_array_size_rule_can_fail():
    view = (
        "display.show_matrix(scores.shape, None, draw, 'a')\n"  # the size, whole: allowed
        "n, d_v = len(tokens), result.value.shape[1]\n"  # one side read for prose: allowed
        "last = bits.shape[1] - 1\n"
        "pooled = thumbs.shape[-1] < n_shown\n"
        "n_queries, n_keys = products.raw.shape\n"
        "side = min(matrix.shape)\n"
        "tables.download_matrix(w_o.weight.T, rows, columns, 'w')\n"
        "st.caption(f'{-x.shape[0]} rows')\n"
    )
    found = [line.split(":")[0] for line in array_size_work(view)]
    assert found == ["line 3", "line 4", "line 5", "line 6", "line 7", "line 8"]


# ---- a view calls no array method that computes ------------------------------------------------
# A statistic, a reduction or a reshape of an array (x.mean(), x.argmax(), x.reshape(...)) is
# work with a definition and a test: it lives in core/<page>.py, on a result object, or in
# ui/<page>_runs.py, and prose prints numbers through ui/numbers.py (span, extremes, largest).
# These names are methods of numpy arrays and torch tensors only, so a call of one in a view is
# array work whatever the receiver. Builtins over arrays (min(x), sum(x)) cannot be told from
# builtins over a list of words without types, and are not read here.
ARRAY_METHODS = frozenset(
    {
        "all", "any", "argmax", "argmin", "argsort", "astype", "clip", "cumprod", "cumsum",
        "diagonal", "dot", "flatten", "max", "mean", "min", "nonzero", "prod", "ravel",
        "reshape", "squeeze", "std", "sum", "transpose", "var",
    }
)  # fmt: skip


def array_method_calls(text: str) -> list[str]:
    """Lines of a view that call an array's computing method."""
    return sorted(
        f"line {node.lineno}: .{node.func.attr}()"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ARRAY_METHODS
    )


@pytest.mark.parametrize(
    "path",
    files("views"),
    ids=lambda p: p.name,
)
def test_views_call_no_array_method_that_computes(path):
    assert array_method_calls(path.read_text()) == []


def test_the_array_method_rule_can_fail():
    view = (
        "st.markdown(f'{share.min():.0%} to {share.max():.0%}')\n"
        "prev_layer, prev_head = divmod(int(stats.on_previous.argmax()), n_heads)\n"
        "kept = result.attn_weights.diagonal()\n"
        "labels = sorted(tokens)\n"  # a list of words: not array work
        "st.metric('mean', f'{summary.mean:.2f}')\n"  # a field, not a call
        "st.markdown(span(share, '.0%'))\n"
    )
    assert array_method_calls(view) == [
        "line 1: .max()",
        "line 1: .min()",
        "line 2: .argmax()",
        "line 3: .diagonal()",
    ]


# ---- one way to title a page ---------------------------------------------------------------------
# widgets.page_title draws a title without Streamlit's link icon, which wraps onto a line of its
# own on a phone and leaves a blank band under the title (tests/test_browser_devices.py measures
# it). A page that called st.title itself would bring the band back.
def title_calls(text: str) -> list[str]:
    """Lines that call st.title directly."""
    return sorted(
        f"line {node.lineno}"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "title"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "st"
    )


@pytest.mark.parametrize(
    "path",
    [ROOT / "app.py", *files("views"), *(p for p in files("ui") if p.name != "widgets.py")],
    ids=lambda p: p.name,
)
def test_pages_are_titled_only_by_page_title(path):
    assert title_calls(path.read_text()) == []


def test_the_title_rule_can_fail():
    view = (
        "st.title('Attention Explorer')\n"
        "widgets.page_title('Attention Explorer')\n"
        "label = step.title\n"  # a field: allowed
        "st.caption(name.title())\n"  # a string's method: allowed
    )
    assert title_calls(view) == ["line 1"]


# ---- a view does no arithmetic on a run's arrays, and caches nothing -------------------------
# The array methods and .shape are read above; an operator is the other way to compute with an
# array: `trace.attentions[l, h] @ trace.values[l, h]`, or any operator on a Trace's arrays. The
# Trace's array fields are read from its class in core/transformer.py. A number from such an
# array, once a ui/ or core/ function has picked it, is the view's to print (not read here).
# Caching belongs to ui/ too: a view's own st.cache_data would hold results outside the door's
# one budget (README, "The one door").
def trace_array_fields() -> frozenset[str]:
    """The Trace's fields annotated as numpy arrays."""
    tree = ast.parse((ROOT / "core" / "transformer.py").read_text())
    trace = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trace")
    return frozenset(
        node.target.id
        for node in trace.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and "ndarray" in ast.unparse(node.annotation)
    )


def _reads_a_trace_array(node: ast.AST, fields: frozenset[str]) -> bool:
    while isinstance(node, ast.Subscript):  # trace.attentions[layer, head] is still the array
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr in fields


CACHES = {"cache_data", "cache_resource", "cache", "lru_cache"}


def array_operators_and_caches(text: str) -> list[str]:
    """Lines of a view that compute with an operator on arrays, or cache a result."""
    fields = trace_array_fields()
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.BinOp) and (
            isinstance(node.op, ast.MatMult)
            or _reads_a_trace_array(node.left, fields)
            or _reads_a_trace_array(node.right, fields)
        ):
            found.append(f"line {node.lineno}: {type(node.op).__name__}")
        elif isinstance(node, ast.Attribute) and node.attr in CACHES:
            found.append(f"line {node.lineno}: {node.attr}")
        elif isinstance(node, ast.Name) and node.id in CACHES:
            found.append(f"line {node.lineno}: {node.id}")
    return sorted(found)


def test_the_trace_array_fields_are_read_from_its_class():
    assert {"attentions", "hidden_states", "queries", "keys", "values", "static"} <= (
        trace_array_fields()
    )


@pytest.mark.parametrize("path", files("views"), ids=lambda p: p.name)
def test_views_compute_with_no_operator_on_arrays_and_cache_nothing(path):
    assert array_operators_and_caches(path.read_text()) == []


def test_the_operator_and_cache_rule_can_fail():
    view = (
        "context = trace.attentions[layer, head] @ trace.values[layer, head]\n"
        "half = trace.hidden_states[-1] / 2\n"
        "last = trace.n_tokens - 1\n"  # a count: allowed
        "@st.cache_data\n"
        "def mine(text): return text\n"
        "label = f'{weight:.2f}'\n"
    )
    assert array_operators_and_caches(view) == [
        "line 1: MatMult",
        "line 2: Div",
        "line 4: cache_data",
    ]
