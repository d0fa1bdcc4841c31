"""Page 2's runs of the model (queries, keys and values), computed once through ui.door.

Each result is computed once per (model, sentence) and shared read-only by every session.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import core
from core import qkv
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
    projections = qkv.QKVProjections(*arrays)
    return qkv.order_test(
        model, trace.input_ids, trace.segments, trace.tokens, projections, scale, seed
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
