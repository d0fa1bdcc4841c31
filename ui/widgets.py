"""Controls every page shares: layer, head and token pickers, numbers, tabs and folded sections.

A control bound to the URL keeps its key literal in its call (tests/bound_keys.py reads them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import streamlit as st

import core
from ui.escape import literal


def layer_head_picker(
    model: core.Transformer,
    key_prefix: str = "",
    columns: bool = True,
    in_browser: bool = False,
    opens_on: tuple[int, int] = (0, 0),
    opening_key: str | None = None,
) -> tuple[int, int]:
    """Two sliders (bound to the URL) choosing a layer and a head, both counted from 0.

    opens_on: the (layer, head) they start at when neither the URL nor the session holds one:
    the head a page's takeaway names, so the figure shows it without a move.

    opening_key: for sliders whose keys other pages share (their start stays 0 there): the
    session key under which this page remembers its last opening; the sliders a page drew
    before are moved to opens_on once per opening (open_once).

    in_browser: moving them reruns nothing. The page shows a figure that carries every head
    (head_view_charts.every_head_view_figure, or
    html_heatmap.attention_grid with every_head) and calls
    head_switch() (and shows nothing else that depends on the head); Streamlit still writes
    the new values to the URL and hands them to the next run.
    """
    if opening_key is not None:
        open_once((f"{key_prefix}layer", f"{key_prefix}head"), opens_on, opening_key)
    left, right = st.columns(2) if columns else (st.container(), st.container())
    on_change = "ignore" if in_browser else "rerun"
    with left:
        layer = layer_slider(model, key_prefix, on_change, opens_on[0])
    with right:
        head = head_slider(model, key_prefix, on_change, opens_on[1])
    return layer, head


def open_once(keys: tuple[str, str], opens_on: tuple[int, int], opening_key: str) -> None:
    """Before the (layer, head) sliders of `keys` are drawn with opens_on as their default:
    move them to opens_on when this page's opening changes (another sentence, model or switch),
    unless the visitor placed them.

    Sliders whose keys several pages share carry their value from page to page, so their
    default opens them only where no page drew them yet (or where a link's value is not a
    number in range). The opening this page last saw is kept under opening_key; the sliders
    follow a new opening only while they still stand at the last one (at 0, their default on
    the other pages, before this page's first opening). A slider no page drew yet this session
    is left to its default or to the link's value.
    """
    last = st.session_state.get(opening_key)
    if last == opens_on:
        return  # once per opening: a slider moved since stays where it was put
    st.session_state[opening_key] = opens_on
    drawn = [key for key in keys if key in st.session_state]
    left_at = dict(zip(keys, last if last is not None else (0, 0), strict=True))
    if any(st.session_state[key] != left_at[key] for key in drawn):
        return  # the visitor's own place, kept as a pair
    for key, value in zip(keys, opens_on, strict=True):
        if key in drawn:
            st.session_state[key] = value  # before the widget exists this run: allowed


def layer_slider(
    model: core.Transformer, key_prefix: str = "", on_change: str = "rerun", value: int = 0
) -> int:
    """The Layer slider alone (bound to the URL, counted from 0), for a section that shows every
    head of one layer; the same key as layer_head_picker's, so the two share the layer."""
    layer = st.slider(
        "Layer",
        0,
        model.n_layers - 1,
        value,
        key=f"{key_prefix}layer",
        bind="query-params",
        on_change=on_change,
    )
    return min(int(layer), model.n_layers - 1)  # a larger model's number in the URL: clamped


def head_slider(
    model: core.Transformer, key_prefix: str = "", on_change: str = "rerun", value: int = 0
) -> int:
    """The Head slider alone (bound to the URL, counted from 0), layer_head_picker's."""
    head = st.slider(
        "Head",
        0,
        model.n_heads - 1,
        value,
        key=f"{key_prefix}head",
        bind="query-params",
        on_change=on_change,
    )
    return min(int(head), model.n_heads - 1)  # a larger model's number in the URL: clamped


def numbered(tokens: Sequence[str]) -> list[str]:
    """'3:bank' style labels so repeated tokens stay distinct in CSV headers."""
    return [f"{i}:{t}" for i, t in enumerate(tokens)]


def whole_number_input(
    label: str, min_value: int, max_value: int, value: int, key: str, **kwargs: object
) -> int:
    """A number input for a whole number, bound to the URL, safe against any URL value.

    Streamlit seeds a bound number input from the URL. For a whole-number input it calls int()
    on the parsed value, and a URL value such as 1e309 is infinity there: int() raises
    OverflowError inside Streamlit, which it does not catch, and the page shows an error box.
    A float input is checked for finiteness and range instead, and falls back to the default;
    format "%.0f" shows it as the whole number it is.
    """
    chosen = st.number_input(
        label,
        min_value=float(min_value),
        max_value=float(max_value),
        value=float(value),
        step=1.0,
        format="%.0f",
        key=key,
        bind="query-params",
        **kwargs,
    )
    return min(max(round(chosen), min_value), max_value)


def page_title(title: str) -> None:
    """A page's title, without the link icon Streamlit puts after a heading: on a phone the title
    fills the width, the icon wraps onto a line of its own, and a blank band opens under the title."""
    st.title(title, anchor=False)


def section_tabs(sections: Mapping[str, Callable[[], None]], key: str) -> None:
    """One tab per section of a long page, and only the open tab drawn.

    A closed tab sends nothing to the browser. Each plotly figure costs a browser ~50-110 ms of
    main-thread work when a page loads and again on every update (its layout and text
    measuring; bench/bench_browser.py), so a lesson of a dozen figures drawn at once was slow on
    a phone. The URL keeps the open tab (bound to `key`), so a link opens the section it was
    copied from; opening another tab reruns the page.
    """
    tabs = st.tabs(list(sections), key=key, on_change="rerun", bind="query-params")
    for tab, draw in zip(tabs, sections.values(), strict=True):
        if tab.open:
            with tab:
                draw()


def folded(label: str, key: str, draw: Callable[[], None]) -> None:
    """An expander whose content is drawn only while it is open.

    A table folded away in a plain expander is still sent and laid out: an st.dataframe costs
    a browser ~140 ms of main-thread work on every load and every update that changes it
    (bench/bench_browser.py), for a detail most visitors never open. Opening this one reruns
    the page (a cached rerun) and draws it.
    """
    box = st.expander(label, key=key, on_change="rerun")
    if box.open:
        with box:
            draw()


def token_picker(label: str, tokens: Sequence[str], default: int, key: str) -> int:
    """A slider over token positions 0 … n−1, bound to the URL, with the chosen token named.

    The URL holds the position, not the token: a select box would be bound by its label
    ("2: bank"), which goes stale as soon as the sentence changes, so a copied link would reopen
    on another token. A position stays meaningful; one past the end falls back to the default.
    """
    last = len(tokens) - 1
    default = min(max(default, 0), last)
    if last < 1:
        return 0
    position = st.slider(label, 0, last, default, key=key, bind="query-params")
    position = min(max(int(position), 0), last)
    st.caption(f"Position {position}: **{literal(tokens[position], max_chars=40)}**")
    return position


# ---- progress of a training run (the lab, the induction heads) ----------------------------------
PROGRESS_UPDATES = 20  # progress-bar messages per run: enough to see it move, few to send
StepReporter = Callable[[int, int], None]  # on_step(done, total) of a training loop


@contextmanager
def training_bar(first_text: str, steps: int, of: str = "of") -> Iterator[StepReporter]:
    """A progress bar for one training run of at most `steps` steps, and the on_step callback
    that moves it (PROGRESS_UPDATES times a run); the bar goes when the run ends. of: "of", or
    "of at most" for a run that stops once solved."""
    bar = st.progress(0.0, text=first_text)
    every = max(1, steps // PROGRESS_UPDATES)

    def report(done: int, total: int) -> None:
        if done % every == 0 or done == total:
            bar.progress(done / total, text=f"Training: step {done} {of} {total}")

    try:
        yield report
    finally:
        bar.empty()
