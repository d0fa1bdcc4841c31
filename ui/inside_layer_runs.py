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
@door.shared("the weight on later tokens")
def weight_on_later_tokens(trace: core.Trace) -> float:
    """core.inside_layer.weight_on_later_tokens of the trace's attention."""
    return inside_layer.weight_on_later_tokens(trace.attentions)
