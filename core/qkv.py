"""The math behind page 2, queries, keys and values: three roles for every token.

Give each token three vectors through three matrices,
    Q = X W_q,  K = X W_k,  V = X W_v,  output = softmax(Q Kᵀ / √d_k) V,
with the matrices either random (seeded) or cut out of one head of the loaded model, then follow
one query through the formula and test what the roles change: asymmetric scores, order, one word
followed through every head.

Shapes: n tokens, d = d_model, d_k = width of queries and keys, d_v = width of values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.attention import (
    NEAREST_TIE,
    apply_mask,
    attention_scores,
    causal_mask,
    masked_softmax,
)
from core.context import (
    index_in_both,
    parameter_free,
)
from core.positional import cosine, rotary_turn, shuffle_order
from core.transformer import (
    ATTN_INPUT,
    ATTN_WEIGHTS,
    EMBED,
    VALUE,
    Trace,
    Transformer,
    hook_name,
)


@dataclass(frozen=True)
class QKVProjections:
    """Three linear maps in the textbook layout: q = x W_q + b_q with W_q of shape (d, d_k)."""

    w_query: np.ndarray  # (d_model, d_k)
    w_key: np.ndarray  # (d_model, d_k)
    w_value: np.ndarray  # (d_model, d_v)
    b_query: np.ndarray  # (d_k,)
    b_key: np.ndarray  # (d_k,)
    b_value: np.ndarray  # (d_v,)

    @property
    def d_k(self) -> int:
        return self.w_query.shape[1]


def random_projections(d_model: int, d_k: int, seed: int, std: float = 1.0) -> QKVProjections:
    """Seeded W_q, W_k, W_v (d_model, d_k) with entries ~ N(0, std²) and zero biases.

    With std = 1 each component of q = x W_q is a random mix of x with spread ‖x‖, so on the
    static vectors (‖x‖ ≈ 1.3) scores differ enough for the weights to show a preference.
    """
    generator = torch.Generator().manual_seed(int(seed))
    w_query, w_key, w_value = (
        torch.randn(d_model, d_k, generator=generator) * std for _ in range(3)
    )
    zeros = np.zeros(d_k, dtype=np.float32)
    return QKVProjections(
        w_query.numpy(), w_key.numpy(), w_value.numpy(), zeros, zeros.copy(), zeros.copy()
    )


def head_projections(model: Transformer, layer: int, head: int) -> QKVProjections:
    """The (d_model, d_head) slices of one trained head's W_q, W_k, W_v and their biases.

    Checkpoints store a projection as (out, in) = (H * d_head, d_model); head h owns output rows
    h*d_head .. (h+1)*d_head - 1 (the same cut core.attention.split_heads makes). With grouped
    key/value heads (the Llama family) query head h reads key/value head h // (H / H_kv).
    A rotary model also turns q and k by position inside attention; these slices do not.
    """
    weights = model.attention_weights(layer)
    kv_head = head // (model.n_heads // model.n_kv_heads)

    def cut(projection, at: int) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(at * model.d_head, (at + 1) * model.d_head)
        weight = projection.weight[rows].T  # (d_head, d_model) -> (d_model, d_head)
        bias = projection.bias[rows] if projection.bias is not None else torch.zeros(model.d_head)
        return weight.detach().numpy().copy(), bias.detach().numpy().copy()

    (w_q, b_q), (w_k, b_k), (w_v, b_v) = (
        cut(weights.query, head),
        cut(weights.key, kv_head),
        cut(weights.value, kv_head),
    )
    return QKVProjections(w_q, w_k, w_v, b_q, b_k, b_v)


@dataclass(frozen=True)
class QKVResult:
    """Every matrix of one attention head, from the projections to the output."""

    query: np.ndarray  # (n, d_k) Q = X W_q + b_q
    key: np.ndarray  # (n, d_k) K = X W_k + b_k
    value: np.ndarray  # (n, d_v) V = X W_v + b_v
    dot: np.ndarray  # (n, n) Q Kᵀ before scaling and masking
    scores: np.ndarray  # (n, n) Q Kᵀ / √d_k if scaled, -inf where the mask forbids
    attn_weights: np.ndarray  # (n, n) row-wise softmax of scores
    output: np.ndarray  # (n, d_v) attn_weights V
    scale: bool
    causal: bool


def qkv_attention(
    x: np.ndarray,
    projections: QKVProjections,
    scale: bool = True,
    causal: bool = False,
    rotary_theta: float | None = None,
) -> QKVResult:
    """x (n, d_model) -> Q, K, V, Q Kᵀ, scores, softmax weights and output of one head.

    rotary_theta: turn row p of Q and K by position p, as a rotary model does inside attention
    (core.positional.rotary_turn); None leaves them unturned.
    """
    x_t = torch.from_numpy(np.array(x, dtype=np.float32))  # a writable copy of a read-only view

    def project(weight: np.ndarray, bias: np.ndarray) -> torch.Tensor:
        return x_t @ torch.from_numpy(weight) + torch.from_numpy(bias)  # (n, d) @ (d, d_k)

    # 1. Three roles for every token: what it looks for, what it offers, what it passes on.
    query = project(projections.w_query, projections.b_query)  # (n, d_k)
    key = project(projections.w_key, projections.b_key)  # (n, d_k)
    value = project(projections.w_value, projections.b_value)  # (n, d_v)
    if rotary_theta is not None:  # positions enter as a turn of each query and key row
        query, key = _turned(query, rotary_theta), _turned(key, rotary_theta)
    # 2. Match every query with every key.
    dot = attention_scores(query, key, scale=False)  # (n, n)
    mask = causal_mask(x_t.shape[0]) if causal else None
    scores = apply_mask(attention_scores(query, key, scale=scale), mask)  # (n, n)
    # 3. Turn each row of scores into weights that sum to 1.
    attn_weights = masked_softmax(scores)  # (n, n)
    # 4. Each output row is the weighted sum of the value rows.
    output = attn_weights @ value  # (n, n) @ (n, d_v) -> (n, d_v)
    return QKVResult(
        query.numpy(),
        key.numpy(),
        value.numpy(),
        dot.numpy(),
        scores.numpy(),
        attn_weights.numpy(),
        output.numpy(),
        scale,
        causal,
    )


def _turned(rows: torch.Tensor, theta: float) -> torch.Tensor:
    """(n, d_k) rows, row p turned by position p (core.positional.rotary_turn). A model's heads
    are even; a random head of odd width leaves its last coordinate unturned."""
    even = 2 * (rows.shape[-1] // 2)
    positions = np.arange(rows.shape[0])
    turned = torch.from_numpy(rotary_turn(rows[:, :even].numpy(), positions, theta)).float()
    return torch.cat([turned, rows[:, even:]], dim=-1)  # (n, d_k)


@dataclass(frozen=True)
class QueryRow:
    """One query token followed through the head: every number that makes its output row."""

    index: int  # i, the query token
    products: np.ndarray  # (n, d_k) q_i ⊙ k_j: row j summed is the dot product q_i·k_j
    dots: np.ndarray  # (n,) q_i·k_j
    scores: np.ndarray  # (n,) the scaled (and masked, -inf) scores of row i
    weights: np.ndarray  # (n,) α_ij, summing to 1
    weighted_values: np.ndarray  # (n, d_v) α_ij v_j: the part of v_j that reaches the output
    output: np.ndarray  # (d_v,) Σ_j α_ij v_j, row i of the head's output


def follow_query(result: QKVResult, index: int) -> QueryRow:
    """Row `index` of the head, key by key: q⊙k_j (n, d_k), q·k_j, score, α_ij, α_ij v_j (n, d_v)."""
    query = result.query[index]  # (d_k,)
    products = query[None, :] * result.key  # broadcast over keys: (1, d_k) * (n, d_k)
    weights = result.attn_weights[index]  # (n,)
    weighted_values = weights[:, None] * result.value  # (n, 1) * (n, d_v)
    return QueryRow(
        index=index,
        products=products,
        dots=products.sum(axis=1),
        scores=result.scores[index],
        weights=weights,
        weighted_values=weighted_values,
        output=weighted_values.sum(axis=0),
    )


def asymmetry(attn_weights: np.ndarray) -> np.ndarray:
    """(n, n) α - αᵀ: entry (i, j) is how much more i attends to j than j attends to i."""
    return attn_weights - attn_weights.T


def most_asymmetric_pair(matrix: np.ndarray) -> tuple[int, int]:
    """The pair (i, j) with the largest m_ij - m_ji of an (n, n) matrix: of the dot products
    q_i·k_j, the pair the projections treat most unevenly; of the weights α, the pair where i
    attends to j much more than back (under a causal mask always a key hidden from j).
    (0, 0) when nothing is uneven (one token, or a symmetric matrix)."""
    difference = asymmetry(matrix)
    i, j = np.unravel_index(int(np.argmax(difference)), difference.shape)
    return int(i), int(j)


def top_keys(attn_weights: np.ndarray) -> np.ndarray:
    """(n, n) bool: the keys holding each row's largest weight, every key within NEAREST_TIE of
    it included (page 8's tie rule: a repeated word's copies have equal rows of X, so float32
    gives them equal scores, and neither wins)."""
    top = attn_weights.max(axis=1, keepdims=True)  # (n, 1)
    return attn_weights >= top - NEAREST_TIE  # (n, n)


def top_key_marks(attn_weights: np.ndarray) -> np.ndarray:
    """(n, n) float: 1 at the keys holding each row's largest weight (top_keys), 0 elsewhere, as
    a heatmap draws them."""
    return top_keys(attn_weights).astype(np.float64)


def rows_that_pick_themselves(attn_weights: np.ndarray) -> int:
    """How many rows i of an (n, n) weight matrix give i itself their largest weight alone: a
    row whose own weight ties with another key's is no win, as a tie is no match on page 8."""
    at_top = top_keys(attn_weights)  # (n, n)
    return int(np.sum(np.diagonal(at_top) & (at_top.sum(axis=1) == 1)))


