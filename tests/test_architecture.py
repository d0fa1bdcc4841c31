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


def test_no_user_text_is_rendered_as_html():
    """unsafe_allow_html and components.html are XSS doors when user text passes through them."""
    for path in [*files("views"), *files("ui"), ROOT / "app.py"]:
        source = path.read_text()
        assert "unsafe_allow_html=True" not in source, path.name
        assert "components.html" not in source and "st.html" not in source, path.name


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
