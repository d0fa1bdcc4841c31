"""The sidebar's switches, restated at the top of a page that reads them.

At 900 px the sidebar's switches sit below its fold, and a phone folds the sidebar away: a
learner looking at a figure could not tell that √d_k was off. One compact line near the top of
every page whose runs read the switches says which act on it and how they stand; a switch set
off the model's training is in bold, with the flask the pages' warnings use.
"""

from __future__ import annotations

import streamlit as st

from ui import sidebar

OFF_TRAINING = "🧪"


def switch_states(inputs: sidebar.Inputs, word_level_page: bool) -> list[tuple[str, bool]]:
    """(what the switch does now, whether that is off the model's training) for each switch
    that acts on the page: √d_k, the causal mask, and words where the page draws pieces."""
    if inputs.causal_by_nature:  # a decoder: its own mask is kept, or removed by the switch
        mask = ("causal mask kept", False) if inputs.causal else ("causal mask removed", True)
    else:  # an encoder: no mask, or one added by the switch
        mask = ("causal mask on", True) if inputs.causal else ("no causal mask", False)
    switches = [
        ("√d_k scaling on", False) if inputs.scale else ("√d_k scaling off", True),
        mask,
    ]
    if word_level_page:
        switches.append(("shown as words" if inputs.word_level else "shown as word pieces", False))
    return switches


def line(inputs: sidebar.Inputs, word_level_page: bool) -> str:
    """The line itself (Markdown): "Set in the sidebar for this page: √d_k scaling on · …"."""
    parts = [
        f"**{OFF_TRAINING} {what}**" if off_training else what
        for what, off_training in switch_states(inputs, word_level_page)
    ]
    return "Set in the sidebar for this page: " + " · ".join(parts)


def show(inputs: sidebar.Inputs, word_level_page: bool) -> None:
    """The line, as a caption, in a container the browser tests can find by its key."""
    with st.container(key="page_switches"):
        st.caption(line(inputs, word_level_page))
