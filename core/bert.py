"""The name the encoder-only code knew: BERT is now one family of core/transformer.py.

A BERT layer is
    h = LayerNorm(x + MultiHeadAttention(x))        # tokens exchange information
    y = LayerNorm(h + W_2 · GELU(W_1 · h))          # each token is transformed on its own
and the model is an embedding step followed by L such layers; core.transformer.Transformer runs
it (and RoBERTa, DistilBERT, GPT-2 and the Llama family) on one forward path.
"""

from __future__ import annotations

from core.transformer import (
    BertLayerWeights,
    LayerWeights,
    NextPieces,
    RunOptions,
    Trace,
    Transformer,
)

BertEncoder = Transformer  # one class: patching BertEncoder.run patches Transformer.run

__all__ = [
    "BertEncoder",
    "BertLayerWeights",
    "LayerWeights",
    "NextPieces",
    "RunOptions",
    "Trace",
    "Transformer",
]
