"""The rooms of the house: pages -> ui -> core, and nothing flows back."""

from __future__ import annotations

import ast
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


def _module_string_constants(tree: ast.Module) -> set[str]:
    """Names only ever assigned a plain string literal (no f-string, no concatenation).

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
            is_literal = (
                isinstance(node, ast.Assign)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            )
            (literal if is_literal else other).add(target.id)
    return literal - other


def test_no_user_text_is_rendered_as_html():
    """unsafe_allow_html and components.html are XSS doors when user text passes through them.

    st.html may only show a fixed string of the module itself (a style sheet, say): an argument
    built at run time could carry a visitor's text. A fixed script (a constant named *_JS) may
    run with unsafe_allow_javascript=True, the one keyword allowed.
    """
    for path in [*files("views"), *files("ui"), ROOT / "app.py"]:
        source = path.read_text()
        assert "unsafe_allow_html=True" not in source, path.name
        assert "components.html" not in source and "components.v1" not in source, path.name
        tree = ast.parse(source)
        constants = _module_string_constants(tree)
        for call in _html_calls(tree):
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


def test_the_html_rule_can_fail():
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
    first, second, third = _html_calls(script)
    assert _allowed_keywords(first, "X_JS")
    assert not _allowed_keywords(second, "CSS") and not _allowed_keywords(third, "X_JS")


def test_runtime_path_never_imports_transformers():
    """transformers costs seconds to import; the app needs only tokenizers and its own encoder."""
    import subprocess
    import sys

    script = (
        "import sys, core, ui.charts, ui.widgets\n"
        "core.load_model('minilm').run('the bank of the river', 'money grows')\n"
        "assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=120)
