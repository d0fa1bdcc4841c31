"""Page 5's runs of the model (inside a layer), computed once through ui.door.

Each result is computed once per (model, sentence) and shared read-only by every session.
"""

from __future__ import annotations

import core
from core import inside_layer
from ui import door


def _sublayer_cost(model: core.Transformer, trace: core.Trace) -> int:
    # a rerun of the sentence that keeps every layer's sublayer values
    return model.cache_bytes(trace.n_tokens, inside_layer.sublayer_names(model))


@door.shared("the sublayer sizes", cost=_sublayer_cost)
def sublayer_sizes(model: core.Transformer, trace: core.Trace) -> inside_layer.SublayerSizes:
    """core.inside_layer.sublayer_sizes: the sentence rerun, each sublayer's write kept."""
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


# ---- page 5: the layer drawn from its weights ----------------------------------------------------
def _stages_cost(model: core.Transformer, **_: object) -> int:
    return 1_000 * model.n_layers  # a few names and counts per stage, read off the weights' shapes


@door.shared("the layer's stages", cost=_stages_cost)
def layer_stages(model: core.Transformer, layer: int = 0) -> list[inside_layer.Stage]:
    """core.inside_layer.layer_stages: one layer's steps with their widths and weight counts."""
    return inside_layer.layer_stages(model, layer)


def _floor_cost(model: core.Transformer) -> int:
    return 3 * 8 * 60_001  # activation_floor's grid of 60,001 float64 points, its image, a copy


@door.shared("the activation's floor", cost=_floor_cost)
def activation_floor(model: core.Transformer) -> float:
    """core.inside_layer.activation_floor: the feed-forward activation's lowest output."""
    return inside_layer.activation_floor(model)
