"""Per-head quantities derived from a Trace and the model's weights.

Raw attention weights say how much a query *looks at* a key. What a head actually *moves* into
the query's new vector is α_ij · v_j, which W_O then maps back into the model's space. A key with
a large weight but a tiny transformed value (often [SEP] or punctuation) contributes almost
nothing: the value-weighted view (Kobayashi et al., 2020) shows ‖α_ij · v_j · W_Oʰ‖ instead of α_ij.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.attention import merge_heads
from core.transformer import Trace, Transformer


def head_output_projection(model: Transformer, layer: int) -> np.ndarray:
    """(H, d_head, d_model): the slice of W_O that reads each head's output."""
    w_o = model.attention_weights(layer).output.weight  # (d_model, H * d_head), torch layout
    per_head = w_o.T.reshape(
        model.n_heads, model.d_head, model.d_model
    )  # (H*d_head, d) -> (H, d_head, d)
    return per_head.detach().numpy()


def transformed_values(model: Transformer, trace: Trace, layer: int) -> np.ndarray:
    """(H, n, d_model): every value vector pushed through its head's slice of W_O, v_j · W_Oʰ."""
    values = torch.from_numpy(np.array(trace.values[layer]))  # (H, n, d_head)
    w_o = torch.from_numpy(head_output_projection(model, layer))  # (H, d_head, d_model)
    return (values @ w_o).numpy()  # (H, n, d_head) @ (H, d_head, d_model) -> (H, n, d_model)


def value_weighted_norms(model: Transformer, trace: Trace, layer: int) -> np.ndarray:
    """(H, n, n): ‖α_ij · v_j · W_Oʰ‖ = α_ij · ‖v_j · W_Oʰ‖ (α_ij ≥ 0 is a scalar)."""
    value_norms = np.linalg.norm(transformed_values(model, trace, layer), axis=-1)  # (H, n)
    return trace.attentions[layer] * value_norms[:, None, :]  # broadcast over the query axis


def head_outputs(trace: Trace, layer: int) -> np.ndarray:
    """(H, n, d_head): each head's output α V before the heads are concatenated."""
    return trace.attentions[layer] @ trace.values[layer]  # (H, n, n) @ (H, n, d_head)


def head_write_lengths(model: Transformer, trace: Trace, layer: int) -> np.ndarray:
    """(H,): mean over tokens of ‖head_h · W_Oʰ‖, the length of what each head adds to a
    token's vector (bias aside). A head that writes long vectors moves the tokens most."""
    written = torch.from_numpy(head_outputs(trace, layer)) @ torch.from_numpy(
        head_output_projection(model, layer)
    )  # (H, n, d_head) @ (H, d_head, d_model) -> (H, n, d_model)
    return np.linalg.norm(written.numpy(), axis=-1).mean(axis=-1)  # (H, n) -> (H,)


# ---- multi-head anatomy (the "Multi-head attention" page) -----------------------------------


def concatenated_heads(trace: Trace, layer: int) -> np.ndarray:
    """(n, H * d_head): the heads' outputs side by side, the input of W_O."""
    per_head = torch.from_numpy(head_outputs(trace, layer))  # (H, n, d_head)
    return merge_heads(per_head).numpy()  # (H, n, d_head) -> (n, H * d_head)


def output_projection(model: Transformer, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """W_O (d_model, H * d_head) in torch's (out, in) layout and its bias b_O (d_model,):
    zeros for a model without one (the Llama family)."""
    projection = model.attention_weights(layer).output
    weight = projection.weight.detach().numpy()
    if projection.bias is None:
        return weight, np.zeros(weight.shape[0], dtype=weight.dtype)
    return weight, projection.bias.detach().numpy()


def value_weighted_share(norms: np.ndarray) -> np.ndarray:
    """(…, n_q, n_k) contribution norms -> each query row divided by its sum (rows sum to 1)."""
    totals = norms.sum(axis=-1, keepdims=True)
    return np.divide(norms, totals, out=np.zeros_like(norms), where=totals > 0)


def raw_vs_weighted_gap(attn_weights: np.ndarray, share: np.ndarray) -> np.ndarray:
    """(H, n, n) α and weighted share -> (H,) mean over queries of ½ Σ_j |α_ij − share_ij|.

    0: both views agree; 1: they put all their mass on different keys.
    """
    return 0.5 * np.abs(attn_weights - share).sum(axis=-1).mean(axis=-1)


@dataclass(frozen=True)
class Disagreement:
    """One (query, key) pair where raw attention and the value-weighted share differ most."""

    query: int
    key: int
    attn_weight: float  # α_ij
    weighted_share: float  # ‖α_ij v_j W_Oʰ‖ / Σ_k ‖α_ik v_k W_Oʰ‖


def top_disagreements(
    attn_weights: np.ndarray, share: np.ndarray, k: int = 5
) -> list[Disagreement]:
    """(n, n) α and share of one head -> the k pairs with the largest |α_ij − share_ij|."""
    gap = np.abs(attn_weights - share)  # (n, n)
    order = np.argsort(gap, axis=None)[::-1][:k]  # flat indices, largest gap first
    rows, cols = np.unravel_index(order, gap.shape)
    return [
        Disagreement(int(i), int(j), float(attn_weights[i, j]), float(share[i, j]))
        for i, j in zip(rows, cols, strict=True)
    ]


def disagreement_table(
    attn_weights: np.ndarray, share: np.ndarray, labels: list[str], k: int = 5
) -> list[dict[str, object]]:
    """The k largest disagreements of one head as table rows (query, key, α, share)."""
    return [
        {
            "query": labels[d.query],
            "key": labels[d.key],
            "α": round(d.attn_weight, 3),
            "value-weighted share": round(d.weighted_share, 3),
        }
        for d in top_disagreements(attn_weights, share, k)
    ]
