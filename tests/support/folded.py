"""Which pages fold every figure drawn from the sentence behind a "predict, then see" question,
read from the views' own code rather than kept by hand.

A view draws a figure only through ui/display.py's show_* functions, and folds one only by
handing the function that draws it to ui/predict.py's ask_choice(..., reveal=...). So the page's
code, followed in the order it runs on the tab that reads the sidebar sentence, says it: the
page is folded when it reads the sentence, asks a question, and draws no figure of its own once
the sentence has been read (a figure drawn before that, such as a diagram of the weights,
cannot change with a typed sentence). tests/test_predict.py checks the answer against the pages
as they run headless: a typed sentence changes no figure of a folded page until it is answered.

The walk is deliberately small. It follows a view's statements in order, calls of the view's
own functions into their bodies, and widgets.section_tabs into the one section that is open. A
function handed to another call (ask_choice's reveal, widgets.folded's draw) is not followed:
that callee decides whether it runs, and both keep it folded until the visitor acts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURE_MODULE = "display"  # ui/display.py: every figure a view draws goes through its show_*
FIGURE_PREFIX = "show_"
QUESTION_CALL = "ask_choice"  # ui/predict.py: the one way a view folds a figure behind a question
INPUTS_CALL = "page_context"  # ui/state.py: `inputs, model = state.page_context()`
TABS_CALL = "section_tabs"  # ui/widgets.py: one section drawn at a time, from the SECTIONS dict
SECTIONS_NAME = "SECTIONS"


@dataclass
class PageWalk:
    """What a page does, in the order it runs, on the tab that reads the sentence."""

    reads_sentence: bool = False  # the sidebar's inputs were read
    asks: bool = False  # a "predict, then see" question was asked
    figure_after_reading: bool = False  # a figure was drawn, unfolded, once inputs were read

    @property
    def folded(self) -> bool:
        """Every figure that can change with the sentence waits behind a question."""
        return self.reads_sentence and self.asks and not self.figure_after_reading


def _attr(call: ast.Call) -> str:
    """The called name: "ask_choice" for predict.ask_choice(...), "draw" for draw()."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _receiver(call: ast.Call) -> str:
    """The module a function is called on: "display" for display.show_matrix(...)."""
    func = call.func
    return getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""


class _Walker:
    def __init__(self, tree: ast.Module, open_tab: str | None) -> None:
        self.tree = tree
        self.open_tab = open_tab
        self.walk = PageWalk()
        self.inputs = self._inputs_names(tree)
        self.sections = self._sections(tree)
        self.following: list[str] = []  # the functions being followed (no endless recursion)

    @staticmethod
    def _inputs_names(tree: ast.Module) -> set[str]:
        """The names the page gives the sidebar's inputs (the first of page_context's pair)."""
        names = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and _attr(node.value) == INPUTS_CALL
            ):
                target = node.targets[0]
                first = target.elts[0] if isinstance(target, ast.Tuple) else target
                if isinstance(first, ast.Name):
                    names.add(first.id)
        return names

    @staticmethod
    def _sections(tree: ast.Module) -> dict[str, ast.expr]:
        """The page's SECTIONS dict: tab label -> the expression naming its function."""
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", "") == SECTIONS_NAME
                and isinstance(node.value, ast.Dict)
            ):
                return {
                    key.value: value
                    for key, value in zip(node.value.keys, node.value.values, strict=True)
                    if isinstance(key, ast.Constant)
                }
        return {}

    def body(self, statements: list[ast.stmt], scope: dict[str, ast.FunctionDef]) -> None:
        scope = dict(scope)
        for statement in statements:
            if isinstance(statement, ast.FunctionDef):
                scope[statement.name] = statement  # defined, not run
            elif isinstance(statement, ast.ClassDef):
                continue
            else:
                self.node(statement, scope)

    def node(self, node: ast.AST, scope: dict[str, ast.FunctionDef]) -> None:
        """Visit node's parts in the order Python evaluates them (near enough for this walk)."""
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in self.inputs:
                self.walk.reads_sentence = True
            return
        if isinstance(node, ast.Call):
            self.call(node, scope)
            return
        if isinstance(node, (ast.Lambda, ast.FunctionDef)):
            return  # defined here, run later by whoever receives it
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            # a branch or loop body: its statements may define functions used further down
            for _field, value in ast.iter_fields(node):
                if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                    self.body(value, scope)
                elif isinstance(value, list):
                    for item in value:
                        if isinstance(item, ast.AST):
                            self.node(item, scope)
                elif isinstance(value, ast.AST):
                    self.node(value, scope)
            return
        for child in ast.iter_child_nodes(node):
            self.node(child, scope)

    def call(self, call: ast.Call, scope: dict[str, ast.FunctionDef]) -> None:
        name = _attr(call)
        if name == QUESTION_CALL:
            for part in [*call.args, *(k.value for k in call.keywords if k.arg != "reveal")]:
                self.node(part, scope)
            self.walk.asks = True
            return
        self.node(call.func, scope)
        for part in [*call.args, *(k.value for k in call.keywords)]:
            self.node(part, scope)
        if _receiver(call) == FIGURE_MODULE and name.startswith(FIGURE_PREFIX):
            if self.walk.reads_sentence:
                self.walk.figure_after_reading = True
        elif name == TABS_CALL:
            self.open_section(scope)
        elif isinstance(call.func, ast.Name) and name in scope:
            self.follow(scope[name], scope)

    def open_section(self, scope: dict[str, ast.FunctionDef]) -> None:
        """Run the section the page opens on: the sentence's tab, else the first."""
        if not self.sections:
            return
        label = self.open_tab if self.open_tab in self.sections else next(iter(self.sections))
        # every function the entry names (a model-dependent choice names two: both may run)
        for part in ast.walk(self.sections[label]):
            if isinstance(part, ast.Name) and part.id in scope:
                self.follow(scope[part.id], scope)

    def follow(self, function: ast.FunctionDef, scope: dict[str, ast.FunctionDef]) -> None:
        if function.name in self.following:
            return
        self.following.append(function.name)
        self.body(function.body, scope)
        self.following.pop()


def walk_page(source: str, open_tab: str | None = None) -> PageWalk:
    """What a view's code does on the tab labelled open_tab (its first tab when None)."""
    walker = _Walker(ast.parse(source), open_tab)
    walker.body(walker.tree.body, {})
    return walker.walk


def folded_by_a_question(
    pages: Iterable[str], sentence_tab: Mapping[str, Mapping[str, str]]
) -> frozenset[str]:
    """The pages (views/<page>.py) whose every figure drawn from the sentence waits behind a
    question on the tab that reads it (sentence_tab: the tab's URL parameter per page)."""
    found = set()
    for page in pages:
        tab = next(iter(sentence_tab.get(page, {}).values()), None)
        if walk_page((ROOT / page).read_text(), tab).folded:
            found.add(page)
    return frozenset(found)