def rows_tied_with_another(attn_weights: np.ndarray) -> int:
    """How many rows i share their largest weight between i itself and another key j ≠ i."""
    at_top = top_keys(attn_weights)  # (n, n)
    return int(np.sum(np.diagonal(at_top) & (at_top.sum(axis=1) > 1)))


def rows_with_another_top(attn_weights: np.ndarray, reference: np.ndarray) -> int:
    """How many rows of two (n, n) weight matrices of one sentence put their largest weight on
    another key: no key is at the top of both (top_keys; a repeated piece's tied copies count as
    one answer, so a tie that includes the reference's winner is no move)."""
    shared = top_keys(attn_weights) & top_keys(reference)  # (n, n)
    return int(np.sum(~shared.any(axis=1)))


# One head's outputs of the same rows in another order agree to ~1e-7 of the largest output in
# float32: a gap above this share of it is the order itself, not rounding.
ORDER_ROUNDING = 1e-5


@dataclass(frozen=True)
class OrderTest:
    """One head on a sentence and on a shuffle of it, the shuffle's output rows put back.

    Without positions, attention is permutation-equivariant: shuffling the input rows only
    shuffles the output rows, so the gap is rounding. With positions as the model brings them
    in (its position rows added to X, or its rotary turn of every query and key), the same word
    at another place is read differently, and the gap is real.
    """

    tokens: tuple[str, ...]  # (n,) the sentence as read
    shuffled_tokens: tuple[str, ...]  # (n,) the order of the shuffled copy
    gap_without_positions: float  # max |o(P X) - P o(X)|, X = the embedding output, no positions
    gap_with_positions: float  # the same with the model's positions: rows added, or q, k turned
    largest_output: float  # max |o(X)| with positions, so the gaps can be read against it

    @property
    def moved(self) -> bool:
        """False when the sentence had too few words to shuffle (the test shows nothing)."""
        return self.tokens != self.shuffled_tokens

    def order_seen(self, gap: float) -> bool:
        """Is a gap more than float rounding, measured against the largest output?"""
        return gap > ORDER_ROUNDING * self.largest_output


