"""The check that keeps the own encoder honest: the same input through transformers' BertModel.

Imported only when a user asks for the check (or by tests): transformers' modeling code costs
seconds to import, and the app never needs it to draw anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.bert import Trace


@dataclass(frozen=True)
class ParityReport:
    """Largest absolute differences between the own Trace and transformers, per quantity."""

    layers_compared: int  # attention matrices compared (must equal the model's layer count)
    hidden_states_compared: int  # L + 1
    max_abs_attention_diff: float
    max_abs_hidden_diff: float


def load_reference(model_dir: Path) -> torch.nn.Module:
    """transformers' BertModel with eager attention (sdpa would return no attention weights)."""
    from transformers import BertModel

    return BertModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()


@torch.inference_mode()
def reference_outputs(
    reference: torch.nn.Module, trace: Trace
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(attentions per layer (H, n, n), hidden states (n, d_model)) for the Trace's exact input."""
    input_ids = torch.from_numpy(np.array(trace.input_ids)).unsqueeze(0)  # (1, n): a batch of one
    segments = torch.from_numpy(np.array(trace.segments)).unsqueeze(0)
    out = reference(
        input_ids=input_ids,
        token_type_ids=segments,
        output_attentions=True,
        output_hidden_states=True,
    )
    attentions = [a[0].numpy() for a in (out.attentions or ())]
    hidden_states = [h[0].numpy() for h in (out.hidden_states or ())]
    return attentions, hidden_states


def compare(reference: torch.nn.Module, trace: Trace) -> ParityReport:
    """Compare a default-switch Trace with the reference, layer by layer."""
    attentions, hidden_states = reference_outputs(reference, trace)
    attn_diffs = [
        float(np.abs(ref - own).max())
        for ref, own in zip(attentions, trace.attentions, strict=False)
    ]
    hidden_diffs = [
        float(np.abs(ref - own).max())
        for ref, own in zip(hidden_states, trace.hidden_states, strict=False)
    ]
    return ParityReport(
        layers_compared=len(attn_diffs),
        hidden_states_compared=len(hidden_diffs),
        max_abs_attention_diff=max(attn_diffs, default=float("nan")),
        max_abs_hidden_diff=max(hidden_diffs, default=float("nan")),
    )
