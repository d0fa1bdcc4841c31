"""Every page and every tab rendered once per family, and the text a visitor reads on each.

A render is the expensive part (a page of AppTest per tab, ~40 s a family on one core), so each
family's pages are rendered once per test process and every test that reads them (the family
facts, the decoder pages' "nothing raises") shares the same render.

What counts as visible text: every string field a visitor reads in the page's element tree
(Markdown, captions, alerts, headings, LaTeX, expander and tab labels, widget labels, help texts,
options), the titles and trace names of every plotly figure, and the text of every HTML figure
with its tags removed. Character references are decoded, as the browser shows them.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT, answer_every_question, each_tab, page_paths, section_labels
from streamlit.testing.v1 import AppTest
from tiny_families import write_tiny_family

TEXT = "the river bank flows past the old mill, and money grows in the bank."
SEED = 7  # the decoder pages' checkpoints too: one folder per family per process

# proto fields that hold what a visitor reads (a markdown's body, a widget's label and help, ...)
_TEXT_FIELDS = {"body", "label", "help", "caption", "title", "text", "message", "placeholder"}
_LIST_FIELDS = {"options"}
_TAG = re.compile(r"<style.*?</style>|<script.*?</script>|<[^>]+>", re.S)


@dataclass(frozen=True)
class TabRender:
    """One page with one tab open (or a page without tabs), as read after the run."""

    page: str
    tab: str | None  # the open tab's label; None for the page as it first opens
    texts: tuple[str, ...]  # every visible string, decoded
    n_tabs: int  # tabs the page draws
    exceptions: tuple[str, ...]
    errors: tuple[str, ...]  # st.error messages (a model that did not load shows one)
    sidebar_toggles: tuple[str, ...]


@functools.cache
def family_folder(family: str) -> Path:
    """A tiny random checkpoint of `family`, written once per process."""
    root = Path(tempfile.mkdtemp(prefix=f"facts-{family}-"))
    return write_tiny_family(root / "model", family, seed=SEED)


def run_on(folder: Path, page: str, state: dict[str, object] | None = None) -> AppTest:
    """app.py on `page` with the folder's model loaded (as after its Load button)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    answer_every_question(at)  # the figures questions fold are drawn
    at.session_state["model"] = "other"
    at.session_state["custom_model"] = str(folder)
    at.session_state["_confirmed_custom_model"] = str(folder)  # what the Load button sets
    at.session_state["text"] = TEXT
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    if page != page_paths()[0]:
        at.switch_page(page)
        at.run()
    return at


@functools.cache
def renders(family: str) -> tuple[TabRender, ...]:
    """Every page of the course, then each of its tabs, with a tiny `family` model loaded."""
    from ui import models

    folder = family_folder(family)
    before = os.environ.get("ATTENTION_EXPLORER_LOCAL_FOLDERS")
    os.environ["ATTENTION_EXPLORER_LOCAL_FOLDERS"] = "1"  # a local user's server
    models.policy.clear()
    try:
        rendered = []
        for page in page_paths():
            labels = [None, *section_labels(page)]
            for label, at in zip(labels, each_tab(run_on(folder, page), page), strict=False):
                rendered.append(_read(page, label, at))
        return tuple(rendered)
    finally:
        if before is None:
            os.environ.pop("ATTENTION_EXPLORER_LOCAL_FOLDERS", None)
        else:
            os.environ["ATTENTION_EXPLORER_LOCAL_FOLDERS"] = before
        models.policy.clear()


def _read(page: str, tab: str | None, at: AppTest) -> TabRender:
    return TabRender(
        page=page,
        tab=tab,
        texts=tuple(visible_texts(at)),
        n_tabs=len(at.tabs),
        exceptions=tuple(str(e.value) for e in at.exception),
        errors=tuple(str(e.value) for e in at.error),
        sidebar_toggles=tuple(toggle.label for toggle in at.sidebar.toggle),
    )


def visible_texts(at: AppTest) -> list[str]:
    """Every string a visitor reads on the page as run, decoded (see the module's docstring)."""
    found: list[str] = []

    def walk(node: object) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields"):
            _strings_of(proto, found)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return [html.unescape(text).replace("\u2060", "") for text in found if text.strip()]


def _strings_of(message: object, found: list[str]) -> None:
    for field, value in message.ListFields():
        name = field.name
        if name == "spec":  # a plotly figure's JSON: its titles and trace names
            found.extend(_figure_texts(value))
        elif name == "body" and "<" in str(value):  # an HTML figure or block: its text only
            found.append(_TAG.sub(" ", str(value)))
        elif field.type == field.TYPE_MESSAGE:
            for item in [value] if hasattr(value, "ListFields") else value:  # one, or repeated
                _strings_of(item, found)
        elif name in _TEXT_FIELDS and isinstance(value, str):
            found.append(value)
        elif name in _LIST_FIELDS and not isinstance(value, str):
            found.extend(str(item) for item in value)


def _figure_texts(spec: str) -> list[str]:
    try:
        figure = json.loads(spec)
    except (TypeError, ValueError):
        return []
    texts: list[str] = []

    def title_of(holder: object) -> None:
        title = holder.get("title") if isinstance(holder, dict) else None
        text = title.get("text") if isinstance(title, dict) else title
        if isinstance(text, str):
            texts.append(text)

    layout = figure.get("layout", {})
    title_of(layout)
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis", "coloraxis")):
            title_of(axis)
    for annotation in layout.get("annotations", []) or []:
        if isinstance(annotation.get("text"), str):
            texts.append(annotation["text"])
    for trace in figure.get("data", []):
        if isinstance(trace.get("name"), str):
            texts.append(trace["name"])
    return texts
