"""Attention Explorer's subject matter: attention math and an own transformer (no UI here).

import core
model = core.load_model("minilm")
trace = model.run("the bank of the river", pair=None, scale=True, causal=False)

A decoder (GPT-2, the Llama family) is causal by nature: model.run(text) masks the future, and
causal=False removes the mask. model.next_pieces(trace, k=5) reads its likeliest next pieces.
"""

from core.errors import CheckpointError, EmptyInput, ModelUnavailable
from core.models import BUNDLED, SUGGESTED_MODELS, load_folder, load_model
from core.transformer import NextPieces, RunOptions, Trace, Transformer

__all__ = [
    "BUNDLED",
    "SUGGESTED_MODELS",
    "Transformer",
    "CheckpointError",
    "EmptyInput",
    "ModelUnavailable",
    "NextPieces",
    "RunOptions",
    "Trace",
    "Transformer",
    "load_folder",
    "load_model",
]
