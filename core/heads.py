"""Per-head quantities derived from a Trace and the model's weights.

Raw attention weights say how much a query *looks at* a key. What a head actually *moves* into
the query's new vector is α_ij · v_j, which W_O then maps back into the model's space. A key with
a large weight but a tiny transformed value (often [SEP] or punctuation) contributes almost
nothing: the value-weighted view (Kobayashi et al., 2020) shows ‖α_ij · v_j · W_Oʰ‖ instead of α_ij.
"""

from __future__ import annotations

import numpy as np
import torch

from core.bert import BertEncoder, Trace


def head_output_projection(model: BertEncoder, layer: int) -> np.ndarray:
    """(H, d_head, d_model): the slice of W_O that reads each head's output."""
    w_o = model.attention_weights(layer).output.weight  # (d_model, H * d_head), torch layout
    per_head = w_o.T.reshape(
        model.n_heads, model.d_head, model.d_model
    )  # (H*d_head, d) -> (H, d_head, d)
    return per_head.detach().numpy()


def transformed_values(model: BertEncoder, trace: Trace, layer: int) -> np.ndarray:
    """(H, n, d_model): every value vector pushed through its head's slice of W_O, v_j · W_Oʰ."""
    values = torch.from_numpy(np.array(trace.values[layer]))  # (H, n, d_head)
    w_o = torch.from_numpy(head_output_projection(model, layer))  # (H, d_head, d_model)
    return (values @ w_o).numpy()  # (H, n, d_head) @ (H, d_head, d_model) -> (H, n, d_model)


def value_weighted_norms(model: BertEncoder, trace: Trace, layer: int) -> np.ndarray:
    """(H, n, n): ‖α_ij · v_j · W_Oʰ‖ = α_ij · ‖v_j · W_Oʰ‖ (α_ij ≥ 0 is a scalar)."""
    value_norms = np.linalg.norm(transformed_values(model, trace, layer), axis=-1)  # (H, n)
    return trace.attentions[layer] * value_norms[:, None, :]  # broadcast over the query axis


def head_outputs(trace: Trace, layer: int) -> np.ndarray:
    """(H, n, d_head): each head's output α V before the heads are concatenated."""
    return trace.attentions[layer] @ trace.values[layer]  # (H, n, n) @ (H, n, d_head)
