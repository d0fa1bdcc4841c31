"""README.md's page table against the one page manifest (ui/path.py): every page, in the course's
order, under its own title, with modules that exist, and every page module its view imports."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

# A row of the table: | Title (`stem`) | what it shows | `ui`, `modules` | `core`, `modules` |
ROW = re.compile(
    r"^\| (?P<title>[^|]+?) \(`(?P<stem>\w+)`\) \|[^|]*\|(?P<ui>[^|]*)\|(?P<core>[^|]*)\|$"
)
NUMBER_WORDS = dict(
    enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
)


def page_rows(readme: str) -> list[re.Match[str]]:
    """The rows of the README's table of pages, in the order written."""
    return [match for line in readme.splitlines() if (match := ROW.match(line))]


def manifest() -> list[tuple[str, str]]:
    """(title, stem) of every page in the course's order, from ui/path.py."""
    from ui import path

    return [
        (step.title, step.file.removeprefix("views/").removesuffix(".py")) for step in path.STEPS
    ]


def table_faults(readme: str, pages: list[tuple[str, str]]) -> list[str]:
    """What the README's page table says that the manifest does not: a page missing, added,
    moved or retitled, or a module named in a row that does not exist."""
    rows = page_rows(readme)
    written = [(row["title"], row["stem"]) for row in rows]
    faults = [] if written == pages else [f"the table lists {written}, the manifest {pages}"]
    for row in rows:
        for room in ("ui", "core"):
            for module in re.findall(r"`(\w+)`", row[room]):
                if not (ROOT / room / f"{module}.py").exists():
                    faults.append(f"{row['stem']}: {room}/{module}.py does not exist")
    return faults


def modules_imported(view: str, package: str) -> set[str]:
    """The modules of `package` a view imports: `from ui import display` or `from ui.display
    import show_matrix` both give display."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(view)):
        if isinstance(node, ast.ImportFrom) and node.module == package:
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
            imported.add(node.module.split(".")[1])
    return imported


def page_modules_imported(view: str, pages: set[str]) -> set[str]:
    """The ui modules a view imports that belong to a page (its name, or a page's name and "_"),
    or are a figure or run module several pages share (…_charts, …_runs)."""
    return {
        name
        for name in modules_imported(view, "ui")
        if name.endswith(("_charts", "_runs"))
        or any(name == page or name.startswith(page + "_") for page in pages)
    }


def math_modules_imported(view: str, core_modules: dict[str, str]) -> set[str]:
    """The core modules a view imports that hold math: a function of their own (core/errors.py,
    exceptions only, does not). core_modules: stem -> source."""
    return {
        name
        for name in modules_imported(view, "core")
        if name in core_modules
        and any(isinstance(n, ast.FunctionDef) for n in ast.parse(core_modules[name]).body)
    }


def unlisted_modules(
    readme: str, views: dict[str, str], core_modules: dict[str, str] | None = None
) -> list[str]:
    """ "page: module" for every page module (ui/) and every math module (core/) a view (stem ->
    source) imports that its row of the README's table leaves out: a newcomer reads the row to
    find where a page's figures and math live."""
    found = []
    for row in page_rows(readme):
        view = views.get(row["stem"], "")
        listed = set(re.findall(r"`(\w+)`", row["ui"]))
        used = page_modules_imported(view, set(views))
        found += [f"{row['stem']}: {name}" for name in sorted(used - listed)]
        listed_math = set(re.findall(r"`(\w+)`", row["core"]))
        used_math = math_modules_imported(view, core_modules or {})
        found += [f"{row['stem']}: core/{name}" for name in sorted(used_math - listed_math)]
    return found


def test_every_page_module_a_view_imports_is_in_its_row():
    readme = (ROOT / "README.md").read_text()
    views = {path.stem: path.read_text() for path in sorted((ROOT / "views").glob("*.py"))}
    core_modules = {path.stem: path.read_text() for path in sorted((ROOT / "core").glob("*.py"))}
    assert unlisted_modules(readme, views, core_modules) == []
    # the rule can fail: a module borrowed from another page, left out of the row
    row = "| Overview (`overview`) | a head | `overview_charts` | `transformer` |\n"
    view = (
        "from ui import display, overview_charts, qkv_runs\n"
        "from core import errors, head_stats\n"  # math, and exceptions only
        "from core.transformer import Trace\n"
    )
    assert unlisted_modules(row, {"overview": view, "qkv": ""}, core_modules) == [
        "overview: qkv_runs",
        "overview: core/head_stats",
    ]


def test_the_readme_lists_every_page_of_the_manifest_in_order():
    readme = (ROOT / "README.md").read_text()
    pages = manifest()
    assert table_faults(readme, pages) == []
    count = re.search(r"(\w+) pages lead from", readme)
    assert count and count[1].lower() == NUMBER_WORDS[len(pages)], "the README counts the pages"


def test_the_table_rule_can_fail():
    pages = [("Overview", "overview"), ("0 · By hand", "by_hand")]
    good = (
        "| page | shows | `ui/` | `core/` |\n|---|---|---|---|\n"
        "| Overview (`overview`) | a head | `display` | `transformer` |\n"
        "| 0 · By hand (`by_hand`) | sums | `by_hand_charts` | `by_hand` |\n"
    )
    assert table_faults(good, pages) == []
    assert table_faults(good, pages[::-1])  # out of order
    assert table_faults(good.replace("0 · By hand (", "0 · Hand ("), pages)  # retitled
    assert table_faults(good, [*pages, ("1 · Context", "context")])  # a page missing
    assert table_faults(good.replace("`by_hand_charts`", "`by_hand_figures`"), pages)
