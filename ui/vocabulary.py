"""The word-piece table as unit rows, with the mask of real word pieces: the nearest words of a
vector (the Embedding projections page, the logit lens), computed once per model through ui.door.
"""

from __future__ import annotations

import core
from ui import door
from ui.models import load_model

PIECE_TEXT_BYTES = 80  # one word piece as a Python str in a list: its object and its pointer


def _vocabulary_cost(model_name: str) -> int:
    from core.embeddings import unit_table_bytes

    model = load_model(model_name)
    vocab_size = model.dims.vocab_size
    # the float32 table (normalised in chunks), every piece's text, and the (vocab,) mask
    return unit_table_bytes(vocab_size, model.d_model) + vocab_size * (PIECE_TEXT_BYTES + 1)


@door.shared("the word-piece table", cost=_vocabulary_cost)
def _vocabulary_view(model_name: str) -> tuple[object, object]:
    from core.embeddings import unit_table, word_mask

    model = load_model(model_name)
    table = unit_table(model.word_vectors())  # (vocab, d) float32 unit rows
    vocabulary = [model.tokenizer.token_of(i) for i in range(table.shape[0])]
    return table, word_mask(vocabulary)


def vocabulary_view(model: core.Transformer) -> tuple[object, object]:
    """(vocab, d) word-piece table with unit rows, and the (vocab,) mask of real word pieces."""
    return _vocabulary_view(model.name)