@torch.inference_mode()
def order_test(
    model: Transformer,
    input_ids: np.ndarray,
    segments: np.ndarray,
    special: Sequence[bool],
    tokens: Sequence[str],
    projections: QKVProjections,
    scale: bool = True,
    seed: int = 0,
) -> OrderTest:
    """Run one head (no mask) on a sentence's embedding rows and on a shuffle of the sentence.

    input_ids, segments, special (n,): a run's pieces, sentence ids and which pieces the
    tokenizer added; the shuffle keeps those in place (core.positional.shuffle_order). order[i] is the original position of
    the piece at new position i, so the original output read in the shuffled order is o[order].
    """
    ids = torch.tensor(np.array(input_ids), dtype=torch.long)  # (n,), copied: read-only input
    sentence_ids = torch.tensor(np.array(segments), dtype=torch.long)  # (n,)
    order = shuffle_order(len(ids), seed, np.asarray(segments), special)  # (n,)
    shuffled_ids = ids[torch.from_numpy(order)]  # (n,); every position keeps its segment id

    theta = model.dims.rope_theta if model.arch.positions == "rotary" else None

    def embedded(pieces: torch.Tensor, positions: bool) -> np.ndarray:
        """(n,) ids -> (n, d_model) the embedding output, through the one forward path."""
        options = model.options(positions=positions)
        _, cache = model.run_with_cache(pieces, sentence_ids, names=[EMBED], options=options)
        return cache[EMBED].numpy()

    def gap(positions: bool) -> tuple[float, float]:
        x, x_shuffled = embedded(ids, positions), embedded(shuffled_ids, positions)
        turn = theta if positions else None  # a rotary model's positions act on q and k
        out = qkv_attention(x, projections, scale=scale, rotary_theta=turn).output  # (n, d_v)
        out_shuffled = qkv_attention(x_shuffled, projections, scale, rotary_theta=turn).output
        difference = out_shuffled.astype(np.float64) - out[order]  # row i: the same piece
        return float(np.abs(difference).max()), float(np.abs(out).max())

    without, _ = gap(positions=False)
    with_positions, largest = gap(positions=True)
    return OrderTest(
        tokens=tuple(tokens),
        shuffled_tokens=tuple(tokens[i] for i in order),
        gap_without_positions=without,
        gap_with_positions=with_positions,
        largest_output=largest,
    )


