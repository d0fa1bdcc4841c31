"""The course: one ordered path through every page, defined here once.

app.py builds its navigation from STEPS (sidebar order, titles, icons, groups, and what the
shared sidebar does on each page: the one page manifest), draws Previous and Next under every
page from it, and the model map (ui/model_map.py) highlights the parts of
the model each step explains (Step.parts) and links every part to the step that teaches it
(PART_HOME). A page keeps its file name, and with it its URL: links shared before still open it.

Imports nothing but streamlit: app.py reads it before the slow imports (ui/preload.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import streamlit as st


@dataclass(frozen=True)
class Step:
    """One page of the course, in path order."""

    file: str  # the page's script, "views/qkv.py"; its stem is its URL path
    title: str  # its label in the sidebar and in Previous/Next
    icon: str
    group: str  # the sidebar section it is listed under
    parts: tuple[str, ...]  # the model parts it explains (model_map_chart.PARTS keys)
    next_because: str  # why the step after it comes next ("" for the last step)
    # What the shared sidebar and start-up do for this page (app.py reads them, nothing else does):
    word_pieces: bool = False  # draws word pieces: the sidebar's word-level switch applies
    own_switches: bool = False  # never runs the sidebar's √d_k and mask switches (greyed out)
    own_text: bool = False  # has sentences of its own: the sidebar's boxes are greyed out
    plotly_free: bool = False  # draws without plotly at any length: no plotly.js fetched early


# The model parts, in the order data flows through them (ui/model_map_chart.py draws them).
PART_KEYS = (
    "pieces",
    "table",
    "position",
    "qkv",
    "scores",
    "softmax",
    "mix",
    "w_o",
    "residual_norm",
    "ffn",
    "layers",
    "output",
)

# The check stands at the start and is taken again at the end: the last step's way on leads back
# to it, on the tab of its second round (views/check.py's SECTIONS).
CHECK_FILE = "views/check.py"
CHECK_AFTER_TAB = "After the course"  # the label of its second round's tab
CHECK_TAB_KEY = "check_tab"  # the URL parameter that holds the check's open tab

# Position comes right after queries and keys: a dot product of two vectors cannot tell where
# their words stand, and from 3 · Scaling and masking on, pages lean on heads that look at the
# previous or next word. The Explore, Explain and Lab pages follow the mechanism they look at.
STEPS: tuple[Step, ...] = (
    Step(
        "views/overview.py",
        "Overview",
        ":material/home:",
        "Start",
        ("pieces", "softmax"),
        "First, a short check: answer it now, and again at the end of the course.",
        plotly_free=True,
    ),
    Step(
        CHECK_FILE,
        "Check, before and after",
        ":material/fact_check:",
        "Start",
        ("scores", "softmax", "position", "w_o", "residual_norm"),
        "Start small: four words with four numbers each, attention worked out by hand.",
        own_switches=True,
    ),
    Step(
        "views/by_hand.py",
        "0 · Attention by hand",
        ":material/edit_note:",
        "Learning path",
        ("scores", "softmax", "mix"),
        "The same weighted average, now on the model's own word vectors.",
        own_switches=True,
        own_text=True,
    ),
    Step(
        "views/context.py",
        "1 · Context from first principles",
        ":material/calculate:",
        "Learning path",
        ("table", "scores", "softmax", "mix"),
        "One vector doing three jobs is too little: learned projections split them.",
        own_switches=True,
        own_text=True,
    ),
    Step(
        "views/qkv.py",
        "2 · Queries, keys and values",
        ":material/key:",
        "Learning path",
        ("qkv", "scores", "softmax", "mix"),
        "A query–key product cannot see word order: how positions get into the vectors.",
    ),
    Step(
        "views/positional.py",
        "2b · Positional encoding",
        ":material/pin_drop:",
        "Learning path",
        ("position",),
        "With order in place, two controls on the scores: the √d_k scale and masks.",
    ),
    Step(
        "views/scaling_masking.py",
        "3 · Scaling and masking",
        ":material/thermostat:",
        "Learning path",
        ("scores", "softmax"),
        "One softmax makes one mixture: a layer runs several heads and joins them.",
        own_switches=True,
    ),
    Step(
        "views/multi_head.py",
        "4 · Multi-head attention",
        ":material/view_module:",
        "Learning path",
        ("mix", "w_o"),
        "Heads are half of a layer: the residual stream, the norms and the feed-forward around them.",
    ),
    Step(
        "views/inside_layer.py",
        "5 · Inside a layer",
        ":material/layers:",
        "Learning path",
        ("w_o", "residual_norm", "ffn", "layers"),
        "The whole mechanism is in place: see every head of every layer on your sentence.",
    ),
    Step(
        "views/heatmaps.py",
        "6 · Attention heatmaps",
        ":material/grid_on:",
        "Explore the model",
        ("softmax", "layers"),
        "The same weights drawn as lines between words, for one sentence or a pair.",
        word_pieces=True,
    ),
    Step(
        "views/head_view.py",
        "7 · Head view",
        ":material/linear_scale:",
        "Explore the model",
        ("softmax",),
        "Attention moves information: where it leaves each word's vector, layer by layer.",
        word_pieces=True,
    ),
    Step(
        "views/embeddings.py",
        "8 · Embedding projections",
        ":material/scatter_plot:",
        "Explore the model",
        ("table", "layers", "output"),
        "From single words to the whole sentence: which inputs its meaning is built from.",
    ),
    Step(
        "views/information_flow.py",
        "9 · Where the meaning comes from",
        ":material/account_tree:",
        "Explain",
        ("residual_norm", "layers", "output"),
        "Rollout and flow are two answers of several: compare them with gradients, and test them.",
        word_pieces=True,
    ),
    Step(
        "views/explanations.py",
        "10 · Explanations side by side",
        ":material/balance:",
        "Explain",
        ("pieces", "output"),
        "Last, train one attention head from scratch and watch its pattern appear.",
        word_pieces=True,
    ),
    Step(
        "views/lab.py",
        "11 · Attention, learned",
        ":material/model_training:",
        "Lab",
        ("qkv", "scores", "softmax"),
        "",
        own_switches=True,
        own_text=True,
    ),
)

# The step that teaches each part of the model: clicking the part on the map opens it.
PART_HOME = {
    "pieces": "views/overview.py",
    "table": "views/context.py",
    "position": "views/positional.py",
    "qkv": "views/qkv.py",
    "scores": "views/scaling_masking.py",
    "softmax": "views/by_hand.py",
    "mix": "views/context.py",
    "w_o": "views/multi_head.py",
    "residual_norm": "views/inside_layer.py",
    "ffn": "views/inside_layer.py",
    "layers": "views/embeddings.py",
    "output": "views/information_flow.py",
}

_VISITED_KEY = "_visited_steps"  # session state: the files of the steps this visitor has opened


def url_path(step: Step) -> str:
    """The step's URL path as Streamlit derives it: "" for the first (default) page, else the
    file's stem (st.Page's default)."""
    return "" if step is STEPS[0] else PurePosixPath(step.file).stem


def step_at(path: str) -> Step:
    """The step whose URL path is `path` ("" for the Overview); KeyError for none."""
    for step in STEPS:
        if url_path(step) == path:
            return step
    raise KeyError(path)


def step_of(file: str) -> Step:
    """The step of the page script `file` ("views/qkv.py"); KeyError for none."""
    for step in STEPS:
        if step.file == file:
            return step
    raise KeyError(file)


def neighbours(step: Step) -> tuple[Step | None, Step | None]:
    """(previous, next) of a step on the path; None at either end."""
    index = STEPS.index(step)
    before = STEPS[index - 1] if index > 0 else None
    after = STEPS[index + 1] if index + 1 < len(STEPS) else None
    return before, after


def groups(steps: Sequence[Step] = STEPS) -> dict[str, list[Step]]:
    """The sidebar's sections in path order, each with its steps in path order."""
    sections: dict[str, list[Step]] = {}
    for step in steps:
        sections.setdefault(step.group, []).append(step)
    return sections


