"""Scaling, masking, padding and cross-attention: the numbers behind page 3, "Scaling and masking".

Three questions, each answered by a small function:
  * What does softmax do to scores that grow? (saturation: it collapses onto the largest score)
  * Why divide by √d_k? (a dot product of two random d_k-dim vectors has variance d_k)
  * What did a switch change in the real model? (per-row entropy, final-vector cosine to BERT
    as trained)
and cross-attention, which is the same multi-head function fed with two different sentences,
and the padding mask, which lets sentences of different lengths share one batch.

All results are numpy arrays (float64 where they are statistics); the attention math itself
goes through core.attention so every page shows the same formula the encoder runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.attention import (
    apply_mask,
    attention_scores,
    causal_mask,
    masked_softmax,
    multi_head_attention,
    padding_mask,
)
from core.errors import EmptyInput
from core.head_stats import row_entropy
from core.positional import cosine
from core.transformer import (
    ATTN_WEIGHTS,
    EMBED,
    STREAM_OUT,
    Trace,
    Transformer,
    hook_name,
)

# ---------------------------------------------------------------------------------------------
# Softmax and its entropy
# ---------------------------------------------------------------------------------------------


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the last axis (…, n) -> (…, n), via core.attention.masked_softmax."""
    return masked_softmax(torch.from_numpy(np.array(scores, dtype=np.float64))).numpy()


