"""Page 2b's runs of the model (positional encoding), computed once through ui.door.

The word-order experiment runs the model four times on shuffled sentences and the rotary check
rotates every layer's queries and keys: each is kept per (model, sentence) in the door's one
cache, read-only and shared by every session.
"""

from __future__ import annotations

import core
from core import positional
from core.transformer import ATTN_INPUT, hook_name
from ui import door


# ---- Positional encoding -----------------------------------------------------------------------
def _permutation_cost(
    model: core.Transformer, trace: core.Trace, max_tokens: int, **_: object
) -> int:
    return 2 * model.run_bytes(min(trace.n_tokens, max_tokens))  # the sentence and its shuffle


@door.shared("the word-order experiment", cost=_permutation_cost)
def permutation_experiment(
    model: core.Transformer, trace: core.Trace, use_positions: bool, seed: int, max_tokens: int
) -> positional.PermutationResult:
    """core.positional.permutation_experiment on the Trace's word pieces and sentences.

    Two forward passes (the sentence and its shuffle); at 64 word pieces the result holds
    two (6, 12, 64, 64) blocks, ~2.4 MB."""
    return positional.permutation_experiment(
        model,
        trace.tokens,
        trace.input_ids,
        use_positions,
        int(seed),
        trace.options.scale,
        max_tokens,
        segments=trace.segments,
    )


def _rotary_check_cost(model: core.Transformer, trace: core.Trace, layer: int, **_: object) -> int:
    # the sentence rerun up to the layer, what its attention reads kept
    return model.cache_bytes(trace.n_tokens, [hook_name(ATTN_INPUT, layer)])


@door.shared("the rotary check", cost=_rotary_check_cost)
def rotary_check(
    model: core.Transformer, trace: core.Trace, layer: int, head: int, shift: int
) -> positional.RotaryCheck:
    """core.positional.rotary_check of one head on the Trace's sentence (a rotary model)."""
    return positional.rotary_check(model, trace, layer, head, shift)