@dataclass(frozen=True)
class SharedWordThroughHeads:
    """One word in two sentences, mixed by page 1's formula and by every head of one layer."""

    word: str
    layer: int
    index_a: int  # the word's first position in sentence A
    index_b: int  # the word's first position in sentence B
    cosine_input: float  # the word's two rows of X (what the layer's heads read)
    input_lengths: tuple[float, float]  # ‖x‖ of the word's two rows of X (A, B)
    self_weight_parameter_free: tuple[float, float]  # softmax(X Xᵀ)[i, i] for the word (A, B)
    cosine_parameter_free: float  # its two rows of softmax(X Xᵀ) X
    cosine_by_head: np.ndarray  # (H,) its two output rows of softmax(Q Kᵀ/√d_k) V, head by head


def shared_word_through_heads(
    model: Transformer, text_a: str, text_b: str, word: str, layer: int = 0
) -> SharedWordThroughHeads:
    """Cosine of `word` across two sentences: in X, after page 1's mixing, after each head.

    X is what `layer`'s heads read in each sentence's own run ([CLS] and [SEP] included; a
    pre-norm model's normalised stream). Each head's output is read from that same run, so it is
    the head as the model computes it: a rotary model's turn of q and k, a decoder's mask and
    shared key/value heads included.
    """
    trace_a, trace_b = model.run(text_a), model.run(text_b)
    i_a, i_b = index_in_both(word, trace_a.tokens, trace_b.tokens)
    x_a, head_outputs_a = _heads_at(model, trace_a, layer)
    x_b, head_outputs_b = _heads_at(model, trace_b, layer)
    free_a, free_b = parameter_free(x_a), parameter_free(x_b)
    by_head = [  # the word's row of each head's output, sentence A against sentence B
        float(cosine(head_outputs_a[head, i_a], head_outputs_b[head, i_b]))
        for head in range(model.n_heads)
    ]
    return SharedWordThroughHeads(
        word=word,
        layer=layer,
        index_a=i_a,
        index_b=i_b,
        cosine_input=float(cosine(x_a[i_a], x_b[i_b])),
        input_lengths=(float(np.linalg.norm(x_a[i_a])), float(np.linalg.norm(x_b[i_b]))),
        self_weight_parameter_free=(
            float(free_a.attn_weights[i_a, i_a]),
            float(free_b.attn_weights[i_b, i_b]),
        ),
        cosine_parameter_free=float(cosine(free_a.output[i_a], free_b.output[i_b])),
        cosine_by_head=np.array(by_head),
    )


