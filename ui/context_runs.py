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


# ---- page 1 (and page 2's Steps 5 and 7): a sentence's static rows -----------------------------
def _static_cost(model: core.Transformer, text: str) -> int:
    return 4 * door.pieces(model, text) * model.d_model  # its (n, d_model) rows, copied


@door.shared("the sentence's static vectors", cost=_static_cost)
def static_sentence(model: core.Transformer, text: str) -> context.StaticSentence:
    """core.context.static_sentence: the text's word pieces and their rows of the word-piece
    table (EmptyInput for a text with none)."""
    return context.static_sentence(model, text)


def pieces_a_run_keeps(model: core.Transformer) -> int:
    """Word pieces of one text a run keeps (core.context.pieces_a_run_keeps): no run, no cost."""
    return context.pieces_a_run_keeps(model)
