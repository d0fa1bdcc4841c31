"""Attention Explorer's subject matter: attention math and an own BERT encoder (no UI here).

import core
model = core.load_model("minilm")
trace = model.run("the bank of the river", pair=None, scale=True, causal=False)
"""

from core.bert import BertEncoder, RunOptions, Trace
from core.errors import CheckpointError, EmptyInput, ModelUnavailable
from core.models import BUNDLED, SUGGESTED_MODELS, load_folder, load_model

__all__ = [
    "BUNDLED",
    "SUGGESTED_MODELS",
    "BertEncoder",
    "CheckpointError",
    "EmptyInput",
    "ModelUnavailable",
    "RunOptions",
    "Trace",
    "load_folder",
    "load_model",
]
