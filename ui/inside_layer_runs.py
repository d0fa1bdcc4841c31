"""Page 5's runs of the model (inside a layer), computed once through ui.door.

Each result is computed once per (model, sentence) and shared read-only by every session.
"""

from __future__ import annotations

import core
from core import inside_layer
from ui import door


def _sublayer_cost(model: core.Transformer, trace: core.Trace) -> int:
    return model.run_bytes(trace.n_tokens) - model.trace_bytes(trace.n_tokens)  # one layer's room


@door.shared("the sublayer sizes", cost=_sublayer_cost)
def sublayer_sizes(model: core.Transformer, trace: core.Trace) -> inside_layer.SublayerSizes:
    """core.inside_layer.sublayer_sizes: every layer of the Trace recomputed step by step."""
    return inside_layer.sublayer_sizes(model, trace)


# ---- page 5: what the heads read on each side ----------------------------------------------------
def _later_weight_cost(trace: core.Trace) -> int:
    # the (n, n) float32 mask of later tokens and the (L, H, n) sums: einsum makes no block copy
    n, (n_layers, n_heads) = trace.n_tokens, trace.attentions.shape[:2]
    return 4 * (n * n + n_layers * n_heads * n)


@door.shared("the weight on later tokens", cost=_later_weight_cost)
def weight_on_later_tokens(trace: core.Trace) -> float:
    """core.inside_layer.weight_on_later_tokens of the trace's attention."""
    return inside_layer.weight_on_later_tokens(trace.attentions)
