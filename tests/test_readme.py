"""README.md's page table against the one page manifest (ui/path.py): every page, in the course's
order, under its own title, with modules that exist."""

from __future__ import annotations

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
