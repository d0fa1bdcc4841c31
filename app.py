"""Attention Explorer: the navigation and the shared sidebar. Every page lives in views/.

(Not pages/: with a folder of that name Streamlit starts a fresh server in its old multipage
mode, and a shared deep link opened first would run the page without this file.)
"""

import logging

import streamlit as st

from ui import housekeeping, preload

st.set_page_config(page_title="Attention Explorer", page_icon=":material/home:", layout="wide")
housekeeping.tune_malloc()  # before torch allocates anything (ui/housekeeping.py)

PAGES = {
    "Start": [
        st.Page("views/overview.py", title="Overview", icon=":material/home:", default=True),
    ],
    "Learning path": [
        st.Page("views/by_hand.py", title="0 · Attention by hand", icon=":material/edit_note:"),
        st.Page(
            "views/context.py",
            title="1 · Context from first principles",
            icon=":material/calculate:",
        ),
        st.Page("views/qkv.py", title="2 · Queries, keys and values", icon=":material/key:"),
        st.Page(
            "views/scaling_masking.py",
            title="3 · Scaling and masking",
            icon=":material/thermostat:",
        ),
        st.Page(
            "views/multi_head.py", title="4 · Multi-head attention", icon=":material/view_module:"
        ),
        st.Page("views/inside_layer.py", title="5 · Inside a layer", icon=":material/layers:"),
    ],
    "Explore the model": [
        st.Page("views/heatmaps.py", title="Attention heatmaps", icon=":material/grid_on:"),
        st.Page("views/head_view.py", title="Head view", icon=":material/linear_scale:"),
    ],
    "Explain": [
        st.Page(
            "views/information_flow.py",
            title="Where the meaning comes from",
            icon=":material/account_tree:",
        ),
        st.Page(
            "views/explanations.py", title="Explanations side by side", icon=":material/balance:"
        ),
    ],
    "Labs": [
        st.Page("views/positional.py", title="Positional encoding", icon=":material/pin_drop:"),
        st.Page(
            "views/embeddings.py", title="Embedding projections", icon=":material/scatter_plot:"
        ),
        st.Page("views/lab.py", title="Attention, learned", icon=":material/model_training:"),
    ],
}

# The pages that draw word pieces; elsewhere the sidebar's word-level switch is greyed out.
WORD_LEVEL_PAGES = {"heatmaps", "head_view", "information_flow", "explanations"}
# The pages that never run the model with the sidebar's √d_k and causal-mask switches (a toy, the
# static vectors, the page's own switches); there the two are greyed out, keeping their values.
OWN_SWITCH_PAGES = {"by_hand", "context", "scaling_masking", "lab"}
# The pages that draw without plotly, at any length ("" is the Overview's path).
PLOTLY_FREE_PAGES = {""}

navigation = st.navigation(PAGES)
# torch's import takes ~1.3 s on a fresh server: let the browser fetch plotly.js meanwhile, unless
# the page opened draws without it (the Overview's head is HTML: ui/html_heatmap.py).
with preload.plotly_download(needed=navigation.url_path not in PLOTLY_FREE_PAGES):
    from ui import door, predict, state, widgets
# Freezing the imported modules before the first page is drawn keeps Streamlit's garbage
# collection after every rerun cheap (ui/housekeeping.py).
housekeeping.freeze_once_at_startup()

try:
    state.prepare_page_context(
        word_level_page=navigation.url_path in WORD_LEVEL_PAGES,
        switches_page=navigation.url_path not in OWN_SWITCH_PAGES,
    )
    widgets.image_format_picker()
    predict.visit(navigation.url_path)  # the session's progress through the path (ui/predict.py)
    navigation.run()
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
