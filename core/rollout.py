"""How information moves from the input word pieces to the top layer, across all layers.

One attention matrix says where a layer's queries look. After six layers, a top-layer vector
mixes what every earlier layer mixed; three ways to follow that mixing through the whole stack:

- attention rollout (Abnar & Zuidema, 2020): average the heads, add the residual connection as
  ½(Ā + I), and multiply the layers' matrices. Assumes every layer mixes token vectors linearly
  with these weights (it ignores values, W_O, LayerNorm and the feed-forward block).
- attention flow (same paper): treat the same per-layer matrices as pipe capacities of a
  layered graph and ask how much can flow from an input piece to a top-layer position
  (maximum flow). Exact for that graph, but one max-flow per (input, output) pair.
- norm-based contributions: replace the weight α_ij by the length of what token j actually
  adds to token i, ‖Σ_h α_ij^h v_j^h W_Oʰ‖ (Kobayashi et al., 2020), with the residual and the
  LayerNorm after attention decomposed exactly (Kobayashi et al., 2021): both are analyses of
  one layer. Rolling such contributions out through every layer is the idea of GlobEnc
  (Modarressi et al., 2022, which also splits the second LayerNorm) and ALTI (Ferrando et al.,
  2022, contributions by distance rather than length); this is the plainest version of it.

For a pre-norm layer (GPT-2, the Llama family) the norm sits before attention, so the sum
x_i + attention goes on into the stream as it is and its split among the inputs is exact
without a norm to decompose.

Shapes: L layers, H heads, n tokens. A mixing matrix M (n, n) has M[i, j] = share of query
position i's new vector that comes from position j; rows sum to 1.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from core.attention import merge_heads
from core.multi_head import head_output_projection
from core.transformer import Trace, Transformer

MAX_FLOW_PIECES = 40  # n² max-flows on a graph of (L + 1)·n nodes (bench/RESULTS.md, Cited in code)
FLOW_RESOLUTION = 1_000_000  # scipy's max-flow wants integer capacities: shares × 10⁶


def _tensor(array: np.ndarray) -> torch.Tensor:
    """A float32 torch copy of a read-only Trace array."""
    return torch.from_numpy(np.array(array, dtype=np.float32))


def residual_attention(attentions: np.ndarray) -> np.ndarray:
    """(L, H, n, n) -> (L, n, n): Â = ½(Ā + I), Ā the mean over heads, rows renormalised."""
    # numpy reads the read-only Trace array without a copy; the mean is a new, writable array
    mean_heads = torch.from_numpy(attentions.mean(axis=1, dtype=np.float32))  # (L, n, n)
    # ½(Ā + I) with its rows renormalised is (Ā + I) renormalised: the ½ cancels
    mean_heads.diagonal(dim1=1, dim2=2).add_(1.0)  # the skip connection keeps x_i itself
    return mean_heads.div_(mean_heads.sum(dim=-1, keepdim=True)).numpy()


def rollout(mixing: np.ndarray) -> np.ndarray:
    """(L, n, n) per-layer mixing -> (L, n, n): R_l = M_l · R_{l-1}, R_0 = M_0.

    R_l[i, j] = share of position i after layer l that traces back to input piece j.
    """
    # torch, not numpy: numpy's BLAS runs two threads, which collapse when sessions compete.
    # float32 is plenty: every factor is a row of shares, so the products stay in [0, 1].
    matrices = _tensor(mixing)  # a copy: any strides
    rolled = torch.empty_like(matrices)
    rolled[0] = matrices[0]
    for layer in range(1, len(matrices)):
        # the new layer mixes what the layers below already mixed
        torch.mm(matrices[layer], rolled[layer - 1], out=rolled[layer])
    return rolled.numpy()


def attention_rollout(attentions: np.ndarray) -> np.ndarray:
    """(L, H, n, n) attention weights -> (L, n, n) attention rollout (Abnar & Zuidema, 2020)."""
    return rollout(residual_attention(attentions))


def to_sentence(rolled_top: np.ndarray) -> np.ndarray:
    """(n, n) top-layer mixing -> (n,): each input piece's share of the mean-pooled sentence.

    The sentence embedding is the mean of the top rows, so its share from piece j is the mean
    of column j. Sums to 1 when every row does.
    """
    return rolled_top.mean(axis=0)


# ---- attention flow ---------------------------------------------------------------------------


def _flow_graph(mixing: np.ndarray) -> csr_matrix:
    """(L, n, n) -> the layered graph: node l·n + j -> node (l+1)·n + i with capacity M_l[i, j]."""
    n_layers, n, _ = mixing.shape
    capacities = np.rint(mixing * FLOW_RESOLUTION).astype(np.int32)  # (L, n_q, n_k)
    layer, query, key = np.indices(capacities.shape).reshape(3, -1)
    tails = layer * n + key  # edges leave the key position in the layer below
    heads = (layer + 1) * n + query  # and enter the query position one layer up
    size = (n_layers + 1) * n
    return csr_matrix((capacities.reshape(-1), (tails, heads)), shape=(size, size))


def attention_flow(mixing: np.ndarray, max_pieces: int = MAX_FLOW_PIECES) -> np.ndarray | None:
    """(L, n, n) -> (n, n) F[i, j] = max-flow from input piece j to top position i, or None.

    None when n > max_pieces: the n² max-flows take too long to stay interactive.
    """
    n_layers, n, _ = mixing.shape
    if n > max_pieces:
        return None
    graph = _flow_graph(mixing)
    top = n_layers * n  # index of the first top-layer node
    flow = np.empty((n, n))
    for j in range(n):
        for i in range(n):
            flow[i, j] = maximum_flow(graph, j, top + i).flow_value
    return flow / FLOW_RESOLUTION


# ---- norm-based contributions (Kobayashi et al., 2020, 2021) -----------------------------------


def _centre_and_scale(vectors: torch.Tensor, gamma: torch.Tensor | None) -> torch.Tensor:
    """P(z) = γ ⊙ (z − mean(z)) over the last axis: LayerNorm's linear part, before ÷ σ.

    gamma None: no norm follows the sum (a pre-norm layer), P is the identity.
    """
    if gamma is None:
        return vectors
    return gamma * (vectors - vectors.mean(dim=-1, keepdim=True))


def _gamma_after_attention(model: Transformer, layer: int) -> torch.Tensor | None:
    """(d,) γ of the LayerNorm that reads x + attention (post-norm: BERT, RoBERTa, DistilBERT);
    None for a pre-norm layer (GPT-2, Llama), whose sum goes on into the stream unnormed: its
    norm comes before attention, inside what each value already is."""
    if model.arch.norm_position == "pre":
        return None
    return model.layers[layer].attn_norm[0].float()


# P(W_Oʰ) of every layer, per model: it depends on the weights alone, so it is worked out once.
# Weak keys: a model dropped from the app's cache takes its entry along.
_CENTRED_OUTPUT: weakref.WeakKeyDictionary[Transformer, dict[int, torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def _centred_output_projection(model: Transformer, layer: int) -> torch.Tensor:
    """(H, d_head, d) P(W_Oʰ): each head's slice of W_O with LayerNorm's linear part folded in."""
    per_layer = _CENTRED_OUTPUT.setdefault(model, {})
    if layer not in per_layer:  # two sessions may both work it out: the same numbers
        gamma = _gamma_after_attention(model, layer)  # (d,) or None
        w_o = torch.from_numpy(head_output_projection(model, layer))  # (H, d_head, d)
        per_layer[layer] = _centre_and_scale(w_o, gamma)
    return per_layer[layer]


# The quadratic forms are taken a block of keys at a time: a block's products, (keys, H, n_q)
# float32, stay under KEY_BLOCK_BYTES, under the app's 1 MB malloc threshold (ui/housekeeping.py)
# above which every new array is a fresh mapping whose pages are faulted in on first touch, and
# within a core's L2 cache, where the next step reads them back.
KEY_BLOCK_BYTES = 1_000_000


def _keys_per_block(n_heads: int, n: int) -> int:
    """Keys per block, as even as the count allows: a block's products are (keys, H, n_q) float32.

    n keys in the fewest blocks that fit, each ⌈n / blocks⌉ keys; the last may be shorter.
    """
    most = max(1, KEY_BLOCK_BYTES // (4 * n_heads * n))
    blocks = max(1, -(-n // most))
    return -(-n // blocks)


def _read_only(array: np.ndarray) -> torch.Tensor:
    """A torch view of a read-only Trace array, for reading only: no copy.

    torch warns that a view of a read-only array could be written to; this code never does.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def _contribution_norms(model: Transformer, trace: Trace, layers: range) -> np.ndarray:
    """(len(layers), n_q, n_k) ‖P(z_ij)‖ per layer: the contribution norms before ÷ σ_i.

    ‖P(z_ij)‖² = ‖Σ_h α_ij^h ũ_j^h + [i = j] x̃_i‖², with ũ_j^h = P(v_j^h W_Oʰ) and x̃ = P(x),
    expands into the Gram matrix G_j of key j's vectors [ũ_j^1 … ũ_j^H, x̃_j]: the square is
    Σ_h,h' α_ij^h G_j[h, h'] α_ij^h', plus on the diagonal the skip connection's
    2 Σ_h α_ii^h G_i[h, H] + G_i[H, H]. So the (n, n, d) block of all z_ij is never built.
    """
    n, n_heads, d = trace.n_tokens, model.n_heads, model.d_model
    block = _keys_per_block(n_heads, n)
    # buffers shared by every layer, each allocated once per call
    stacked = torch.empty(n_heads + 1, n, d)  # (H + 1, n_k, d): ũ of every head, then x̃
    by_key = torch.empty(n_heads, n, n)  # (H, n_k, n_q): α with each head's matrix transposed
    products = torch.empty(block, n_heads, n)  # (c, H, n_q): G_j α_ij for a block of c keys
    squared = torch.empty(len(layers), n, n)  # (layers, n_k, n_q): ‖P(z_ij)‖²
    for index, layer in enumerate(layers):
        gamma = _gamma_after_attention(model, layer)  # (d,) or None
        # ũ_j^h = v_j^h P(W_Oʰ): P is linear, so it is folded into W_O once per model
        centred_w_o = _centred_output_projection(model, layer)  # (H, d_head, d)
        values = _read_only(trace.values[layer])  # (H, n, d_head)
        torch.bmm(values, centred_w_o, out=stacked[:n_heads])  # (H, n_k, d): ũ
        stacked[n_heads] = _centre_and_scale(_read_only(trace.hidden_states[layer]), gamma)  # x̃
        per_key = stacked.transpose(0, 1)  # (n_k, H + 1, d), a view
        gram = torch.bmm(per_key, per_key.transpose(1, 2))  # (n_k, H + 1, H + 1): every G_j
        attention = _read_only(trace.attentions[layer])  # (H, n_q, n_k)
        # each head's matrix transposed, so a key's weights are rows the batched product reads;
        # moving the key axis in front of the heads instead was slower (bench/bench_explain.py)
        by_key.copy_(attention.transpose(1, 2))
        for start in range(0, n, block):
            keys = slice(start, min(start + block, n))
            alpha = by_key[:, keys].transpose(0, 1)  # (H, c, n_q) -> (c, H, n_q), a view
            mixed = products[: keys.stop - start]  # (c, H, n_q)
            torch.bmm(gram[keys, :n_heads, :n_heads], alpha, out=mixed)  # Σ_h' G_j[h, h'] α_ij^h'
            torch.sum(mixed.mul_(alpha), dim=1, out=squared[index, keys])  # Σ_h α_ij^h (…)
        # the skip connection adds x̃_i to z_ii alone: the diagonal gains the cross term and ‖x̃_i‖²
        self_weights = attention.diagonal(dim1=1, dim2=2)  # (H, n): α_ii^h
        cross = (self_weights.T * gram[:, :n_heads, n_heads]).sum(dim=1)  # (n,): Σ_h α_ii^h ũ·x̃
        squared[index].diagonal().add_(2 * cross + gram[:, n_heads, n_heads])
    # rounding can leave a tiny negative square; (layers, n_k, n_q) -> (layers, n_q, n_k)
    return squared.clamp_min_(0).sqrt_().transpose(1, 2).contiguous().numpy()