def _heads_at(model: Transformer, trace: Trace, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """What `layer`'s heads read, (n, d_model), and what each head writes before W_O,
    (H, n, d_head): softmax(Q Kᵀ/√d_k) V, read at the run's own hook points."""
    names = [hook_name(point, layer) for point in (ATTN_INPUT, ATTN_WEIGHTS, VALUE)]
    _, cache = model.run_with_cache(trace.input_ids, trace.segments, names=names)
    x, attn_weights, value = (cache[name] for name in names)
    # (H, n, n) @ (H, n, d_head) -> (H, n, d_head): each head mixes its values by its weights
    head_outputs = attn_weights @ value
    return x.numpy().copy(), head_outputs.numpy().copy()


@dataclass(frozen=True)
class BilinearForm:
    """The score of a head as one d × d matrix: q_i·k_j = x_i W_q W_kᵀ x_jᵀ (biases left out)."""

    matrix: np.ndarray  # (d_model, d_model) M = W_q W_kᵀ, rank at most d_k
    max_abs_error: float  # max |x_i M x_jᵀ - (x_i W_q)·(x_j W_k)| over the sentence's pairs
    asymmetry: float  # ‖M - Mᵀ‖ / ‖M‖ (Frobenius): 0 means q_i·k_j = q_j·k_i for every pair
    rank: int  # numerical rank of M


def bilinear_form(x: np.ndarray, projections: QKVProjections) -> BilinearForm:
    """M = W_q W_kᵀ, checked against the two-step product on x (n, d_model), in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    w_q = projections.w_query.astype(np.float64)  # (d, d_k)
    w_k = projections.w_key.astype(np.float64)  # (d, d_k)
    matrix = w_q @ w_k.T  # (d, d_k) @ (d_k, d) -> (d, d)
    one_step = x64 @ matrix @ x64.T  # (n, n)
    two_steps = (x64 @ w_q) @ (x64 @ w_k).T  # (n, n): queries times keys, biases left out
    norm = float(np.linalg.norm(matrix))
    return BilinearForm(
        matrix=matrix,
        max_abs_error=float(np.max(np.abs(one_step - two_steps))),
        asymmetry=float(np.linalg.norm(matrix - matrix.T) / norm) if norm else 0.0,
        rank=int(np.linalg.matrix_rank(matrix)),
    )
