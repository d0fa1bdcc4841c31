"""Attention Explorer: the navigation and the shared sidebar. Every page lives in views/ (not pages/: see README, "How it is built")."""

import streamlit as st

from ui import state, widgets

st.set_page_config(page_title="Attention Explorer", page_icon="🔍", layout="wide")

PAGES = {
    "Start": [
        st.Page("views/overview.py", title="Overview", icon="🔍", default=True),
    ],
    "Learning path": [
        st.Page("views/context.py", title="1 · Context from first principles", icon="🧮"),
        st.Page("views/qkv.py", title="2 · Queries, keys and values", icon="🔑"),
        st.Page("views/scaling_masking.py", title="3 · Scaling and masking", icon="🌡️"),
        st.Page("views/multi_head.py", title="4 · Multi-head attention", icon="🧩"),
    ],
    "Explore BERT": [
        st.Page("views/heatmaps.py", title="Attention heatmaps", icon="🗺️"),
        st.Page("views/head_view.py", title="Head view", icon="🔗"),
    ],
    "Labs": [
        st.Page("views/positional.py", title="Positional encoding", icon="📍"),
        st.Page("views/embeddings.py", title="Embedding projections", icon="🌌"),
    ],
}

navigation = st.navigation({section: pages for section, pages in PAGES.items() if pages})
state.prepare_page_context()
widgets.image_format_picker()
navigation.run()
