"""Page 6's results derived from Traces (attention heatmaps), cached: a rerun that only moves a
slider must not redo them.

Streamlit reruns the whole page on every click. The functions here read a whole (L, H, n, n)
attention block or run extra forward passes, so each result is kept per Trace (and switch)
in ui.door's one cache: the results are read-only and shared by every session, like the
Traces themselves. Only small results are kept, never a second (L, H, n, n) block.

Cost at 512 tokens (6 × 12 heads) on this 2-core machine while other work shared the cores
(load ~15), first call -> cache hit: per-head statistics 0.63 s (0.76 s with [CLS]/[SEP]
hidden, which also makes a transient 75 MB copy of the block) -> 0.3 ms; model-view
thumbnails 0.11 s (0.28 s hidden) -> 0.3 ms. A hit costs the key: the word-piece ids as bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import core
from core import context, head_roles, head_stats, positional, words
from core.transformer import ATTN_INPUT, hook_name
from ui import door


# ---- Attention heatmaps ------------------------------------------------------------------------
def _in_words(
    weights: np.ndarray,
    tokens: Sequence[str],
    word_level: bool,
    scheme: str | None = None,
    special: Sequence[bool] | None = None,
) -> tuple[np.ndarray, tuple[str, ...], tuple[bool, ...] | None]:
    """(..., n, n) weights, their word pieces and which are special, or a (..., w, w) copy
    merged into words (keys summed within a word, queries averaged), the words and which are
    special (a special piece is a word of its own). scheme, special: the Trace's own."""
    special = tuple(bool(s) for s in special) if special else None
    if not word_level:
        return weights, tuple(tokens), special
    groups = words.word_groups(tokens, scheme, special)
    merged_special = None if special is None else tuple(special[g[0]] for g in groups)
    return (
        words.merge_attention(weights, groups),
        tuple(words.word_labels(tokens, groups, scheme)),
        merged_special,
    )


def _attention_block(
    trace: core.Trace, word_level: bool
) -> tuple[np.ndarray, tuple[str, ...], tuple[bool, ...] | None]:
    """(L, H, n, n) weights, word pieces and specials, or (L, H, w, w) merged into words."""
    return _in_words(trace.attentions, trace.tokens, word_level, trace.piece_scheme, trace.special)


def shown_weights(
    weights: np.ndarray,
    tokens: Sequence[str],
    hide_specials: bool,
    word_level: bool,
    scheme: str | None = None,
    special: Sequence[bool] | None = None,
) -> np.ndarray:
    """(..., n, n) attention weights as the Attention heatmaps page draws them: merged into
    words (..., w, w) when word_level, then [CLS]/[SEP] hidden and rows renormalised if asked.
    The input itself when neither switch is on, else a copy."""
    weights, tokens, special = _in_words(weights, tokens, word_level, scheme, special)
    if hide_specials:  # after merging: a word's pieces are summed first
        weights = head_stats.without_specials(weights, tokens, special)
    return weights


def shown_attentions(trace: core.Trace, hide_specials: bool, word_level: bool) -> np.ndarray:
    """(L, H, n, n) every head of the Trace as shown (shown_weights); not cached."""
    return shown_weights(
        trace.attentions,
        trace.tokens,
        hide_specials,
        word_level,
        trace.piece_scheme,
        trace.special,
    )


def _shown_copy_cost(trace: core.Trace, hide_specials: bool, word_level: bool) -> int:
    """Bytes of the (L, H, n, n) copy shown_attentions makes when a switch changes the block."""
    return trace.attentions.nbytes if hide_specials or word_level else 0


@door.shared("the model view", cost=_shown_copy_cost)
def thumbnails(trace: core.Trace, hide_specials: bool, word_level: bool = False) -> np.ndarray:
    """(L, H, m, m) every head pooled for the model view, [CLS]/[SEP] hidden or not, pieces or
    words (m ≤ 48: ≤ 0.7 MB)."""
    weights = shown_attentions(trace, hide_specials, word_level)
    return np.array(head_stats.thumbnails(weights))


@door.shared("the head statistics", cost=_shown_copy_cost)
def head_statistics(
    trace: core.Trace, hide_specials: bool, word_level: bool = False
) -> head_stats.HeadStats:
    """Per-head statistics of the weights as shown: [CLS]/[SEP] hidden or not, pieces or words
    (then "self", "previous" and "next" mean the word itself and its neighbouring words); each
    field (L, H)."""
    weights, tokens, special = _attention_block(trace, word_level)
    return head_stats.head_statistics(weights, tokens, hide_specials=hide_specials, special=special)


def stat_labels(trace: core.Trace) -> dict[str, str]:
    """head_stats.STAT_LABELS for this run: the shares on its own specials, named as the
    Heatmaps bars name them (head_roles.sink_names: "[CLS]", "[SEP]", "the first <s>" and "the
    later <s>" of a Llama pair), and none for a place the run does not have (GPT-2 adds no
    special piece). Plain text, as a select box shows its options (escape them for Markdown or
    plotly)."""
    first, later = head_roles.sink_names(trace.tokens, trace.special)
    labels = dict(head_stats.STAT_LABELS)
    if len(trace.special) and trace.special[0]:  # on_cls: a special piece at position 0
        labels["on_cls"] = f"share on {first}"
    else:
        del labels["on_cls"]
    if head_roles.has_other_specials(trace.tokens, trace.special):
        labels["on_sep"] = f"share on {later}"
    else:
        del labels["on_sep"]
    return labels


# ---- 4 · one word in two sentences -------------------------------------------------------------
def _layer_zero_cost(
    model: core.Transformer, trace_a: core.Trace, trace_b: core.Trace, **_: object
) -> int:
    names = [hook_name(ATTN_INPUT, 0)]  # one run of each sentence, up to layer 0's attention
    return sum(model.cache_bytes(trace.n_tokens, names) for trace in (trace_a, trace_b))


@door.shared("what layer 0's heads read", cost=_layer_zero_cost)
def layer_zero_cosine(
    model: core.Transformer, trace_a: core.Trace, trace_b: core.Trace, index_a: int, index_b: int
) -> float:
    """cos of the rows layer 0's heads read for piece index_a of trace_a and piece index_b of
    trace_b, each from its own sentence's run (core.context.attention_input): the embedding
    output in a post-norm model, its first norm in a pre-norm one."""
    row_a, row_b = (
        context.attention_input(model, trace.input_ids, trace.segments, 0)[index]  # (d_model,)
        for trace, index in ((trace_a, index_a), (trace_b, index_b))
    )
    return float(positional.cosine(row_a, row_b))
