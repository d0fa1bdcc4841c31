"""Results derived from Traces, cached: a rerun that only moves a slider must not redo them.

Streamlit reruns the whole page on every click. The functions here read a whole (L, H, n, n)
attention block or run extra forward passes, so each result is kept per Trace (and switch)
in a small st.cache_resource: the results are read-only and shared by every session, like the
Traces themselves. Only small results are kept, never a second (L, H, n, n) block.

Cost at 512 tokens (6 × 12 heads) on this 2-core machine while other work shared the cores
(load ~15), first call -> cache hit: per-head statistics 0.63 s (0.76 s with [CLS]/[SEP]
hidden, which also makes a transient 75 MB copy of the block) -> 0.3 ms; model-view
thumbnails 0.11 s (0.28 s hidden) -> 0.3 ms; the permutation experiment at 64 word pieces
(four forward passes) 6.0 s -> 0.5 ms. A hit costs the key: the word-piece ids as bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

import core
from core import head_stats, positional, words


def trace_key(trace: core.Trace) -> tuple:
    """What determines a Trace: model, word pieces, sentence ids and the run's switches."""
    options = trace.options
    return (
        trace.model_name,
        trace.input_ids.tobytes(),
        trace.segments.tobytes(),
        options.scale,
        options.causal,
        options.positions,
        tuple(sorted(options.ablate)),
    )


def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    array.setflags(write=False)  # shared by every session
    return array


# ---- Attention heatmaps ------------------------------------------------------------------------
def _in_words(
    weights: np.ndarray, tokens: Sequence[str], word_level: bool
) -> tuple[np.ndarray, tuple[str, ...]]:
    """(..., n, n) weights and their word pieces, or a (..., w, w) copy merged into words (keys
    summed within a word, queries averaged) and the words."""
    if not word_level:
        return weights, tuple(tokens)
    groups = words.word_groups(tokens)
    return words.merge_attention(weights, groups), tuple(words.word_labels(tokens, groups))


def _attention_block(trace: core.Trace, word_level: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """(L, H, n, n) weights and their word pieces, or (L, H, w, w) merged into words."""
    return _in_words(trace.attentions, trace.tokens, word_level)


def shown_weights(
    weights: np.ndarray, tokens: Sequence[str], hide_specials: bool, word_level: bool
) -> np.ndarray:
    """(..., n, n) attention weights as the Attention heatmaps page draws them: merged into
    words (..., w, w) when word_level, then [CLS]/[SEP] hidden and rows renormalised if asked.
    The input itself when neither switch is on, else a copy."""
    weights, tokens = _in_words(weights, tokens, word_level)
    if hide_specials:  # after merging: a word's pieces are summed first
        weights = head_stats.without_specials(weights, tokens)
    return weights


def shown_attentions(trace: core.Trace, hide_specials: bool, word_level: bool) -> np.ndarray:
    """(L, H, n, n) every head of the Trace as shown (shown_weights); not cached."""
    return shown_weights(trace.attentions, trace.tokens, hide_specials, word_level)


@st.cache_resource(max_entries=8, show_spinner=False)
def _thumbnails(
    key: tuple, hide_specials: bool, word_level: bool, _trace: core.Trace
) -> np.ndarray:
    weights = shown_attentions(_trace, hide_specials, word_level)
    return _read_only(np.array(head_stats.thumbnails(weights)))  # (L, H, m, m), m ≤ 48: ≤ 0.7 MB


def thumbnails(trace: core.Trace, hide_specials: bool, word_level: bool = False) -> np.ndarray:
    """(L, H, m, m) every head pooled for the model view, [CLS]/[SEP] hidden or not, pieces or
    words."""
    return _thumbnails(trace_key(trace), hide_specials, word_level, trace)


@st.cache_resource(max_entries=8, show_spinner=False)
def _head_statistics(
    key: tuple, hide_specials: bool, word_level: bool, _trace: core.Trace
) -> head_stats.HeadStats:
    weights, tokens = _attention_block(_trace, word_level)
    stats = head_stats.head_statistics(weights, tokens, hide_specials=hide_specials)
    for name in ("entropy", "on_cls", "on_sep", "on_self", "on_previous", "on_next", "sink"):
        _read_only(getattr(stats, name))  # (L, H) each
    return stats


def head_statistics(
    trace: core.Trace, hide_specials: bool, word_level: bool = False
) -> head_stats.HeadStats:
    """Per-head statistics of the weights as shown: [CLS]/[SEP] hidden or not, pieces or words
    (then "self", "previous" and "next" mean the word itself and its neighbouring words)."""
    return _head_statistics(trace_key(trace), hide_specials, word_level, trace)


# ---- Positional encoding -----------------------------------------------------------------------
@st.cache_resource(max_entries=4, show_spinner=False)
def _permutation(
    key: tuple,
    use_positions: bool,
    seed: int,
    max_tokens: int,
    _model: core.BertEncoder,
    _trace: core.Trace,
) -> positional.PermutationResult:
    # Two forward passes (the sentence and its shuffle); at 64 word pieces the result holds
    # two (6, 12, 64, 64) blocks, ~2.4 MB.
    return positional.permutation_experiment(
        _model,
        _trace.tokens,
        _trace.input_ids,
        use_positions,
        seed,
        _trace.options.scale,
        max_tokens,
        segments=_trace.segments,
    )


def permutation_experiment(
    model: core.BertEncoder, trace: core.Trace, use_positions: bool, seed: int, max_tokens: int
) -> positional.PermutationResult:
    """core.positional.permutation_experiment on the Trace's word pieces and sentences."""
    return _permutation(trace_key(trace), use_positions, int(seed), max_tokens, model, trace)
