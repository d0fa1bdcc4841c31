"""Cached measurements for the course pages (each runs several sentences: worth computing once).

Kept beside ui/state.py rather than in it so the course's probes do not crowd the shared module;
the rule is the same: a model is looked up by name, results are shared read-only by every session.
"""

from __future__ import annotations

import streamlit as st

import core
from core import head_roles
from ui.models import load_model


@st.cache_resource(max_entries=2, show_spinner="Measuring every head on the probe sentences …")
def _role_scores(model_name: str) -> head_roles.RoleScores:
    return head_roles.role_scores(load_model(model_name))


def role_scores(model: core.BertEncoder) -> head_roles.RoleScores:
    """core.head_roles.role_scores over PROBE_SENTENCES, once per model."""
    return _role_scores(model.name)


@st.cache_resource(max_entries=8, show_spinner=False)
def _shared_word_through_heads(
    model_name: str, text_a: str, text_b: str, word: str, layer: int
) -> object:
    from core import learning

    return learning.shared_word_through_heads(load_model(model_name), text_a, text_b, word, layer)


def shared_word_through_heads(
    model: core.BertEncoder, text_a: str, text_b: str, word: str, layer: int
) -> object:
    """core.learning.shared_word_through_heads, once per (model, sentences, word, layer)."""
    return _shared_word_through_heads(model.name, text_a, text_b, word, layer)


ROLE_NAMES = head_roles.ROLES  # role key -> what a learner reads


def probe_sentences() -> tuple[str, ...]:
    """The fixed sentences the head roles are measured on."""
    return head_roles.PROBE_SENTENCES
