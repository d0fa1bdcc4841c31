"""How information moves from the input word pieces to the top layer, across all layers.

One attention matrix says where a layer's queries look. After six layers, a top-layer vector
mixes what every earlier layer mixed; three ways to follow that mixing through the whole stack:

- attention rollout (Abnar & Zuidema, 2020): average the heads, add the residual connection as
  ½(Ā + I), and multiply the layers' matrices. Assumes every layer mixes token vectors linearly
  with these weights (it ignores values, W_O, LayerNorm and the feed-forward block).
- attention flow (same paper): treat the same per-layer matrices as pipe capacities of a
  layered graph and ask how much can flow from an input piece to a top-layer position
  (maximum flow). Exact for that graph, but one max-flow per (input, output) pair.
- norm-based contributions (Kobayashi et al., 2020; 2021): replace the weight α_ij by the
  length of what token j actually adds to token i, ‖Σ_h α_ij^h v_j^h W_Oʰ‖, with the residual
  and the LayerNorm after attention decomposed exactly; then roll out like attention.

Shapes: L layers, H heads, n tokens. A mixing matrix M (n, n) has M[i, j] = share of query
position i's new vector that comes from position j; rows sum to 1.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable

import numba
import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from core.attention import merge_heads
from core.bert import BertEncoder, Trace
from core.heads import head_output_projection

MAX_FLOW_PIECES = 40  # n² max-flows on a graph of (L + 1)·n nodes: 0.5–0.7 s at 40 on one core
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


def _centre_and_scale(vectors: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """P(z) = γ ⊙ (z − mean(z)) over the last axis: LayerNorm's linear part, before ÷ σ."""
    return gamma * (vectors - vectors.mean(dim=-1, keepdim=True))


