"""Page 2's runs of the model (queries, keys and values), computed once through ui.door.

Each result is computed once per (model, sentence) and shared read-only by every session.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import core
from core import qkv
from core.transformer import ATTN_INPUT, hook_name
from ui import door


def _two_runs_cost(model: core.Transformer, text_a: str, text_b: str, **_: object) -> int:
    return door.run_bytes(model, text_a, text_b)


@door.shared("the shared word's runs", cost=_two_runs_cost)
def shared_word_through_heads(
    model: core.Transformer, text_a: str, text_b: str, word: str, layer: int
) -> object:
    """core.qkv.shared_word_through_heads, once per (model, sentences, word, layer)."""

    return qkv.shared_word_through_heads(model, text_a, text_b, word, layer)


# ---- page 2: one head on a sentence and on a shuffle of it --------------------------------------
def _order_cost(model: core.Transformer, trace: core.Trace, **_: object) -> int:
    n = trace.n_tokens  # four embeddings, four heads' Q, K, V, scores and weights
    return 4 * (4 * n * model.d_model + 4 * (3 * n * model.d_model + 2 * n * n))


@door.shared("the shuffled sentence", cost=_order_cost)
def _order_test(
    model: core.Transformer,
    trace: core.Trace,
    arrays: tuple[np.ndarray, ...],
    scale: bool,
    seed: int,
) -> qkv.OrderTest:
    # writable copies: the cache holds the matrices read-only, and torch.from_numpy warns on those
    projections = qkv.QKVProjections(*(np.array(array) for array in arrays))
    return qkv.order_test(
        model,
        trace.input_ids,
        trace.segments,
        trace.special,
        trace.tokens,
        projections,
        scale,
        seed,
    )


def order_test(
    model: core.Transformer,
    trace: core.Trace,
    projections: qkv.QKVProjections,
    scale: bool,
    seed: int = 0,
) -> qkv.OrderTest:
    """core.qkv.order_test on the trace's pieces, once per (sentence, matrices, scale, seed).

    The matrices enter the cache key by their bytes (a dataclass of arrays is not hashable).
    """
    arrays = tuple(getattr(projections, f.name) for f in dataclasses.fields(projections))
    return _order_test(model, trace, arrays, scale, seed)


# ---- page 2, Steps 1 to 6: one head's Q, K and V on the sidebar's sentence ---------------------
@dataclasses.dataclass(frozen=True)
class OneHead:
    """A head's three projections and what they make of X."""

    x: np.ndarray  # (n, d_model) the rows the head reads
    projections: qkv.QKVProjections  # W_q, W_k, W_v (d_model, d_k) and their biases
    result: qkv.QKVResult  # Q, K, V, the scores, the weights and the output


def _head_cost(model: core.Transformer, trace: core.Trace, d_k: int, **_: object) -> int:
    # float32: the three (d_model, d_k) matrices and their biases, X kept in the result and the
    # copy the product works on, Q, K, V and the output (n, d_k), the (n, n) dot products,
    # scores and weights
    n, d_model = trace.n_tokens, model.d_model
    return 4 * (3 * d_model * d_k + 3 * d_k + 2 * n * d_model + 4 * n * d_k + 3 * n * n)


def _attend(x: np.ndarray, projections: qkv.QKVProjections, scale: bool, causal: bool) -> OneHead:
    return OneHead(x, projections, qkv.qkv_attention(x, projections, scale=scale, causal=causal))


@door.shared("a random head", cost=_head_cost)
def random_head(
    model: core.Transformer, trace: core.Trace, d_k: int, seed: int, scale: bool, causal: bool
) -> OneHead:
    """Seeded random W_q, W_k, W_v (core.qkv.random_projections) on the static vectors."""
    projections = qkv.random_projections(model.d_model, d_k, seed)
    return _attend(trace.static, projections, scale, causal)


def _trained_cost(model: core.Transformer, trace: core.Trace, layer: int, **_: object) -> int:
    # a rerun up to the layer's attention, to read what its heads read, then the head's work
    names = [hook_name(ATTN_INPUT, layer)]
    return model.cache_bytes(trace.n_tokens, names) + _head_cost(model, trace, model.d_head)


@door.shared("a trained head", cost=_trained_cost)
def trained_head(
    model: core.Transformer, trace: core.Trace, layer: int, head: int, scale: bool, causal: bool
) -> OneHead:
    """One trained head's slices of W_q, W_k, W_v (core.qkv.head_projections) on what its
    layer's attention reads: the layer's input, or its first norm in a pre-norm model."""
    projections = qkv.head_projections(model, layer, head)
    x = model.attention_input(trace, layer).numpy().copy()  # (n, d_model)
    return _attend(x, projections, scale, causal)
