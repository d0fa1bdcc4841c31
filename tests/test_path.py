"""The course's one path (ui/path.py): every page once, in an order a learner can follow, with
Previous/Next on every page and the Overview's way in (AppTest); the browser side is
tests/test_browser_path.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT, assert_no_exception, run_page
from streamlit.source_util import page_icon_and_name

from ui import path

VIEWS = sorted(f"views/{p.name}" for p in (ROOT / "views").glob("*.py"))
# The URL paths pages had before the path was reordered: links shared since must still open them.
PUBLISHED_URL_PATHS = {
    "by_hand",
    "context",
    "qkv",
    "scaling_masking",
    "multi_head",
    "inside_layer",
    "heatmaps",
    "head_view",
    "information_flow",
    "explanations",
    "positional",
    "embeddings",
    "lab",
    "check",  # new: the course's check, before and after
}


def test_the_path_holds_every_page_once():
    files = [step.file for step in path.STEPS]
    assert sorted(files) == VIEWS  # every page script, none twice, none missing
    assert len(set(files)) == len(files)
    assert path.STEPS[0].file == "views/overview.py"


def test_app_builds_its_navigation_from_the_path_with_every_page_listed():
    """app.py registers no page of its own: st.navigation(path.navigation_pages(),
    expanded=True) (expanded: no "View N more" fold)."""
    tree = ast.parse((ROOT / "app.py").read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in {"navigation", "Page"}
    ]
    (navigation,) = calls
    assert navigation.func.attr == "navigation"
    assert ast.unparse(navigation.args[0]) == "path.navigation_pages()"
    assert {k.arg: ast.literal_eval(k.value) for k in navigation.keywords} == {"expanded": True}


def test_url_paths_are_the_ones_streamlit_derives_and_the_published_ones():
    for step in path.STEPS[1:]:
        assert path.url_path(step) == page_icon_and_name(Path(step.file))[1]
    assert path.url_path(path.STEPS[0]) == ""  # the default page lives at the app's root
    assert {path.url_path(step) for step in path.STEPS[1:]} == PUBLISHED_URL_PATHS
    for step in path.STEPS:
        assert path.step_at(path.url_path(step)) is step
        assert path.step_of(step.file) is step


def test_following_next_from_the_overview_visits_every_page_once():
    seen, step = [], path.STEPS[0]
    while step is not None:
        assert step not in seen
        seen.append(step)
        step = path.neighbours(step)[1]
    assert seen == list(path.STEPS)
    # and Previous walks the same path back
    back, step = [], path.STEPS[-1]
    while step is not None:
        back.append(step)
        step = path.neighbours(step)[0]
    assert back == list(reversed(path.STEPS))


def test_position_comes_where_it_is_first_needed():
    """Right after queries and keys, before the pages whose heads look at neighbouring words."""
    order = [Path(step.file).stem for step in path.STEPS]
    assert order.index("positional") == order.index("qkv") + 1
    assert order.index("positional") < order.index("scaling_masking") < order.index("multi_head")
    assert order.index("positional") < order.index("heatmaps")


def test_a_learner_sees_the_order_in_the_titles_and_groups():
    """Numbers rise along the path (2b after 2), and each sidebar group is one run of the path,
    so the sidebar's top-to-bottom order is the path's."""
    marks = [path.mark(step) for step in path.STEPS]
    assert marks[:2] == ["⌂", "?"]  # the Overview, then the check the course starts and ends on
    numbers = [re.fullmatch(r"(\d+)([a-z]?)", mark) for mark in marks[2:]]
    assert all(numbers), marks
    keys = [(int(m.group(1)), m.group(2)) for m in numbers]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    flattened = [step for steps in path.groups().values() for step in steps]
    assert flattened == list(path.STEPS)


def test_every_next_says_why_in_a_few_words():
    for step in path.STEPS[:-1]:
        assert 20 <= len(step.next_because) <= 100, step.title
        assert step.next_because.endswith("."), step.title
    assert path.STEPS[-1].next_because == ""


def test_parts_are_known_and_each_links_to_a_page_that_explains_it():
    for step in path.STEPS:
        assert step.parts and set(step.parts) <= set(path.PART_KEYS), step.title
    assert set(path.PART_HOME) == set(path.PART_KEYS)
    for part, home in path.PART_HOME.items():
        assert part in path.step_of(home).parts, (part, home)


# ---- the pages, headless ------------------------------------------------------------------------
def _page_links(at) -> list[tuple[str, str]]:
    """(label, url path) of the st.page_link elements, in page order."""
    return [(link.proto.label, link.proto.page) for link in at.get("page_link")]


def _in_order(block) -> list[str]:
    """The main area's elements in page order, as "type:text" (html: its markup; page_link and
    title: the label; others: the type alone), containers walked depth first."""
    shown = []
    for child in getattr(block, "children", {}).values():
        if child.type == "html":
            shown.append("html:" + child.proto.body)
        elif child.type == "page_link":
            shown.append("page_link:" + child.proto.label)
        elif child.type == "title":
            shown.append("title:" + child.value)
        else:
            shown.append(child.type + ":")
        shown.extend(_in_order(child))
    return shown


def _figure(at, name: str) -> str:
    """The markup of the st.html element whose figure is `name` (data-figure)."""
    (body,) = [
        element.proto.body
        for element in at.get("html")
        if f'data-figure="{name}"' in element.proto.body
    ]
    return body


def test_overview_starts_the_course_near_the_top_and_every_page_has_previous_next():
    at = run_page("views/overview.py")
    assert_no_exception(at)
    links = _page_links(at)
    first = path.STEPS[1]
    assert links[0] == (f"Start the course: {first.title}", path.url_path(first))
    assert links[-1] == (f"Next: {first.title}", path.url_path(first))
    # the map first, then the page's title and introduction, the way in, the head's figure
    shown = [item for item in _in_order(at.main) if item != "empty:"]  # (preload's slot)
    start = shown.index(f"page_link:Start the course: {first.title}")
    assert shown[0].startswith('html:<nav class="ae-map"')
    assert shown.index("title:Attention Explorer") < start < shown.index("subheader:")
    assert f"1 of {len(path.STEPS)} pages visited" in _figure(at, "path-progress")

    at.switch_page("views/positional.py")
    at.run()
    assert_no_exception(at)
    qkv, scaling = path.step_of("views/qkv.py"), path.step_of("views/scaling_masking.py")
    assert _page_links(at)[-2:] == [
        (f"Previous: {qkv.title}", "qkv"),
        (f"Next: {scaling.title}", "scaling_masking"),
    ]
    assert path.step_of("views/positional.py").next_because in [c.value for c in at.caption]
    # the session remembers both pages: the Overview's part has its tick now
    progress = _figure(at, "path-progress")
    assert f"2 of {len(path.STEPS)} pages visited" in progress
    assert 'title="Overview (visited)"' in progress
    model_map = _figure(at, "model-map")
    assert re.search(r'class="ae-part ae-here[^"]*"[^>]*aria-current="page"', model_map)
    # one numbering: the map's line, the title, the progress row and Previous/Next agree
    assert "Course page 2b of 0–11: Positional encoding" in model_map
    assert re.search(r'class="ae-step[^"]*ae-now[^"]*"[^>]*>2b<', progress)


def test_the_header_numbers_a_page_as_its_title_does():
    """The line above the map names a page by the number in its title (0 … 11, with 2b), not
    by its index on the path (which made "Step 4 of 14" of the page titled 2)."""
    numbered = [s.title for s in path.STEPS if re.match(r"\d+b? · ", s.title)]
    # every page but the Overview and the check (which stand outside the course) has a number
    unnumbered = [s.file for s in path.STEPS if s.title not in numbered]
    assert unnumbered == ["views/overview.py", path.CHECK_FILE]
    first, last = numbered[0].split(" · ")[0], numbered[-1].split(" · ")[0]
    assert (first, last) == ("0", "11")
    for step in path.STEPS[2:]:
        number, name = step.title.split(" · ", 1)
        assert path.where(step) == f"Course page {number} of 0–11: {name}"
    assert path.where(path.STEPS[0]) == "Overview: the course's pages run 0–11"
    assert path.where(path.STEPS[1]) == "Check, before and after: the course's pages run 0–11"


def test_every_page_title_is_its_title_on_the_path():
    """A page's heading says what the sidebar and Previous/Next call it; the Overview's heading
    names the app, the page every visit starts on."""
    headings = {}
    for step in path.STEPS[1:]:
        tree = ast.parse((ROOT / step.file).read_text())
        headings[step.file] = [
            call.args[0].value
            for call in ast.walk(tree)
            if isinstance(call, ast.Call)
            and getattr(call.func, "attr", None) in ("title", "page_title")  # widgets.page_title
            and call.args
            and isinstance(call.args[0], ast.Constant)
        ]
    assert headings == {step.file: [step.title] for step in path.STEPS[1:]}


def test_a_page_that_ends_early_still_leads_on():
    """An empty sentence ends Attention heatmaps after its message (state.PageEnds), and
    Previous/Next still follow."""
    at = run_page("views/heatmaps.py", text="   ")
    assert_no_exception(at)
    assert [i.value for i in at.info], "the page says why it ends"
    index = path.STEPS.index(path.step_of("views/heatmaps.py"))
    before, after = path.STEPS[index - 1], path.STEPS[index + 1]
    assert _page_links(at)[-2:] == [
        (f"Previous: {before.title}", path.url_path(before)),
        (f"Next: {after.title}", path.url_path(after)),
    ]
    assert not at.get("plotly_chart"), "nothing after the message"