# ---- Streamlit ---------------------------------------------------------------------------------
def navigation_pages() -> dict[str, list[st.Page]]:
    """st.navigation's pages: every step, grouped, in path order; the first is the default."""
    return {
        group: [
            st.Page(step.file, title=step.title, icon=step.icon, default=step is STEPS[0])
            for step in steps
        ]
        for group, steps in groups().items()
    }


def visit(step: Step) -> frozenset[str]:
    """Note that this visitor opened `step` (kept for the session); the files of every step
    opened so far, this one included."""
    visited = set(st.session_state.get(_VISITED_KEY, ()))
    visited.add(step.file)
    st.session_state[_VISITED_KEY] = frozenset(visited)
    return frozenset(visited)


def visited() -> frozenset[str]:
    """The files of the steps this visitor has opened in this session."""
    return frozenset(st.session_state.get(_VISITED_KEY, ()))


def start_button() -> None:
    """The Overview's way into the course: a link to the first step after it, with why."""
    first = STEPS[1]
    with st.container(key="ae_start_course"):  # styled by ui/model_map.py's COURSE_CSS
        st.page_link(
            first.file,
            label=f"Start the course: {first.title}",
            icon=":material/play_arrow:",
            help=STEPS[0].next_because,
        )


def previous_next(step: Step) -> None:
    """Previous and Next under a page: links to its neighbours on the path, Next with a line
    saying why it comes after this one."""
    before, after = neighbours(step)
    st.divider()
    back_column, next_column = st.columns(2)
    with back_column:
        if before is not None:
            st.page_link(
                before.file, label=f"Previous: {before.title}", icon=":material/arrow_back:"
            )
    with next_column:
        if after is not None:
            st.page_link(after.file, label=f"Next: {after.title}", icon=":material/arrow_forward:")
            st.caption(step.next_because)
        else:
            st.page_link(
                CHECK_FILE,
                label="End of the course: the check again",
                icon=":material/fact_check:",
                query_params={CHECK_TAB_KEY: CHECK_AFTER_TAB},
            )
            st.caption("The same questions: now with the answers, beside your first ones.")


def mark(step: Step) -> str:
    """A step's short mark in the progress row: its number ("2b"), ? for the check, or ⌂ for
    the Overview (a visited step's box adds a tick, so the check's mark is not one)."""
    number, separator, _ = step.title.partition(" · ")
    if separator:
        return number
    return "?" if step.file == CHECK_FILE else "⌂"


def where(step: Step) -> str:
    """Where a page sits in the course, in the one numbering the titles, the progress row and
    Previous/Next use: "Course page 2 of 0–11: Queries, keys and values" (the page's own number,
    never its index among the steps: an inserted page such as 2b would shift every index)."""
    numbered = [s for s in STEPS if " · " in s.title]
    first, last = mark(numbered[0]), mark(numbered[-1])
    number, separator, name = step.title.partition(" · ")
    if not separator:  # the Overview and the check stand outside the numbered pages
        return f"{step.title}: the course's pages run {first}–{last}"
    return f"Course page {number} of {first}–{last}: {name}"
