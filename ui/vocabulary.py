"""The word-piece table as unit rows, with the mask of real word pieces: the nearest words of a
vector (the Embedding projections page, the logit lens), computed once per model through ui.door.
"""

from __future__ import annotations

import core
from ui import door
from ui.models import load_model


@door.shared("the word-piece table")
def _vocabulary_view(model_name: str) -> tuple[object, object]:
    from core.embeddings import word_mask
    from core.positional import unit_rows

    model = load_model(model_name)
    unit_table = unit_rows(model.word_vectors()).astype("float32")  # (vocab, d) unit rows
    unit_table.setflags(write=False)
    vocabulary = [model.tokenizer.token_of(i) for i in range(unit_table.shape[0])]
    return unit_table, word_mask(vocabulary)


def vocabulary_view(model: core.Transformer) -> tuple[object, object]:
    """(vocab, d) word-piece table with unit rows, and the (vocab,) mask of real word pieces."""
    return _vocabulary_view(model.name)
