"""Which widget keys live in the URL: read from the source, so a new control is covered at once.

A widget is URL-bound when its call says bind="query-params", or when it goes through one of the
app's helpers that always bind (ui/widgets.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINDING_HELPERS = {
    "section_tabs",
    "token_picker",
    "whole_number_input",
    "_layer_switch",  # ui/sidebar.py: the switches for every layer
}  # ui/widgets.py: bound by design


def bound_keys(path: Path) -> list[str]:
    """Keys of every URL-bound widget call in one file (f-string keys without their prefix)."""
    keys = []
    tree = ast.parse(path.read_text())
    inside_helpers = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef) and function.name in BINDING_HELPERS
        for node in ast.walk(function)
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        kwargs = {k.arg: k.value for k in node.keywords}
        bind, key = kwargs.get("bind"), kwargs.get("key")
        binds = isinstance(bind, ast.Constant) and bind.value == "query-params"
        helper = getattr(node.func, "attr", getattr(node.func, "id", "")) in BINDING_HELPERS
        if not (binds or helper):
            continue
        if isinstance(key, ast.Constant):
            keys.append(str(key.value))
        elif isinstance(key, ast.JoinedStr):  # f"{key_prefix}layer": the plain default
            keys.append("".join(str(v.value) for v in key.values if isinstance(v, ast.Constant)))
        elif id(node) not in inside_helpers:  # there the BINDING_HELPERS pass their key through
            # A key computed at run time cannot be read here, so no hostile-URL test would
            # reach that widget: keep keys literal.
            raise ValueError(f"{path.name}:{node.lineno}: a URL-bound widget with a computed key")
    return keys


def url_bound_keys() -> list[str]:
    """Every URL-bound key in app.py, views/ and ui/."""
    files = [ROOT / "app.py", *sorted(ROOT.glob("views/*.py")), *sorted(ROOT.glob("ui/*.py"))]
    return sorted({key for path in files for key in bound_keys(path)})
