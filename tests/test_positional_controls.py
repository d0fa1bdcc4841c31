"""Every control a Positional tab shows acts on that tab: moved, it changes what the tab draws."""

from __future__ import annotations

from conftest import assert_no_exception, open_tab, run_page
from streamlit.testing.v1 import element_tree

POSITIONAL = "views/positional.py"
# The kinds of control a tab of this page draws (the predict pills are button groups).
CONTROL_KINDS = ("slider", "select_slider", "number_input", "radio", "multiselect", "button_group")


def the_tab(at, label: str) -> element_tree.Block:
    """The open tab's block: the only one with content (widgets.section_tabs)."""
    return next(tab for tab in at.tabs if tab.label == label)


def drawn(block: element_tree.Block) -> list[str]:
    """Everything a block draws but its controls: text, formulas, numbers, tables and figures,
    as the protos sent to the browser, in order."""
    shown: list[str] = []

    def walk(node) -> None:
        if isinstance(node, element_tree.Widget):
            return  # a control's own value: moving it changes it by definition
        if isinstance(node, element_tree.Block):
            for child in node.children.values():
                walk(child)
            return
        shown.append(str(node.proto))

    walk(block)
    return shown


def controls(block: element_tree.Block) -> list:
    """The tab's controls, each once (a pill group is listed as a button group and as pills)."""
    found = {}
    for kind in CONTROL_KINDS:
        for widget in block.get(kind):
            found.setdefault(widget.key, widget)
    return list(found.values())


def another_value(widget) -> object:
    """A value the control offers other than its current one."""
    if widget.type == "multiselect":
        chosen = {str(value) for value in widget.value}  # options come as text, values not
        return [option for option in widget.options if option not in chosen][:1]
    if widget.type == "number_input":
        return widget.value + 1 if widget.max is None or widget.value < widget.max else widget.min
    if widget.type == "button_group":  # a prediction's pills: their values are option numbers
        return next(index for index in range(len(widget.options)) if index != widget.value)
    if widget.type in ("radio", "select_slider"):
        return next(option for option in widget.options if option != widget.value)
    return widget.min if widget.value != widget.min else widget.max  # a slider


def moved_controls(at, labels: list[str]) -> dict[str, list[str]]:
    """Tab by tab, each control shown moved once: asserts the tab then draws something else
    (and that a rerun with nothing moved draws the same, so a difference is the control's
    doing). Returns the keys moved, by tab."""
    moved: dict[str, list[str]] = {}
    for label in labels:
        open_tab(at, "pos_section", label)
        assert_no_exception(at)
        before = drawn(the_tab(at, label))
        at.run()
        assert drawn(the_tab(at, label)) == before, f"{label}: the same run draws the same"
        for key in [widget.key for widget in controls(the_tab(at, label))]:
            widget = next(w for w in controls(the_tab(at, label)) if w.key == key)
            before = drawn(the_tab(at, label))
            value = another_value(widget)
            widget.set_value(value).run()
            assert_no_exception(at)
            assert drawn(the_tab(at, label)) != before, f"{label}: {widget.label} = {value!r}"
            moved.setdefault(label, []).append(key)
    return moved


def test_every_control_on_every_positional_tab_changes_that_tab():
    """Every tab with a learned position table (the default model). Tab 3 once showed the
    d_model slider above a sinusoid and a table at the model's own width, and tab 4 above the
    figures its question keeps folded: moving it changed nothing there."""
    at = run_page(POSITIONAL)
    assert_no_exception(at)
    moved = moved_controls(at, [tab.label for tab in at.tabs])
    assert moved["3 · Learned"] == ["pos_length"]  # the sinusoid beside the table: its width
    assert "pos_dmodel" not in moved["4 · Near positions"]
    for label in ("1 · Sinusoid", "2 · Binary", "5 · Rotation"):
        assert {"pos_length", "pos_dmodel"} <= set(moved[label]), label
    assert "6 · Adding" not in moved  # a tab without controls


def test_every_control_on_a_rotary_models_own_tab_changes_it(local_folders):
    """Tab 3 of a model with rotary positions checks its turn on a layer and head, moved by s:
    each of its sliders changes what it draws."""
    from family_pages import family_folder, run_on

    at = run_on(family_folder("llama"), POSITIONAL)
    assert_no_exception(at)
    moved = moved_controls(at, ["3 · Learned"])
    assert moved["3 · Learned"] == ["pos_rot_layer", "pos_rot_head", "pos_rot_shift"]


def test_the_d_model_slider_keeps_its_value_across_the_tab_without_it():
    """Tab 3 draws no d_model slider; the value set on tab 1 is still there on tab 5."""
    at = run_page(POSITIONAL)
    open_tab(at, "pos_section", "1 · Sinusoid")
    at.slider(key="pos_dmodel").set_value(64).run()
    open_tab(at, "pos_section", "3 · Learned")
    assert_no_exception(at)
    assert "pos_dmodel" not in {slider.key for slider in at.slider}
    open_tab(at, "pos_section", "5 · Rotation")
    assert at.slider(key="pos_dmodel").value == 64
    assert "all 64 dimensions" in " ".join(m.value for m in at.markdown)


def test_the_word_order_tab_says_when_its_runs_are_off_the_training_distribution():
    """Tab 7's two runs follow the sidebar's √d_k switch (and run without a mask): with the
    switch off, the tab itself says the model never saw this; with it on, MiniLM (an encoder,
    no mask in training) is run as trained and nothing is said."""
    for scale, warned in ((False, True), (True, False)):
        at = run_page(
            "views/positional.py", state={"pos_section": "7 · Word order", "scale": scale}
        )
        assert_no_exception(at)
        warnings = " ".join(w.value for w in at.warning)
        assert ("√d_k scaling is off" in warnings and "never saw this" in warnings) == warned
