"""Page 1's runs of the model (context from first principles), computed once through ui.door.

The length experiment reads the static vectors of many sentences: worth computing once per model
and sharing read-only with every session.
"""

from __future__ import annotations

import core
from core import context
from ui import door


# ---- page 1: the payoff at two vector lengths ---------------------------------------------------
def _embedding_cost(model: core.Transformer, text_a: str, text_b: str, **_: object) -> int:
    # both sentences' rows three times over (table, layer 0, stretched), their n x n weights
    n = door.pieces(model, text_a) + door.pieces(model, text_b)
    return 4 * (6 * n * model.d_model + 6 * n * n)


@door.shared("the payoff at two lengths", cost=_embedding_cost)
def length_effect(
    model: core.Transformer, text_a: str, text_b: str, word: str
) -> context.LengthEffect | None:
    """core.context.length_effect, once per (model, sentences, word)."""
    return context.length_effect(model, text_a, text_b, word)
