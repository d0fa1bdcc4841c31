"""Page 3's runs of the model (scaling and masking), computed once through ui.door.

The padded batch and cross-attention each run the model on two sentences at once: worth computing
once per (model, sentences) and sharing read-only with every session.
"""

from __future__ import annotations

import core
from core import scaling_masking
from core.transformer import ATTN_INPUT, hook_name
from ui import door

# ---- runs the course pages ask for beside the sidebar's Trace ------------------------------------
PADDING_MAX_PIECES = 64  # the padding lesson reads the sidebar sentence's first 64 word pieces


def _padded_cost(model: core.Transformer, text: str, n_pad: int, **_: object) -> int:
    # the padded run and the same pieces alone, run side by side
    n_real = min(door.pieces(model, text), PADDING_MAX_PIECES)
    return model.run_bytes(n_real + n_pad) + model.run_bytes(n_real)


@door.shared("the padding runs", cost=_padded_cost)
def padded_run(
    model: core.Transformer, text: str, n_pad: int, masked: bool
) -> scaling_masking.PaddedRun:
    """core.scaling_masking.padded_run of the text's first PADDING_MAX_PIECES word pieces."""
    return scaling_masking.padded_run(model, text, n_pad, masked, max_real=PADDING_MAX_PIECES)


def _cross_cost(
    model: core.Transformer, trace_a: core.Trace, trace_b: core.Trace, layer: int, **_: object
) -> int:
    # each sentence rerun up to the layer, what its attention reads kept
    name = [hook_name(ATTN_INPUT, layer)]
    return model.cache_bytes(trace_a.n_tokens, name) + model.cache_bytes(trace_b.n_tokens, name)


@door.shared("cross-attention", cost=_cross_cost)
def cross_attention(
    model: core.Transformer, trace_a: core.Trace, trace_b: core.Trace, layer: int
) -> scaling_masking.CrossAttention:
    """core.scaling_masking.cross_attention: one layer's heads, queries from A, keys and values from B."""
    return scaling_masking.cross_attention(model, trace_a, trace_b, layer)