def saturation(scores: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """(n,) scores, (m,) multipliers c -> (m, n) rows softmax(c · s): sharper as c grows."""
    scaled = np.outer(np.asarray(multipliers, dtype=np.float64), scores)  # (m, n)
    return softmax(scaled)


# Multipliers for the saturation curve: 0.1 to 100, evenly spaced on a log axis.
MULTIPLIERS = np.geomspace(0.1, 100.0, 61)
# The multipliers a visitor picks from on page 3, and the rows of its table of them.
CHOICES = (0.5, 1, 2, 5, 10, 20, 50, 100)


def random_scores(n: int, seed: int = 0) -> np.ndarray:
    """(n,) standard-normal scores: the kind of score vector a scaled head produces."""
    return np.random.default_rng(seed).standard_normal(n)


# ---------------------------------------------------------------------------------------------
# Why 1/√d_k
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DotProducts:
    """q·k for random standard-normal queries and keys of width d_k, before and after 1/√d_k."""

    d_k: int
    raw: np.ndarray  # (n_queries, n_keys) q·k
    scaled: np.ndarray  # (n_queries, n_keys) q·k / √d_k

    @property
    def n_queries(self) -> int:
        return self.raw.shape[0]

    @property
    def n_keys(self) -> int:
        return self.raw.shape[1]

    @property
    def raw_variance(self) -> float:
        return float(self.raw.var())

    @property
    def scaled_variance(self) -> float:
        return float(self.scaled.var())

    @property
    def raw_entropy(self) -> float:
        """Mean entropy (bits) of softmax over each query's row of unscaled scores."""
        return float(row_entropy(softmax(self.raw)).mean())

    @property
    def scaled_entropy(self) -> float:
        """Mean entropy (bits) of softmax over each query's row of scaled scores."""
        return float(row_entropy(softmax(self.scaled)).mean())


def random_dot_products(
    d_k: int, n_queries: int = 256, n_keys: int = 256, seed: int = 0
) -> DotProducts:
    """Q (n_queries, d_k), K (n_keys, d_k) ~ N(0, 1) -> all q·k, raw and divided by √d_k.

    Each q·k = Σ_t q_t k_t sums d_k independent products of mean 0 and variance 1, so its
    variance is d_k; dividing by √d_k brings it back to 1 whatever the width.
    """
    rng = np.random.default_rng(seed + d_k)  # a different but reproducible draw per width
    query = torch.from_numpy(rng.standard_normal((n_queries, d_k)))  # (n_queries, d_k)
    key = torch.from_numpy(rng.standard_normal((n_keys, d_k)))  # (n_keys, d_k)
    raw = attention_scores(query, key, scale=False).numpy()  # (n_queries, n_keys)
    scaled = attention_scores(query, key, scale=True).numpy()
    return DotProducts(d_k, raw, scaled)


def entropy_falls_with_width(experiments: list[DotProducts]) -> bool:
    """Whether the unscaled rows' mean entropy falls at every step to a wider d_k (experiments
    in increasing d_k)."""
    entropies = [e.raw_entropy for e in experiments]
    return all(later < earlier for earlier, later in zip(entropies, entropies[1:], strict=False))


def width_table(experiments: list[DotProducts]) -> dict[str, list[float]]:
    """One row per d_k: variances and mean softmax-row entropies, unscaled and scaled."""
    return {
        "d_k": [e.d_k for e in experiments],
        "variance of q·k": [round(e.raw_variance, 2) for e in experiments],
        "variance of q·k/√d_k": [round(e.scaled_variance, 3) for e in experiments],
        "entropy unscaled (bits)": [round(e.raw_entropy, 2) for e in experiments],
        "entropy scaled (bits)": [round(e.scaled_entropy, 2) for e in experiments],
    }


# ---------------------------------------------------------------------------------------------
# The causal mask on one head
# ---------------------------------------------------------------------------------------------


def causal_view(
    trace: Trace, layer: int, head: int, max_tokens: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """This head's scores with the causal mask applied, and the softmax of them.

    Returns (masked_scores (k, k) with −inf above the diagonal, attn_weights (k, k) with exact
    zeros there) for the first k = min(n, max_tokens) tokens. Under a causal mask the first k
    queries only ever see the first k keys, so this corner is exact, not an approximation.
    Uses the queries and keys of `trace`: it shows the mask on one head, whereas a causal *run*
    masks every layer, so its later layers see different inputs.
    """
    k = trace.n_tokens if max_tokens is None else min(trace.n_tokens, max_tokens)
    query = torch.from_numpy(np.array(trace.queries[layer, head, :k]))  # (k, d_head)
    key = torch.from_numpy(np.array(trace.keys[layer, head, :k]))  # (k, d_head)
    scores = attention_scores(query, key, scale=trace.options.scale)  # (n, n)
    masked = apply_mask(scores, causal_mask(query.shape[0]))  # −inf where j > i
    return masked.numpy(), masked_softmax(masked).numpy()


def first_row_without_mask(trace: Trace, layer: int, head: int) -> float:
    """The weight the first query gives itself when the same queries and keys as causal_view's
    meet no mask: the softmax of its scores over all n keys (in a decoder's trace the Trace's
    own weights carry the mask already, so they cannot say this)."""
    query = torch.from_numpy(np.array(trace.queries[layer, head, :1]))  # (1, d_head)
    key = torch.from_numpy(np.array(trace.keys[layer, head]))  # (n, d_head)
    scores = attention_scores(query, key, scale=trace.options.scale)  # (1, n)
    return float(torch.softmax(scores.double(), dim=-1)[0, 0])


# ---------------------------------------------------------------------------------------------
# Comparing two runs of the model
# ---------------------------------------------------------------------------------------------


def _same_tokens(a: Trace, b: Trace) -> None:
    if a.tokens != b.tokens:
        raise ValueError("the two runs read different word pieces; compare runs of the same text")


def final_cosine(default: Trace, variant: Trace) -> np.ndarray:
    """(n,) cosine between each token's last-layer vector in two runs of the same text."""
    _same_tokens(default, variant)
    return cosine(default.hidden_states[-1], variant.hidden_states[-1])


def layer_cosines(default: Trace, variant: Trace) -> np.ndarray:
    """(L + 1, n) cosine between the two runs' vectors of each token after every layer."""
    _same_tokens(default, variant)
    return cosine(default.hidden_states, variant.hidden_states)


@dataclass(frozen=True)
class CosineSummary:
    """How far a set of token vectors moved: the mean cosine and the token that moved most."""

    mean: float
    most_moved: int  # token index with the lowest cosine
    lowest: float


def how_far_moved(cosines: np.ndarray) -> np.ndarray:
    """(n,) cosines to the unchanged vectors -> (n,) 1 − cosine: 0 for a vector that did not
    turn, up to 2 for one that points the opposite way (taller bars = moved more)."""
    return 1.0 - np.asarray(cosines, dtype=np.float64)


def summarize_cosines(cosines: np.ndarray) -> CosineSummary:
    """(n,) cosines -> mean, argmin and min."""
    most_moved = int(np.argmin(cosines))
    return CosineSummary(float(np.mean(cosines)), most_moved, float(cosines[most_moved]))


@dataclass(frozen=True)
class RunComparison:
    """What changed for one head and for the final vectors when a switch was flipped."""

    default_weights: np.ndarray  # (n, n) the chosen head in the default run
    variant_weights: np.ndarray  # (n, n) the same head in the switched run
    default_entropy: np.ndarray  # (n,) bits per query row
    variant_entropy: np.ndarray  # (n,)
    final_cosine: np.ndarray  # (n,) cosine of each token's final vector, variant vs default

    @property
    def mean_entropies(self) -> tuple[float, float]:
        """(default, variant): the head's row entropy in bits, averaged over its query rows."""
        return float(self.default_entropy.mean()), float(self.variant_entropy.mean())


def compare_runs(default: Trace, variant: Trace, layer: int, head: int) -> RunComparison:
    """Heatmaps, per-row entropy and final-vector cosine of two runs for one (layer, head)."""
    _same_tokens(default, variant)
    default_weights = default.attentions[layer, head]
    variant_weights = variant.attentions[layer, head]
    return RunComparison(
        default_weights=default_weights,
        variant_weights=variant_weights,
        default_entropy=row_entropy(default_weights),
        variant_entropy=row_entropy(variant_weights),
        final_cosine=final_cosine(default, variant),
    )


# ---------------------------------------------------------------------------------------------
# Cross-attention
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CrossAttention:
    """Queries from sentence A, keys and values from sentence B, through one real layer."""

    attn_weights: np.ndarray  # (H, n_a, n_b) rows sum to 1 over B's tokens
    output: np.ndarray  # (n_a, d_model): what each A token gathers from B, after W_O


@torch.inference_mode()
def cross_attention(
    model: Transformer, trace_a: Trace, trace_b: Trace, layer: int, scale: bool = True
) -> CrossAttention:
    """multi_head_attention(x_A, x_B) with `layer`'s weights; x = what the layer's attention
    reads in each sentence's own run.

    Each sentence runs on its own through the one forward path (its Trace's pieces and
    switches, up to `layer`), and x_A (n_a, d_model), x_B (n_b, d_model) are read at the layer's
    ATTN_INPUT point (the layer input, or its first norm in a pre-norm model). Keys and values
    may be shared by groups of query heads (the Llama family); no rotary turn and no mask: the
    two sentences' positions are not one sequence.
    """
    x_query, x_key_value = (model.attention_input(trace, layer) for trace in (trace_a, trace_b))
    result = multi_head_attention(
        x_query, x_key_value, model.attention_weights(layer), model.n_heads, scale=scale,
        n_kv_heads=model.n_kv_heads,
    )  # fmt: skip
    return CrossAttention(result.attn_weights.numpy(), result.output.numpy())


def score_spread_by_layer(trace: Trace) -> np.ndarray:
    """(L,) standard deviation of every head's scores in each layer (finite entries only).

    At initialisation the 1/√d_k scale makes this about 1; a trained model sets its own spread.
    """
    spreads = []
    for layer in range(trace.queries.shape[0]):  # one (H, n, n) layer at a time
        scores = trace.layer_scores(layer)  # -inf where masked
        spreads.append(scores[np.isfinite(scores)].std(dtype=np.float64))
    return np.array(spreads)


# ---- the padding mask ------------------------------------------------------------------------
# A batch pads short sentences to one length with [PAD] pieces. Without a mask every real token
# would also attend to those fillers and its vector would change; with
# core.attention.padding_mask the [PAD] columns get -inf scores, weight exactly 0, and the real
# tokens come out as if the padding were not there (position p stays position p: pads go last).
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

    @property
    def mean_weight_on_pads(self) -> float:
        """weight_on_pads averaged over the layers: a real piece's weight on the [PAD] pieces."""
        return float(self.weight_on_pads.mean())


@torch.inference_mode()
def padded_run(
    model: Transformer, text: str, n_pad: int, masked: bool, max_real: int | None = None
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

    # 1. The padded run, its attention and every layer's output; 2. the real pieces alone.
    weight_names = [hook_name(ATTN_WEIGHTS, layer) for layer in range(model.n_layers)]
    state_names = [EMBED] + [hook_name(STREAM_OUT, layer) for layer in range(model.n_layers)]
    options = model.options()  # the model as trained: √d_head, a decoder's own causal mask
    _, padded = model.run_with_cache(
        input_ids, segments, names=weight_names + state_names, options=options, attention_mask=mask
    )
    _, alone = model.run_with_cache(
        input_ids[:n_real], segments[:n_real], names=state_names, options=options
    )
    worst = max(  # (n_real, d_model) per state: the padded run's real rows against the alone run
        float((padded[name][:n_real] - alone[name]).abs().max()) for name in state_names
    )
    attentions = [padded[name] for name in weight_names]  # L × (H, N, N)
    weights = torch.stack(attentions)  # (L, H, N, N)
    on_pads = weights[:, :, :n_real, n_real:].double().sum(-1).mean(dim=(1, 2))  # (L,)
    tokens = tuple(encoded.tokens) + (PAD,) * n_pad
    return PaddedRun(tokens, n_real, masked, weights.numpy(), on_pads.numpy(), worst)
