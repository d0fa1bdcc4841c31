"""The padding mask: a batch pads short sentences to one length, and the mask hides the padding.

Sentences in a batch must have the same length, so shorter ones are filled with [PAD] pieces.
Without a mask every real token would also attend to those fillers and its vector would change;
with core.attention.padding_mask the [PAD] columns get -inf scores, weight exactly 0, and the real
tokens come out as if the padding were not there (position p stays position p: pads go last).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.attention import padding_mask
from core.bert import BertEncoder
from core.errors import EmptyInput

PAD = "[PAD]"


@dataclass(frozen=True)
class PaddedRun:
    """One sentence run with n_pad [PAD] pieces appended, with or without the padding mask."""

    tokens: tuple[str, ...]  # n_real + n_pad pieces
    n_real: int
    masked: bool
    attentions: np.ndarray  # (L, H, N, N), N = n_real + n_pad
    weight_on_pads: np.ndarray  # (L,) mean over heads and real query rows of Σ_pad α
    max_change: float  # max |h_real(padded run) - h(unpadded run)| over layers, tokens, dims


@torch.inference_mode()
def padded_run(
    model: BertEncoder, text: str, n_pad: int, masked: bool, max_real: int | None = None
) -> PaddedRun:
    """Run `text` (cut to max_real pieces) + n_pad [PAD] pieces through every layer, and
    compare its real tokens with the same pieces run alone."""
    limit = min(model.max_positions, max_real or model.max_positions)
    encoded = model.tokenizer.encode(text, None, limit)
    pad_id = model.tokenizer.id_of(PAD)
    if pad_id is None:
        # no model name here: a typed name is visitor text, and this message is shown as is
        raise EmptyInput(f"This model's vocabulary has no {PAD} piece.")
    n_real = len(encoded.input_ids)
    n_pad = max(0, min(int(n_pad), model.max_positions - n_real))
    input_ids = torch.tensor(list(encoded.input_ids) + [pad_id] * n_pad)  # (N,)
    segments = torch.tensor(list(encoded.segments) + [0] * n_pad)  # (N,)
    is_real = torch.arange(n_real + n_pad) < n_real  # (N,) bool
    mask = padding_mask(is_real) if masked else None  # (N, N): real keys only

    x = model.embed(input_ids, segments)  # (N, d_model)
    alone = model.embed(input_ids[:n_real], segments[:n_real])  # (n_real, d_model): the reference
    attentions, worst = [], float((x[:n_real] - alone).abs().max())
    for layer in range(model.n_layers):
        x, attention = model.layer_forward(x, layer, mask, True, None)
        alone, _ = model.layer_forward(alone, layer, None, True, None)
        attentions.append(attention.attn_weights)  # (H, N, N)
        worst = max(worst, float((x[:n_real] - alone).abs().max()))
    weights = torch.stack(attentions)  # (L, H, N, N)
    on_pads = weights[:, :, :n_real, n_real:].double().sum(-1).mean(dim=(1, 2))  # (L,)
    tokens = tuple(encoded.tokens) + (PAD,) * n_pad
    return PaddedRun(tokens, n_real, masked, weights.numpy(), on_pads.numpy(), worst)
