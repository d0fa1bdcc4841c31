"""Attention Explorer: the navigation and the shared sidebar. Every page lives in views/.

(Not pages/: with a folder of that name Streamlit starts a fresh server in its old multipage
mode, and a shared deep link opened first would run the page without this file.)
"""

import logging

import streamlit as st

from ui import housekeeping, path, preload

st.set_page_config(page_title="Attention Explorer", page_icon=":material/home:", layout="wide")
housekeeping.tune_malloc()  # before torch allocates anything (ui/housekeeping.py)

# The pages that draw word pieces; elsewhere the sidebar's word-level switch is greyed out.
WORD_LEVEL_PAGES = {"heatmaps", "head_view", "information_flow", "explanations"}
# The pages that never run the model with the sidebar's √d_k and causal-mask switches (a toy, the
# static vectors, the page's own switches); there the two are greyed out, keeping their values.
OWN_SWITCH_PAGES = {"by_hand", "context", "scaling_masking", "lab", "check"}
# The pages with sentences of their own (a toy's words, two boxes, the lab's sequences): there
# the sidebar's sentence boxes are greyed out the same way.
OWN_TEXT_PAGES = {"by_hand", "context", "lab"}
# The pages that draw without plotly, at any length ("" is the Overview's path).
PLOTLY_FREE_PAGES = {""}

# The pages in the course's order (ui/path.py). expanded=True: every page stays listed, where
# Streamlit 1.67 folds a list of more than twelve into "View N more".
navigation = st.navigation(path.navigation_pages(), expanded=True)
step = path.step_at(navigation.url_path)
# torch's import takes ~1.3 s on a fresh server: let the browser fetch plotly.js meanwhile, unless
# the page opened draws without it (the Overview's head is HTML: ui/html_heatmap.py).
with preload.plotly_download(needed=navigation.url_path not in PLOTLY_FREE_PAGES):
    from ui import display, door, model_map, predict, state
# Freezing the imported modules before the first page is drawn keeps Streamlit's garbage
# collection after every rerun cheap (ui/housekeeping.py).
housekeeping.freeze_once_at_startup()

try:
    text_page = navigation.url_path not in OWN_TEXT_PAGES
    inputs, model = state.prepare_page_context(
        word_level_page=navigation.url_path in WORD_LEVEL_PAGES,
        switches_page=navigation.url_path not in OWN_SWITCH_PAGES,
        text_page=text_page,
    )
    display.image_format_picker()
    with st.sidebar:
        model_map.links_script()
    visited = path.visit(step)
    predict.visit(navigation.url_path)  # the questions' progress (ui/predict.py)
    model_map.show_map(step, model, visited)  # where this page sits in the model
    if text_page:  # a phone folds the sidebar away: where to type, at the top of the page
        state.sentence_box_in_page(inputs)
    navigation.run()
except state.PageEnds:
    pass  # the page said why it ends early (ui/state.py): the way on is drawn below
except (door.ServerShort, MemoryError) as short:
    # ui/door.py refuses a run the server has no memory or slot for: the visitor reads why,
    # and every other visitor's page goes on.
    st.warning(str(short) or door.SHORT_OF_MEMORY, icon="⏳")
except Exception:
    # Community Cloud forces client.showErrorDetails to false, which Streamlit 1.67 reads as
    # "stacktrace": a visitor would see the traceback, server paths included. There the error
    # goes to the server's log and the visitor reads one line; elsewhere Streamlit's own
    # setting decides (.streamlit/config.toml says "none").
    if st.get_option("client.showErrorDetails") not in (False, "false", "False"):
        raise
    logging.getLogger("attention_explorer").exception("a page failed")
    st.error(
        "This page ran into an error, and the details went to the server's log. Try another "
        "text or another page.",
        icon="⚠️",
    )

# Previous and Next on every page, and the course so far: also after a page that ended early
# (state.PageEnds, as on an empty sentence) or was refused by the door.
path.previous_next(step)
model_map.show_progress(step, path.visited())
