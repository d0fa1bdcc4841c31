"""A page's point in one sentence, on its first screen, right above the figure that shows it.

A visitor at 1280 × 900 sees the page's title, the switches line, this sentence and the payoff
figure before any scrolling; caveats and sources fold away below. The page builds the sentence
from its run's numbers (never typed), so it stays true of the sentence and the model on screen.
"""

from __future__ import annotations

import streamlit as st

KEY = "takeaway"  # its container's key: the browser test finds it by the class st-key-takeaway
LEAD = "**In short:**"  # the words it opens with: the headless tests find it by them


def show(sentence: str, help: str | None = None) -> None:  # noqa: A002 (Streamlit's name)
    """The takeaway, as Markdown, in the one container the tests look for; help: the "?" of a
    term it uses before its page teaches it (terms.ahead)."""
    with st.container(key=KEY):
        st.markdown(f"{LEAD} {sentence}", help=help)