# P(W_Oʰ) of every layer, per model: it depends on the weights alone, so it is worked out once.
# Weak keys: a model dropped from the app's cache takes its entry along.
_CENTRED_OUTPUT: weakref.WeakKeyDictionary[BertEncoder, dict[int, torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def _centred_output_projection(model: BertEncoder, layer: int) -> torch.Tensor:
    """(H, d_head, d) P(W_Oʰ): each head's slice of W_O with LayerNorm's linear part folded in."""
    per_layer = _CENTRED_OUTPUT.setdefault(model, {})
    if layer not in per_layer:  # two sessions may both work it out: the same numbers
        gamma = model.layers[layer].attn_norm[0].float()  # (d,)
        w_o = torch.from_numpy(head_output_projection(model, layer))  # (H, d_head, d)
        per_layer[layer] = _centre_and_scale(w_o, gamma)
    return per_layer[layer]


# ũ is worked out for a block of keys at a time, in one buffer reused by every block and layer.
# It stays under KEY_BLOCK_BYTES: under the app's 1 MB malloc threshold (ui/housekeeping.py),
# above which a new array is a fresh mapping whose pages are faulted in on first touch, and
# within a core's L2 cache, where the Gram loop reads it back.
KEY_BLOCK_BYTES = 1_000_000


def _keys_per_block(n_heads: int, d_model: int, n: int) -> int:
    """Keys per block, as even as the count allows: the block of ũ is (H, keys, d) float32.

    n keys in the fewest blocks that fit, each ⌈n / blocks⌉ keys; the last may be shorter.
    """
    most = max(1, KEY_BLOCK_BYTES // (4 * n_heads * d_model))
    blocks = max(1, -(-n // most))
    return -(-n // blocks)


def _read_only(array: np.ndarray) -> torch.Tensor:
    """A torch view of a read-only Trace array, for reading only: no copy.

    torch warns that a view of a read-only array could be written to; this code never does.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def _compiled(fastmath: set[str]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """numba.njit, keeping the machine code on disk when some cache folder can be written.

    numba caches in NUMBA_CACHE_DIR if set, else beside the source, else in the user's cache
    folder. With none writable (a read-only install and home) cache=True raises when the
    decorator runs, at import: then the loops compile on first use in each process instead.
    nogil lets two sessions run them at once.
    """

    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        try:
            return numba.njit(cache=True, nogil=True, fastmath=fastmath)(function)
        except RuntimeError as error:  # "cannot cache function ...: no locator available ..."
            if "no locator" not in str(error):
                raise
            return numba.njit(nogil=True, fastmath=fastmath)(function)

    return decorate


# Why compiled loops: each key has its own small Gram matrix and each (query, key) pair its own
# quadratic form in H numbers (MiniLM: 12), too small for a BLAS call each. Batched through
# torch instead, they needed a keys-first copy of the weights and MKL's products padded to 16
# rows, and the whole split took ~1.5x as long (README, Benchmarks). "reassoc" lets the compiler
# sum a dot product in vector lanes and "contract" fuse a multiply and an add, as BLAS does:
# only the rounding changes.
@_compiled(fastmath={"reassoc", "contract"})
def _key_grams(u_tilde: np.ndarray, x_tilde: np.ndarray, gram: np.ndarray, first_key: int) -> None:
    """Each key's Gram matrix G_j, the dot products of its vectors, into gram (H + 1, H + 1, n).

    u_tilde (H, c, d) holds ũ_j^h for the c keys j = first_key … first_key + c − 1, x_tilde
    (c, d) their x̃_j. Then gram[h, h', j] = ũ_j^h · ũ_j^h' (h ≤ h' < H), gram[h, H, j] =
    ũ_j^h · x̃_j and gram[H, H, j] = ‖x̃_j‖². G_j is symmetric: the lower triangle is neither
    written nor read.
    """
    n_heads, n_keys, d = u_tilde.shape
    for in_block in range(n_keys):
        key = first_key + in_block  # j
        x_j = x_tilde[in_block]
        for h in range(n_heads):
            u_h = u_tilde[h, in_block]
            for other in range(h, n_heads):
                u_other = u_tilde[other, in_block]
                total = np.float32(0.0)
                for dim in range(d):
                    total += u_h[dim] * u_other[dim]
                gram[h, other, key] = total
            total = np.float32(0.0)
            for dim in range(d):
                total += u_h[dim] * x_j[dim]
            gram[h, n_heads, key] = total
        total = np.float32(0.0)
        for dim in range(d):
            total += x_j[dim] * x_j[dim]
        gram[n_heads, n_heads, key] = total


@_compiled(fastmath={"contract"})
def _norms_from_grams(attention: np.ndarray, gram: np.ndarray, out: np.ndarray) -> None:
    """out[i, j] = ‖Σ_h α_ij^h ũ_j^h + [i = j] x̃_i‖ for every query i and key j.

    attention (H, n_q, n_k) is α; gram (H + 1, H + 1, n_k) as _key_grams leaves it. The square
    is Σ_h α_ij^h (G_j[h, h] α_ij^h + 2 Σ_h'>h G_j[h, h'] α_ij^h'), plus on the diagonal the
    skip connection's 2 Σ_h α_ii^h ũ_i^h·x̃_i + ‖x̃_i‖². The keys are the inner loop: α's rows
    and the Gram entries are both contiguous along them.
    """
    n_heads, n_queries, n_keys = attention.shape
    two = np.float32(2.0)  # a plain 2 would make the products float64
    squared = np.empty(n_keys, dtype=np.float32)
    later_heads = np.empty(n_keys, dtype=np.float32)  # Σ_h'>h G_j[h, h'] α_ij^h', per key j
    for i in range(n_queries):
        squared[:] = 0.0
        for h in range(n_heads):
            alpha_h = attention[h, i]  # (n_k,) this head's weights of query i
            later_heads[:] = 0.0
            for other in range(h + 1, n_heads):
                alpha_other = attention[other, i]
                products = gram[h, other]
                for j in range(n_keys):
                    later_heads[j] += products[j] * alpha_other[j]
            own = gram[h, h]
            for j in range(n_keys):
                squared[j] += alpha_h[j] * (own[j] * alpha_h[j] + two * later_heads[j])
        skip = gram[n_heads, n_heads, i]
        for h in range(n_heads):
            skip += two * attention[h, i, i] * gram[h, n_heads, i]
        squared[i] += skip
        for j in range(n_keys):  # rounding can leave a tiny negative square
            out[i, j] = np.sqrt(max(squared[j], np.float32(0.0)))


def _contribution_norms(model: BertEncoder, trace: Trace, layers: range) -> np.ndarray:
    """(len(layers), n_q, n_k) ‖P(z_ij)‖ per layer: the contribution norms before ÷ σ_i.

    ‖P(z_ij)‖² = ‖Σ_h α_ij^h ũ_j^h + [i = j] x̃_i‖², with ũ_j^h = P(v_j^h W_Oʰ) and x̃ = P(x),
    expands into dot products among key j's [ũ_j^1 … ũ_j^H, x̃_j], so the (n, n, d) block of
    all z_ij is never built.
    """
    n, n_heads, d = trace.n_tokens, model.n_heads, model.d_model
    block = _keys_per_block(n_heads, d, n)
    u_buffer = torch.empty(n_heads * block * d)  # ũ of one block of keys
    # (H + 1, H + 1, n_k); NaN until written, so a key a bug left out could not pass unseen
    gram = np.full((n_heads + 1, n_heads + 1, n), np.nan, dtype=np.float32)
    norms = np.empty((len(layers), n, n), dtype=np.float32)  # (layers, n_q, n_k)
    for index, layer in enumerate(layers):
        gamma = model.layers[layer].attn_norm[0].float()  # (d,)
        # ũ_j^h = v_j^h P(W_Oʰ): P is linear, so it is folded into W_O once per model
        centred_w_o = _centred_output_projection(model, layer)  # (H, d_head, d)
        x = _read_only(trace.hidden_states[layer])  # (n, d): the layer's input
        x_tilde = _centre_and_scale(x, gamma)  # (n, d)
        values = _read_only(trace.values[layer])  # (H, n, d_head)
        for start in range(0, n, block):
            keys = slice(start, min(start + block, n))
            # a shorter last block is a prefix of the buffer, contiguous as bmm's out wants
            u_tilde = u_buffer[: n_heads * (keys.stop - start) * d].view(n_heads, -1, d)
            torch.bmm(values[:, keys], centred_w_o, out=u_tilde)  # (H, c, d)
            _key_grams(u_tilde.numpy(), x_tilde[keys].numpy(), gram, start)
        _norms_from_grams(trace.attentions[layer], gram, norms[index])
    return norms


def layer_contributions(model: BertEncoder, trace: Trace, layer: int) -> np.ndarray:
    """(n, n) ‖P(z_ij)‖ / σ_i: what input j adds to token i after attention + residual + LN.

    z_ij = Σ_h α_ij^h v_j^h W_Oʰ + [i = j]·x_i, and LN(Σ_j z_ij + b_O) = Σ_j P(z_ij)/σ_i + rest,
    where σ_i is the standard deviation LayerNorm divides row i by and the rest (b_O, β) belongs
    to no token. This is Kobayashi et al. (2021)'s "attention + residual + LayerNorm" split.
    """
    x = _read_only(trace.hidden_states[layer])  # (n, d): the layer's input
    alpha = _read_only(trace.attentions[layer])  # (H, n_q, n_k)
    values = _read_only(trace.values[layer])  # (H, n, d_head), value bias included
    # σ_i of the row LayerNorm sees: y_i = x_i + concat_h(α^h V^h) W_Oᵀ + b_O
    attention_out = model.attention_weights(layer).output(merge_heads(alpha @ values))  # (n, d)
    pre_norm = x + attention_out
    sigma = torch.sqrt(pre_norm.var(dim=-1, unbiased=False) + model.dims.layer_norm_eps)  # (n,)
    norms = _contribution_norms(model, trace, range(layer, layer + 1))[0]
    return norms / sigma[:, None].numpy()


def contribution_mixing(model: BertEncoder, trace: Trace) -> np.ndarray:
    """(L, n, n) every layer's contribution norms, each row divided by its sum.

    LayerNorm divides row i by one σ_i, which cancels when the row is divided by its sum: the
    shares need only ‖P(z_ij)‖, not the attention output that σ_i would cost.
    """
    norms = _contribution_norms(model, trace, range(model.n_layers))
    norms /= norms.sum(axis=-1, keepdims=True)
    return norms  # (L, n, n)


def contribution_rollout(model: BertEncoder, trace: Trace) -> np.ndarray:
    """(L, n, n) norm-based contributions rolled out through the layers (like attention)."""
    return rollout(contribution_mixing(model, trace))