def layer_contributions(model: Transformer, trace: Trace, layer: int) -> np.ndarray:
    """(n, n) ‖P(z_ij)‖ / σ_i: what input j adds to token i after attention + residual + LN.

    z_ij = Σ_h α_ij^h v_j^h W_Oʰ + [i = j]·x_i, and LN(Σ_j z_ij + b_O) = Σ_j P(z_ij)/σ_i + rest,
    where σ_i is the standard deviation LayerNorm divides row i by and the rest (b_O, β) belongs
    to no token. This is Kobayashi et al. (2021)'s "attention + residual + LayerNorm" split.
    In a pre-norm layer (GPT-2, Llama) no norm follows the sum: P is the identity and σ_i = 1.
    """
    x = _read_only(trace.hidden_states[layer])  # (n, d): the layer's input
    alpha = _read_only(trace.attentions[layer])  # (H, n_q, n_k)
    values = _read_only(trace.values[layer])  # (H, n, d_head), value bias included
    # σ_i of the row LayerNorm sees: y_i = x_i + concat_h(α^h V^h) W_Oᵀ + b_O
    attention_out = model.attention_weights(layer).output(merge_heads(alpha @ values))  # (n, d)
    pre_norm = x + attention_out
    sigma = torch.sqrt(pre_norm.var(dim=-1, unbiased=False) + model.dims.layer_norm_eps)  # (n,)
    if model.arch.norm_position == "pre":  # no norm after the sum: nothing divides the row
        sigma = torch.ones_like(sigma)
    norms = _contribution_norms(model, trace, range(layer, layer + 1))[0]
    return norms / sigma[:, None].numpy()


def contribution_mixing(model: Transformer, trace: Trace) -> np.ndarray:
    """(L, n, n) every layer's contribution norms, each row divided by its sum.

    LayerNorm divides row i by one σ_i, which cancels when the row is divided by its sum: the
    shares need only ‖P(z_ij)‖, not the attention output that σ_i would cost.
    """
    norms = _contribution_norms(model, trace, range(model.n_layers))
    norms /= norms.sum(axis=-1, keepdims=True)
    return norms  # (L, n, n)


def contribution_rollout(model: Transformer, trace: Trace) -> np.ndarray:
    """(L, n, n) norm-based contributions rolled out through the layers (like attention), as
    GlobEnc (Modarressi et al., 2022) and ALTI (Ferrando et al., 2022) chain theirs."""
    return rollout(contribution_mixing(model, trace))
