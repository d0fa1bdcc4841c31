"""The head view's runs: the value-weighted lines need the model's W_O, so they are computed
once through ui.door and shared read-only by every session.
"""

from __future__ import annotations

import numpy as np

import core
from core import head_stats
from ui import door


def _layer_cost(model: core.Transformer, trace: core.Trace, **_: object) -> int:
    # every value through W_O (H, n, d_model), W_O's per-head copy, the (H, n, n) norms and shares
    n, n_heads = trace.n_tokens, model.n_heads
    return 4 * n_heads * (n * (model.d_model + 2 * n) + model.d_head * model.d_model)


@door.shared("the value-weighted lines", cost=_layer_cost)
def _value_weighted_layer(model: core.Transformer, trace: core.Trace, layer: int) -> np.ndarray:
    return head_stats.head_view_weights(model, trace, layer, value_weighted=True)


def layer_weights(
    model: core.Transformer, trace: core.Trace, layer: int, value_weighted: bool
) -> np.ndarray:
    """(H, n, n) line strengths of one layer (core.head_stats.head_view_weights): α as the
    Trace holds it, or the value-weighted share, computed once."""
    if not value_weighted:
        return trace.attentions[layer]  # nothing to compute: no copy, no cache entry
    return _value_weighted_layer(model, trace, layer)


def _every_layer_cost(model: core.Transformer, trace: core.Trace, **_: object) -> int:
    # the stacked (L, H, n, n) copy, and one layer's work at a time
    n = trace.n_tokens
    return 4 * model.n_layers * model.n_heads * n * n + _layer_cost(model, trace)


@door.shared("every head's value-weighted lines", cost=_every_layer_cost)
def _every_value_weighted_layer(model: core.Transformer, trace: core.Trace) -> np.ndarray:
    return head_stats.every_layer_head_view_weights(model, trace, value_weighted=True)


def every_layer_weights(
    model: core.Transformer, trace: core.Trace, value_weighted: bool
) -> np.ndarray:
    """(L, H, n, n) layer_weights of every layer, for the every-head download."""
    if not value_weighted:
        return trace.attentions  # the Trace's own array: what stacking its layers would copy
    return _every_value_weighted_layer(model, trace)
