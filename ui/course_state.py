"""Cached measurements for the course pages (each runs several sentences: worth computing once).

Kept beside ui/state.py rather than in it so the course's probes do not crowd the shared module;
the rule is the same: every result goes through ui.door (one cache, one admission limit) and is
shared read-only by every session.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import core
from core import block, head_roles, learning, padding, scaling
from ui import door


@door.shared("measuring every head", spinner="Measuring every head on the probe sentences …")
def role_scores(model: core.BertEncoder) -> head_roles.RoleScores:
    """core.head_roles.role_scores over PROBE_SENTENCES, once per model."""
    return head_roles.role_scores(model)


def _two_runs_cost(model: core.BertEncoder, text_a: str, text_b: str, **_: object) -> int:
    return door.run_bytes(model, text_a, text_b)


@door.shared("the shared word's runs", cost=_two_runs_cost)
def shared_word_through_heads(
    model: core.BertEncoder, text_a: str, text_b: str, word: str, layer: int
) -> object:
    """core.learning.shared_word_through_heads, once per (model, sentences, word, layer)."""
    from core import learning

    return learning.shared_word_through_heads(model, text_a, text_b, word, layer)


ROLE_NAMES = head_roles.ROLES  # role key -> what a learner reads


def probe_sentences() -> tuple[str, ...]:
    """The fixed sentences the head roles are measured on."""
    return head_roles.PROBE_SENTENCES


def probe_lengths(model: core.BertEncoder) -> tuple[int, ...]:
    """Word pieces of each probe sentence, specials included (tokenizing only: well under a
    millisecond each): an even spread gives each key 1/n."""
    return tuple(door.pieces(model, sentence) for sentence in head_roles.PROBE_SENTENCES)


# ---- runs the course pages ask for beside the sidebar's Trace ------------------------------------
PADDING_MAX_PIECES = 64  # the padding lesson reads the sidebar sentence's first 64 word pieces


def _padded_cost(model: core.BertEncoder, text: str, n_pad: int, **_: object) -> int:
    # the padded run and the same pieces alone, run side by side
    n_real = min(door.pieces(model, text), PADDING_MAX_PIECES)
    return model.run_bytes(n_real + n_pad) + model.run_bytes(n_real)


@door.shared("the padding runs", cost=_padded_cost)
def padded_run(model: core.BertEncoder, text: str, n_pad: int, masked: bool) -> padding.PaddedRun:
    """core.padding.padded_run of the text's first PADDING_MAX_PIECES word pieces."""
    return padding.padded_run(model, text, n_pad, masked, max_real=PADDING_MAX_PIECES)


def _one_run_cost(model: core.BertEncoder, sentence: str, **_: object) -> int:
    return door.run_bytes(model, sentence)


@door.shared("the repeated word's run", cost=_one_run_cost)
def repeat_example(
    model: core.BertEncoder, sentence: str, layer: int, head: int
) -> head_roles.RepeatExample | None:
    """core.head_roles.repeat_example: how the later of two equal pieces reads the earlier."""
    return head_roles.repeat_example(model, sentence, layer, head)


@door.shared("cross-attention")
def cross_attention(
    model: core.BertEncoder, trace_a: core.Trace, trace_b: core.Trace, layer: int
) -> scaling.CrossAttention:
    """core.scaling.cross_attention: one layer's heads, queries from A, keys and values from B."""
    return scaling.cross_attention(model, trace_a, trace_b, layer)


def _sublayer_cost(model: core.BertEncoder, trace: core.Trace) -> int:
    return model.run_bytes(trace.n_tokens) - model.trace_bytes(trace.n_tokens)  # one layer's room


@door.shared("the sublayer sizes", cost=_sublayer_cost)
def sublayer_sizes(model: core.BertEncoder, trace: core.Trace) -> block.SublayerSizes:
    """core.block.sublayer_sizes: every layer of the Trace recomputed step by step."""
    return block.sublayer_sizes(model, trace)


# ---- page 1: the payoff at two vector lengths ---------------------------------------------------
def _embedding_cost(model: core.BertEncoder, text_a: str, text_b: str, **_: object) -> int:
    # both sentences' rows three times over (table, layer 0, stretched), their n x n weights
    n = door.pieces(model, text_a) + door.pieces(model, text_b)
    return 4 * (6 * n * model.d_model + 6 * n * n)


@door.shared("the payoff at two lengths", cost=_embedding_cost)
def length_effect(
    model: core.BertEncoder, text_a: str, text_b: str, word: str
) -> learning.LengthEffect | None:
    """core.learning.length_effect, once per (model, sentences, word)."""
    return learning.length_effect(model, text_a, text_b, word)


# ---- page 2: one head on a sentence and on a shuffle of it --------------------------------------
def _order_cost(model: core.BertEncoder, trace: core.Trace, **_: object) -> int:
    n = trace.n_tokens  # four embeddings, four heads' Q, K, V, scores and weights
    return 4 * (4 * n * model.d_model + 4 * (3 * n * model.d_model + 2 * n * n))


@door.shared("the shuffled sentence", cost=_order_cost)
def _order_test(
    model: core.BertEncoder,
    trace: core.Trace,
    arrays: tuple[np.ndarray, ...],
    scale: bool,
    seed: int,
) -> learning.OrderTest:
    projections = learning.QKVProjections(*arrays)
    return learning.order_test(
        model, trace.input_ids, trace.segments, trace.tokens, projections, scale, seed
    )


def order_test(
    model: core.BertEncoder,
    trace: core.Trace,
    projections: learning.QKVProjections,
    scale: bool,
    seed: int = 0,
) -> learning.OrderTest:
    """core.learning.order_test on the trace's pieces, once per (sentence, matrices, scale, seed).

    The matrices enter the cache key by their bytes (a dataclass of arrays is not hashable).
    """
    arrays = tuple(getattr(projections, f.name) for f in dataclasses.fields(projections))
    return _order_test(model, trace, arrays, scale, seed)


# ---- page 5: what the heads read on each side ----------------------------------------------------
@door.shared("the weight on later tokens")
def weight_on_later_tokens(trace: core.Trace) -> float:
    """core.block.weight_on_later_tokens of the trace's attention."""
    return block.weight_on_later_tokens(trace.attentions)
