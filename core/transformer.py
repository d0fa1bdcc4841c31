"""The project's own transformer: real weights, every step in plain sight, a Trace out.

One layer serves five families; what differs is data (core/weights.py's Architecture):
    post-norm (BERT, RoBERTa, DistilBERT)      pre-norm (GPT-2, Llama)
    h = Norm(x + Attention(x))                  h = x + Attention(Norm(x))
    y = Norm(h + FeedForward(h))                y = h + FeedForward(Norm(h))
Norm is LayerNorm or RMSNorm; FeedForward is W_2 · GELU(W_1 h) or, for Llama, SwiGLU
W_down (SiLU(W_gate h) ⊙ W_up h); positions are a learned table added to the input, or rotary
turns of every query and key inside attention; a decoder masks the future (causal by nature) and
reads its next word piece from the last vector through a final norm and the output head.

There is one forward path, one loop over the layers (_forward), with a named point wherever an
experiment reads or replaces a value (after TransformerLens' run_with_hooks / run_with_cache):

    embed                          the input of layer 0 (word + segment + position rows, normed)
    layers.<l>.stream_in           x, the stream entering layer l
    layers.<l>.attn_input          what attention reads: x, or its first norm (pre-norm)
    layers.<l>.query / key / value per head, queries and keys after the rotary turn
    layers.<l>.attn_weights        softmax of the scores, (H, n, n)
    layers.<l>.attn_write          a, what attention writes into the stream (after W_O)
    layers.<l>.stream_mid          h, the stream between the sublayers
    layers.<l>.ffn_act_input       what the activation reads (W_1 h, or SwiGLU's gate)
    layers.<l>.ffn_write           f, what the feed-forward writes
    layers.<l>.stream_out          y, the layer's output

hook_name(point, layer) builds a name. run_with_hooks(ids, hooks=[(name, hook)]) calls
hook(value, point) at each named point, and a hook may return a replacement; run_with_cache(ids,
names=[...]) keeps those values. run() and run_ids() (a Trace for the pages, its arrays
collected at these points), forward_from_word_vectors() (batched, differentiable, for
gradients) and every experiment (word order, padding, inside a layer, ...) go through the same
loop; so the switches of a run (RunOptions: √d_head scaling, the causal mask, removed heads,
removed positions) act in every layer and their effect reaches the final vectors, the same way
in all of them. No other module steps through the layers (tests/test_architecture.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from core.attention import (
    ATTN_WEIGHTS,
    KEY,
    QUERY,
    VALUE,
    AttentionWeights,
    Projection,
    attention_scores,
    causal_mask,
    multi_head_attention,
    rotary_tables,
)
from core.text import MAX_PIECES, Encoded, PieceTokenizer
from core.weights import Architecture, ModelDims

ENCODER, DECODER = "encoder", "decoder"
LOGIT_CHUNK = 32  # positions read out at once: 32 × a 50,257-piece vocabulary is 6.4 MB

# ---- hook points: every value an experiment may read or replace has one name --------------------
# EMBED is the embedding output; a layer's points are named "layers.<layer>.<point>" (hook_name).
EMBED = "embed"  # (..., n, d_model) the input of layer 0
STREAM_IN = "stream_in"  # (..., n, d_model) x: the stream entering the layer
ATTN_INPUT = "attn_input"  # (..., n, d_model) what attention reads: x, or its first norm (pre-norm)
# QUERY, KEY (after the rotary turn), VALUE: (..., H, n, d_head), keys and values per query head;
# ATTN_WEIGHTS: (..., H, n, n), softmax of the scores (core/attention.py passes them)
ATTN_WRITE = "attn_write"  # (..., n, d_model) a: what attention writes, after W_O
STREAM_MID = "stream_mid"  # (..., n, d_model) h: the stream between the sublayers
FFN_ACT_INPUT = "ffn_act_input"  # (..., n, d_ff) what the activation reads (SwiGLU: the gate)
FFN_WRITE = "ffn_write"  # (..., n, d_model) f: what the feed-forward writes
STREAM_OUT = "stream_out"  # (..., n, d_model) y: the layer's output
LAYER_POINTS = (
    STREAM_IN, ATTN_INPUT, QUERY, KEY, VALUE, ATTN_WEIGHTS, ATTN_WRITE, STREAM_MID, FFN_ACT_INPUT,
    FFN_WRITE, STREAM_OUT,
)  # fmt: skip


@dataclass(frozen=True)
class HookPoint:
    """Where a hook is called: a point of LAYER_POINTS in one layer, or EMBED (layer None)."""

    point: str
    layer: int | None

    @property
    def name(self) -> str:
        return hook_name(self.point, self.layer)


Hook = Callable[[torch.Tensor, HookPoint], "torch.Tensor | None"]  # None keeps the value


def hook_name(point: str, layer: int | None = None) -> str:
    """The one name of a hook point: "embed", or "layers.<layer>.<point>"."""
    if layer is None:
        if point != EMBED:
            raise ValueError(f"{point!r} is a point of a layer: give its layer")
        return EMBED
    if point not in LAYER_POINTS:
        raise ValueError(f"no hook point {point!r}; a layer has {', '.join(LAYER_POINTS)}")
    return f"layers.{layer}.{point}"


def _layer_of(name: str) -> int:
    """The layer of a hook name (-1 for the embedding output)."""
    if name == EMBED:
        return -1
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "layers" or not parts[1].isdigit():
        raise ValueError(f"no hook point {name!r}: names are made by hook_name()")
    return int(parts[1])


class _Hooks:
    """The hooks of one run by name, each called with (value, HookPoint), in the given order."""

    def __init__(self, hooks: Sequence[tuple[str, Hook]], n_layers: int) -> None:
        self.by_name: dict[str, list[Hook]] = {}
        for name, hook in hooks:
            layer = _layer_of(name)  # -1 for the embedding output; a malformed name raises
            if layer >= n_layers or (layer >= 0 and name.split(".")[2] not in LAYER_POINTS):
                raise ValueError(f"no hook point {name!r} in a model of {n_layers} layers")
            self.by_name.setdefault(name, []).append(hook)

    def __bool__(self) -> bool:
        return bool(self.by_name)

    def at(self, point: str, layer: int | None, value: torch.Tensor) -> torch.Tensor:
        """The value after every hook at this point (each may replace it)."""
        if not self.by_name:
            return value
        where = HookPoint(point, layer)
        for hook in self.by_name.get(where.name, ()):
            replaced = hook(value, where)
            value = value if replaced is None else replaced
        return value

    def for_layer(self, layer: int) -> Callable[[torch.Tensor, str], torch.Tensor] | None:
        """The hook core.attention.multi_head_attention calls inside this layer's attention:
        (value, point), the order of every model hook."""
        if not self.by_name:
            return None
        return lambda value, point: self.at(point, layer, value)


@dataclass(frozen=True)
class RunOptions:
    """The switches of one run. The defaults are the model as trained (see causal)."""

    scale: bool = True  # divide scores by √d_head in every layer
    causal: bool = False  # every token sees only itself and tokens before it, in every layer
    positions: bool = True  # positions enter (learned table, or rotary turns)
    ablate: frozenset[tuple[int, int]] = field(default_factory=frozenset)  # (layer, head) removed


@dataclass(frozen=True)
class Trace:
    """Everything one forward pass computed, as read-only float32 numpy arrays.

    n = tokens, L = layers, H = heads. hidden_states[0] is the embedding output (the input of
    layer 0) and hidden_states[l + 1] the output of layer l, for every family: a decoder's final
    norm is not in them (transformers puts it into its last hidden state; the next-piece readout,
    Transformer.next_pieces, applies it). Keys and values are per query head: a key/value head
    shared by a group of query heads (grouped-query attention) appears once for each of them.
    """

    model_name: str
    tokens: tuple[str, ...]  # n readable word pieces incl. specials ([CLS]/[SEP], <s>, …)
    input_ids: np.ndarray  # (n,) int64 vocabulary rows
    segments: np.ndarray  # (n,) int64: 0 = first sentence, 1 = second
    truncated: bool  # True when the input was cut to the model's maximum positions
    n_pieces: int  # word pieces before truncation, specials included
    static: np.ndarray  # (n, d_model) rows of the word-piece table: context-free vectors
    hidden_states: np.ndarray  # (L + 1, n, d_model)
    queries: np.ndarray  # (L, H, n, d_head), after the rotary turn for rotary models
    keys: np.ndarray  # (L, H, n, d_head)
    values: np.ndarray  # (L, H, n, d_head)
    attentions: np.ndarray  # (L, H, n, n): softmax of the scores, rows sum to 1
    options: RunOptions
    kind: str = ENCODER  # "encoder" or "decoder" (causal by nature, predicts the next piece)
    special: tuple[bool, ...] = ()  # n: True for a special piece ([CLS], </s>, <|endoftext|>)
    piece_scheme: str = "wordpiece"  # how pieces join into words: "wordpiece" (##) or "bpe"

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def is_decoder(self) -> bool:
        return self.kind == DECODER

    # The scores are not stored: they follow from the stored queries and keys in one product,
    # and keeping them would cost as much again as the attentions (75 MB at 512 tokens, for
    # every cached run and every run in flight).
    def head_scores(self, layer: int, head: int) -> np.ndarray:
        """(n, n) one head's scores: Q Kᵀ (/√d_head if scaled), -inf where masked."""
        return self._scores(self.queries[layer, head], self.keys[layer, head])

    def layer_scores(self, layer: int) -> np.ndarray:
        """(H, n, n) one layer's scores, every head: a twelfth of the whole block's memory."""
        return self._scores(self.queries[layer], self.keys[layer])

    @property
    def scores(self) -> np.ndarray:
        """(L, H, n, n) every head's scores, computed on each access (prefer layer_scores)."""
        return self._scores(self.queries, self.keys)

    def _scores(self, queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
        # (..., n, d_head) x (..., n, d_head) -> (..., n, n), exactly as the forward pass did
        scores = attention_scores(torch.tensor(queries), torch.tensor(keys), self.options.scale)
        if self.options.causal:
            scores.masked_fill_(~causal_mask(self.n_tokens), float("-inf"))
        return _readonly(scores)


@dataclass(frozen=True)
class NextPieces:
    """The k most likely next word pieces after each of m positions, most likely first."""

    positions: tuple[int, ...]  # m positions of the Trace whose next piece is predicted
    ids: np.ndarray  # (m, k) int64 vocabulary rows
    tokens: tuple[tuple[str, ...], ...]  # m × k readable pieces
    probabilities: np.ndarray  # (m, k) float64: softmax over the whole vocabulary
    log_probabilities: np.ndarray  # (m, k) float64


Norm = tuple[torch.Tensor, torch.Tensor | None]  # (weight, bias); RMSNorm has no bias


@dataclass(frozen=True)
class LayerWeights:
    attention: AttentionWeights
    attn_norm: Norm  # post-norm: after attention; pre-norm: before it
    ffn_in: Projection  # (d_ff, d_model): widen (Llama's up projection)
    ffn_out: Projection  # (d_model, d_ff): narrow back (Llama's down projection)
    ffn_norm: Norm  # post-norm: after the feed-forward; pre-norm: before it
    ffn_gate: Projection | None = None  # (d_ff, d_model): SwiGLU's gate, None without one


def _long_tensor(values: torch.Tensor | np.ndarray | tuple | list) -> torch.Tensor:
    """Integer ids as a torch tensor; numpy input is copied (a Trace's arrays are read-only)."""
    if isinstance(values, torch.Tensor):
        return values.long()
    return torch.tensor(np.asarray(values), dtype=torch.long)


def _readonly(tensor: torch.Tensor, dtype: torch.dtype = torch.float32) -> np.ndarray:
    """A numpy view that cannot be written: a cached Trace is shared by every browser session."""
    array = tensor.detach().to(dtype).numpy()
    array.setflags(write=False)
    return array


class Transformer:
    """A transformer of one of the five families over loaded weights. Stateless after
    construction: safe to share between threads."""

    def __init__(
        self,
        name: str,
        model_dir: Path,
        dims: ModelDims,
        tensors: dict[str, torch.Tensor],
        tokenizer: PieceTokenizer,
    ) -> None:
        self.name = name
        self.model_dir = model_dir
        self.dims = dims
        self.arch: Architecture = dims.arch
        self.tokenizer = tokenizer
        self.word_embeddings = tensors["embeddings.word"]  # (vocab, d_model)
        # (max_positions + offset, d_model), or None when positions are rotary
        self.position_embeddings = tensors.get("embeddings.position")
        self.segment_embeddings = tensors.get("embeddings.segment")  # (type_vocab, d_model)
        self.embedding_norm = self._norm(tensors, "embeddings.norm")
        self.final_norm = self._norm(tensors, "final_norm")
        self.head_weight = (  # (vocab, d_model): the next-piece head, None for an encoder
            (self.word_embeddings if self.arch.tied_head else tensors["head.weight"])
            if self.arch.has_head
            else None
        )
        self.rotary = (  # (cos, sin) (max_positions, d_head), turned by position in attention
            rotary_tables(self.max_positions, dims.d_head, dims.rope_theta)
            if self.arch.positions == "rotary"
            else None
        )
        self.layers = [self._layer(tensors, i) for i in range(dims.n_layers)]

    @staticmethod
    def _norm(tensors: dict[str, torch.Tensor], name: str) -> Norm | None:
        weight = tensors.get(f"{name}.weight")
        return None if weight is None else (weight, tensors.get(f"{name}.bias"))

    def _layer(self, tensors: dict[str, torch.Tensor], i: int) -> LayerWeights:
        def proj(name: str) -> Projection:
            return Projection(
                tensors[f"layers.{i}.{name}.weight"], tensors.get(f"layers.{i}.{name}.bias")
            )

        def norm(name: str) -> Norm:
            return tensors[f"layers.{i}.{name}.weight"], tensors.get(f"layers.{i}.{name}.bias")

        attention = AttentionWeights(proj("query"), proj("key"), proj("value"), proj("attn_out"))
        gate = proj("ffn_gate") if self.arch.gated_ffn else None
        return LayerWeights(
            attention, norm("attn_norm"), proj("ffn_in"), proj("ffn_out"), norm("ffn_norm"), gate
        )

    # ---- sizes ------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.arch.kind

    @property
    def is_decoder(self) -> bool:
        return self.arch.is_decoder

    @property
    def family(self) -> str:
        return self.arch.family

    @property
    def n_layers(self) -> int:
        return self.dims.n_layers

    @property
    def n_heads(self) -> int:
        return self.dims.n_heads

    @property
    def n_kv_heads(self) -> int:
        return self.dims.n_kv_heads

    @property
    def d_model(self) -> int:
        return self.dims.d_model

    @property
    def d_head(self) -> int:
        return self.dims.d_head

    @property
    def max_positions(self) -> int:
        """The most word pieces a run reads: the model's positions, at most MAX_PIECES."""
        return min(self.dims.max_positions, MAX_PIECES)

    # ---- memory ------------------------------------------------------------------------------
    def trace_bytes(self, n: int) -> int:
        """Bytes of the Trace of a run over n word pieces (float32 arrays, int64 ids).

        attentions (L, H, n, n) + queries, keys, values 3 × (L, H, n, d_head)
        + hidden_states (L + 1, n, d_model) + static (n, d_model) + ids and segments 2 × (n,).
        """
        n_layers, n_heads, d_head, d_model = self.n_layers, self.n_heads, self.d_head, self.d_model
        floats = n_layers * n_heads * n * (n + 3 * d_head) + (n_layers + 2) * n * d_model
        return 4 * floats + 2 * 8 * n

    def run_bytes(self, n: int) -> int:
        """Peak bytes a run over n pieces holds: its Trace, plus one layer's scores (H, n, n)
        and the per-layer lists stacked into the Trace (a second copy of Q, K, V and states)."""
        n_heads, d_head, d_model = self.n_heads, self.d_head, self.d_model
        ffn_widths = 3 if self.arch.gated_ffn else 2  # in and out (and SwiGLU's gate)
        per_layer = n_heads * n * n + self.dims.d_ff * n * ffn_widths
        stacked = self.n_layers * (3 * n_heads * n * d_head + n * d_model)
        return self.trace_bytes(n) + 4 * (per_layer + stacked)

    def cache_bytes(self, n: int, names: Iterable[str]) -> int:
        """Peak bytes of run_with_cache over n pieces keeping `names`: each kept value (float32)
        plus one layer's scores and weights in flight (2 × (H, n, n)) and its feed-forward's
        widened vectors (2 or 3 × (n, d_ff))."""
        width = {  # floats per piece at each point
            ATTN_WEIGHTS: self.n_heads * n,
            QUERY: self.n_heads * self.d_head,
            KEY: self.n_heads * self.d_head,
            VALUE: self.n_heads * self.d_head,
            FFN_ACT_INPUT: self.dims.d_ff,
        }
        kept = sum(width.get(name.rsplit(".", 1)[-1], self.d_model) for name in names)
        ffn_widths = 3 if self.arch.gated_ffn else 2
        in_flight = 2 * self.n_heads * n * n + ffn_widths * self.dims.d_ff * n
        return 4 * (n * kept + in_flight)

    # ---- steps ------------------------------------------------------------------------------
    def encode(self, text: str, pair: str | None = None) -> Encoded:
        """Tokenize into the family's input ([CLS] A [SEP] (B [SEP]) for BERT), cut to the
        model's positions."""
        return self.tokenizer.encode(text, pair, self.max_positions)

    def _layer_norm(self, x: torch.Tensor, norm: Norm) -> torch.Tensor:
        """LayerNorm (x - mean) / √(var + eps) γ + β, or RMSNorm γ x / √(mean(x²) + eps)."""
        weight, bias = norm
        if self.arch.norm_kind == "rms":
            inverse_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.dims.layer_norm_eps)
            return weight.to(x.dtype) * (x * inverse_rms)
        return F.layer_norm(x, (self.d_model,), weight, bias, self.dims.layer_norm_eps)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        """The feed-forward's activation, elementwise (GELU, tanh GELU, ReLU or SiLU)."""
        if self.dims.activation == "relu":
            return F.relu(x)
        if self.dims.activation == "silu":
            return F.silu(x)
        if self.dims.activation in ("gelu_new", "gelu_pytorch_tanh"):
            return F.gelu(x, approximate="tanh")
        return F.gelu(x)  # BERT's exact (erf) GELU

    def position_ids(self, n: int) -> torch.Tensor:
        """(n,) the rows of the position table that positions 0..n-1 read (RoBERTa: + offset)."""
        return torch.arange(n) + self.arch.position_offset

    def _embed(
        self,
        word_vectors: torch.Tensor,
        segments: torch.Tensor,
        positions: bool,
        position_ids: torch.Tensor | None,
    ) -> torch.Tensor:
        """(..., n, d_model) word-piece vectors -> (..., n, d_model) the input of layer 0.

        + segment row (if the model has segments) + position row (if learned and positions),
        then the embedding norm (the encoders). Rotary positions act later, inside attention.
        """
        x = word_vectors
        if self.segment_embeddings is not None:
            # A model with one segment row (RoBERTa) adds row 0 to every token, as transformers.
            rows = segments if self.dims.type_vocab_size > 1 else torch.zeros_like(segments)
            x = x + self.segment_embeddings[rows]
        if positions and self.position_embeddings is not None:
            n = word_vectors.shape[-2]
            ids = self.position_ids(n) if position_ids is None else position_ids
            x = x + self.position_embeddings[ids]
        if self.embedding_norm is not None:
            x = self._layer_norm(x, self.embedding_norm)
        return x

    def _position_ids_of(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        """RoBERTa's rule: a padding piece reads the padding row and does not count; None (0..n-1
        plus the offset) for every other family. A visitor can type "<pad>"."""
        if not self.arch.position_offset:
            return None
        padding_idx = self.arch.position_offset - 1
        real = (input_ids != padding_idx).long()
        return torch.cumsum(real, dim=-1) * real + padding_idx

    def _rotary(self, n: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.rotary is None:
            return None
        cos, sin = self.rotary
        return cos[:n].to(dtype), sin[:n].to(dtype)  # (n, d_head) each

    def _layer_step(
        self,
        x: torch.Tensor,
        layer: int,
        mask: torch.Tensor | None,
        options: RunOptions,
        hooks: _Hooks,
        buffers: tuple[torch.Tensor, torch.Tensor] | None = None,
        fused: bool = False,
    ) -> torch.Tensor:
        """One layer, (..., n, d_model) -> (..., n, d_model), each named value passed to hooks.

        buffers: (H, n, n) scores and weights to write attention into (the Trace's block).
        fused: attention in torch's fused kernel, keeping no scores or weights (gradients).
        """
        weights = self.layers[layer]
        x = hooks.at(STREAM_IN, layer, x)
        rotary = self._rotary(x.shape[-2], x.dtype) if options.positions else None
        out_scores, out_weights = buffers or (None, None)

        def attend(attn_input: torch.Tensor) -> torch.Tensor:
            attn_input = hooks.at(ATTN_INPUT, layer, attn_input)
            result = multi_head_attention(
                attn_input, attn_input, weights.attention, self.n_heads, mask, options.scale,
                self._head_keep(layer, options.ablate), out_scores, out_weights,
                n_kv_heads=self.n_kv_heads, rotary=rotary, fused=fused,
                hook=hooks.for_layer(layer),
            )  # fmt: skip
            return hooks.at(ATTN_WRITE, layer, result.output)

        if self.arch.norm_position == "pre":
            # 1. attention reads the normed stream and adds to it; 2. so does the feed-forward
            h = hooks.at(STREAM_MID, layer, x + attend(self._layer_norm(x, weights.attn_norm)))
            ffn = self._feed_forward(self._layer_norm(h, weights.ffn_norm), layer, hooks)
            return hooks.at(STREAM_OUT, layer, h + ffn)
        # 1. attention adds to the stream, then the norm; 2. the feed-forward likewise
        h = hooks.at(STREAM_MID, layer, self._layer_norm(x + attend(x), weights.attn_norm))
        ffn = self._feed_forward(h, layer, hooks)
        return hooks.at(STREAM_OUT, layer, self._layer_norm(h + ffn, weights.ffn_norm))

    def _feed_forward(self, h: torch.Tensor, layer: int, hooks: _Hooks) -> torch.Tensor:
        """(..., n, d_model) -> (..., n, d_model), each token on its own through d_ff."""
        weights = self.layers[layer]
        if weights.ffn_gate is not None:  # SwiGLU: the gate's activation scales the up branch
            gate = hooks.at(FFN_ACT_INPUT, layer, weights.ffn_gate(h))  # (..., n, d_ff)
            widened = self.activation(gate) * weights.ffn_in(h)
        else:
            widened = self.activation(hooks.at(FFN_ACT_INPUT, layer, weights.ffn_in(h)))
        return hooks.at(FFN_WRITE, layer, weights.ffn_out(widened))

    def _head_keep(self, layer: int, ablate: frozenset[tuple[int, int]]) -> torch.Tensor | None:
        removed = [head for (lyr, head) in ablate if lyr == layer]
        if not removed:
            return None
        keep = torch.ones(self.n_heads)
        keep[removed] = 0.0
        return keep

    def options(
        self,
        scale: bool = True,
        causal: bool | None = None,
        positions: bool = True,
        ablate: frozenset[tuple[int, int]] | set | tuple = frozenset(),
    ) -> RunOptions:
        """The switches of a run; causal None means the model's nature (decoders: masked)."""
        causal = self.is_decoder if causal is None else bool(causal)
        return RunOptions(scale, causal, positions, frozenset(tuple(x) for x in ablate))

    # ---- the one forward path ---------------------------------------------------------------
    def _forward(
        self,
        word_vectors: torch.Tensor,
        segments: torch.Tensor,
        options: RunOptions,
        hooks: _Hooks,
        *,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        stop_at_layer: int | None = None,
        blocks: _TraceBlocks | None = None,
        fused: bool = False,
        checkpointed: bool = False,
    ) -> torch.Tensor:
        """(..., n, d_model) word-piece vectors -> (..., n, d_model) the stream after the layers
        run (all, or those before stop_at_layer): the one loop over the layers.

        attention_mask (n, n) bool, True = may attend: kept out of the scores in every layer,
        with the causal mask when the run has one. blocks: attention written straight into the
        Trace's (L, H, n, n) block. fused: attention in torch's fused kernel, which keeps no
        weights; its float sums differ from the Trace's in the last digits. checkpointed: keep
        only each layer's input for the backward pass and recompute the layer there. Neither
        takes hooks: a fused pass has no weights to show them, a checkpointed one would call
        them twice.
        """
        if (checkpointed or fused) and hooks:
            raise ValueError("a fused or checkpointed pass takes no hooks")
        n = word_vectors.shape[-2]
        embedded = self._embed(word_vectors, segments, options.positions, position_ids)
        x = hooks.at(EMBED, None, embedded)  # (..., n, d_model)
        mask = causal_mask(n) if options.causal else None
        if attention_mask is not None:
            mask = attention_mask if mask is None else mask & attention_mask
        last = self.n_layers if stop_at_layer is None else min(stop_at_layer, self.n_layers)
        for layer in range(last):
            if blocks is not None:
                x = self._layer_step(x, layer, mask, options, hooks, blocks.buffers(layer))
            elif checkpointed:
                x = checkpoint(
                    self._layer_step, x, layer, mask, options, hooks, None, fused,
                    use_reentrant=False,
                )  # fmt: skip
            else:
                x = self._layer_step(x, layer, mask, options, hooks, None, fused)
        return x

    def _inputs(
        self, input_ids: torch.Tensor | np.ndarray | tuple | list, segments: object
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(ids, segments, word vectors, position ids) of (n,) or (B, n) ids; segments 0 if None."""
        ids = _long_tensor(input_ids)
        sentence_ids = torch.zeros_like(ids) if segments is None else _long_tensor(segments)
        return ids, sentence_ids, self.word_embeddings[ids], self._position_ids_of(ids)

    @torch.inference_mode()
    def run_with_hooks(
        self,
        input_ids: torch.Tensor | np.ndarray | tuple | list,
        segments: torch.Tensor | np.ndarray | tuple | list | None = None,
        *,
        options: RunOptions | None = None,
        hooks: Sequence[tuple[str, Hook]] = (),
        attention_mask: torch.Tensor | None = None,
        stop_at_layer: int | None = None,
    ) -> torch.Tensor:
        """(n,) or (B, n) word-piece ids -> (..., n, d_model) the stream after the last layer run.

        hooks: (name, hook) pairs, name from hook_name(); hook(value, point) may return a
        replacement (None keeps the value). options: the run's switches (None: the model as
        trained). segments: sentence ids (None: all 0). stop_at_layer l: run layers 0..l-1 only.
        """
        _, sentence_ids, word_vectors, position_ids = self._inputs(input_ids, segments)
        return self._forward(
            word_vectors, sentence_ids, options or self.options(), _Hooks(hooks, self.n_layers),
            position_ids=position_ids, attention_mask=attention_mask, stop_at_layer=stop_at_layer,
        )  # fmt: skip

    def run_with_cache(
        self,
        input_ids: torch.Tensor | np.ndarray | tuple | list,
        segments: torch.Tensor | np.ndarray | tuple | list | None = None,
        *,
        names: Iterable[str],
        options: RunOptions | None = None,
        hooks: Sequence[tuple[str, Hook]] = (),
        attention_mask: torch.Tensor | None = None,
        stop_at_layer: int | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """run_with_hooks, keeping the value at each named point: (last stream, name -> value).

        Kept after the run's own hooks changed it, as the layers above read it. stop_at_layer
        defaults to the layer after the last one a name asks for: nothing above it runs.
        """
        cache: dict[str, torch.Tensor] = {}
        wanted = tuple(names)

        def keep(value: torch.Tensor, point: HookPoint) -> None:
            cache[point.name] = value

        if stop_at_layer is None:
            stop_at_layer = 1 + max((_layer_of(name) for name in wanted), default=self.n_layers)
        last = self.run_with_hooks(
            input_ids, segments, options=options, attention_mask=attention_mask,
            hooks=(*hooks, *((name, keep) for name in wanted)), stop_at_layer=stop_at_layer,
        )  # fmt: skip
        return last, cache

    @torch.inference_mode()
    def attention_input(self, trace: Trace, layer: int) -> torch.Tensor:
        """(n, d_model) what `layer`'s heads read in a run of the Trace's pieces and switches:
        the stream itself where the norm follows the sublayer (post-norm), its first norm where
        the norm comes first (pre-norm). Read at the one forward path's ATTN_INPUT point, so the
        model's own structure decides; nothing above the layer runs."""
        name = hook_name(ATTN_INPUT, layer)
        _, cache = self.run_with_cache(
            trace.input_ids, trace.segments, names=[name], options=trace.options
        )
        return cache[name]

    @torch.inference_mode()
    def run(
        self,
        text: str,
        pair: str | None = None,
        *,
        scale: bool = True,
        causal: bool | None = None,
        positions: bool = True,
        ablate: frozenset[tuple[int, int]] | set | tuple = frozenset(),
    ) -> Trace:
        """Tokenize and run every layer; the switches act inside every layer.

        causal: None is the model's nature (an encoder sees both ways, a decoder only back);
        False on a decoder removes its mask, an experiment off its training distribution.
        """
        options = self.options(scale, causal, positions, ablate)
        return self._trace(self.encode(text, pair), options)

    @torch.inference_mode()
    def run_ids(
        self,
        input_ids: tuple[int, ...] | list[int] | np.ndarray,
        *,
        scale: bool = True,
        causal: bool | None = None,
        positions: bool = True,
        ablate: frozenset[tuple[int, int]] | set | tuple = frozenset(),
    ) -> Trace:
        """run() on word-piece ids chosen by code (no text, no specials added): the same path.

        For inputs no text produces, such as a repeated sequence of random pieces; one sentence.
        """
        options = self.options(scale, causal, positions, ablate)
        encoded = self.tokenizer.encode_ids(
            tuple(np.asarray(input_ids).tolist()), self.max_positions
        )
        return self._trace(encoded, options)

    def _trace(self, encoded: Encoded, options: RunOptions) -> Trace:
        """Every layer on one encoded input, everything kept: the Trace of run() and run_ids()."""
        input_ids, segments, word_vectors, position_ids = self._inputs(
            encoded.input_ids, encoded.segments
        )  # (n,) each, and (n, d_model) word vectors
        blocks = _TraceBlocks(self.n_layers, self.n_heads, input_ids.shape[0])
        self._forward(
            word_vectors, segments, options, _Hooks(blocks.hooks(), self.n_layers),
            position_ids=position_ids, blocks=blocks,
        )  # fmt: skip
        return Trace(
            model_name=self.name,
            tokens=encoded.tokens,
            input_ids=_readonly(input_ids, torch.int64),
            segments=_readonly(segments, torch.int64),
            truncated=encoded.truncated,
            n_pieces=encoded.n_pieces,
            static=_readonly(word_vectors),
            hidden_states=_readonly(torch.stack(blocks.hidden_states)),  # (L + 1, n, d_model)
            queries=_readonly(torch.stack(blocks.queries)),  # (L, H, n, d_head)
            keys=_readonly(torch.stack(blocks.keys)),
            values=_readonly(torch.stack(blocks.values)),
            attentions=_readonly(blocks.attentions),
            options=options,
            kind=self.kind,
            special=encoded.special,
            piece_scheme=self.tokenizer.piece_scheme,
        )

    def forward_from_word_vectors(
        self,
        word_vectors: torch.Tensor,
        segments: torch.Tensor,
        *,
        scale: bool = True,
        causal: bool | None = None,
        positions: bool = True,
        ablate: frozenset[tuple[int, int]] | set | tuple = frozenset(),
        checkpointed: bool = False,
        input_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, n, d_model) word-piece vectors -> (B, n, d_model) last hidden state.

        The same path as run(), batched. Gradients are on request: autograd records when
        word_vectors require grad (gradients, integrated gradients move them); otherwise nothing
        is kept for a backward pass. segments (n,) or (B, n) int. The last hidden state is the
        output of the last layer, before a decoder's final norm (as in the Trace).
        checkpointed: keep only each layer's input for the backward pass and recompute the
        layer there (torch.utils.checkpoint): the same gradients for one extra forward pass,
        with one layer's attention block in memory instead of every layer's.
        input_ids (n,) or (B, n): the pieces the vectors stand for, so that the positions read
        are the Trace's (RoBERTa: a typed "<pad>" reads the padding row and does not count);
        None reads positions 0..n-1, right only when no piece is the padding piece.
        """
        options = self.options(scale, causal, positions, ablate)
        position_ids = None if input_ids is None else self._position_ids_of(_long_tensor(input_ids))
        return self._forward(
            word_vectors, segments, options, _Hooks((), self.n_layers), fused=True,
            position_ids=position_ids, checkpointed=checkpointed and torch.is_grad_enabled(),
        )  # fmt: skip

    # ---- what a decoder predicts --------------------------------------------------------------
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., d_model) a layer's output -> (..., vocab) next-piece scores: final norm, head.

        Differentiable. Read from an earlier layer's output this is the logit lens
        (nostalgebraist, 2020): a reading of the stream, not what the model computes there.
        """
        if self.head_weight is None:
            raise ValueError(f"{self.name} is an encoder: it has no next-piece head")
        if self.final_norm is not None:
            hidden = self._layer_norm(hidden, self.final_norm)
        return hidden @ self.head_weight.to(hidden.dtype).T

    @torch.inference_mode()
    def top_pieces(self, hidden: np.ndarray, k: int = 5) -> NextPieces:
        """(m, d_model) layer outputs -> the k likeliest next pieces of each, read in chunks so
        that (m, vocab) scores are never held at once."""
        hidden_t = torch.as_tensor(np.asarray(hidden, dtype=np.float32))  # (m, d_model)
        k = min(k, self.dims.vocab_size)
        ids, log_probs = [], []
        for start in range(0, hidden_t.shape[0], LOGIT_CHUNK):
            log_softmax = torch.log_softmax(
                self.logits(hidden_t[start : start + LOGIT_CHUNK]).double(), dim=-1
            )  # (chunk, vocab)
            top = log_softmax.topk(k, dim=-1)
            ids.append(top.indices)
            log_probs.append(top.values)
        top_ids = torch.cat(ids).numpy() if ids else np.zeros((0, k), dtype=np.int64)
        top_log = torch.cat(log_probs).numpy() if log_probs else np.zeros((0, k))
        tokens = tuple(tuple(self.tokenizer.token_of(int(i)) for i in row) for row in top_ids)
        return NextPieces(tuple(range(len(top_ids))), top_ids, tokens, np.exp(top_log), top_log)

    def next_pieces(
        self, trace: Trace, k: int = 5, positions: list[int] | tuple[int, ...] | None = None
    ) -> NextPieces:
        """The decoder's k likeliest next pieces after each position of a Trace (default: all),
        computed now from the last hidden state, never stored in the Trace."""
        chosen = tuple(range(trace.n_tokens)) if positions is None else tuple(positions)
        read = self.top_pieces(trace.hidden_states[-1][list(chosen)], k)
        return NextPieces(chosen, read.ids, read.tokens, read.probabilities, read.log_probabilities)

    # ---- read-only views of the weights, for pages that show them ---------------------------
    def word_vectors(self) -> np.ndarray:
        """(vocab, d_model) the context-free word-piece table."""
        return _readonly(self.word_embeddings)

    def position_vectors(self) -> np.ndarray:
        """(max_positions, d_model) the rows of the learned position table a run can use."""
        if self.position_embeddings is None:
            raise ValueError(f"{self.name} has rotary positions: there is no position table")
        offset = self.arch.position_offset
        return _readonly(self.position_embeddings[offset : offset + self.max_positions])

    def attention_weights(self, layer: int) -> AttentionWeights:
        """The four projections of one layer's attention (torch tensors; do not modify)."""
        return self.layers[layer].attention


class _TraceBlocks:
    """What run() keeps of every layer, collected through the hook points. The attention
    weights are written straight into one (L, H, n, n) block: at 512 tokens it is 75 MB, and
    stacking per-layer copies would double the work. The scores need one layer's room at a
    time (the Trace recomputes them)."""

    def __init__(self, n_layers: int, n_heads: int, n: int) -> None:
        self.n_layers = n_layers
        self.attentions = torch.empty(n_layers, n_heads, n, n)  # (L, H, n, n)
        self.layer_scores = torch.empty(n_heads, n, n)  # (H, n, n), reused by every layer
        self.hidden_states: list[torch.Tensor] = []  # embedding output, then each layer's
        self.queries: list[torch.Tensor] = []
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def buffers(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(H, n, n) scores and weights that `layer`'s attention writes into."""
        return self.layer_scores, self.attentions[layer]

    def hooks(self) -> list[tuple[str, Hook]]:
        """(name, hook) pairs that keep the states, queries, keys and values of every layer."""
        kept = {
            STREAM_OUT: self.hidden_states, QUERY: self.queries, KEY: self.keys,
            VALUE: self.values,
        }  # fmt: skip

        def keep(value: torch.Tensor, point: HookPoint) -> None:
            kept[point.point].append(value)

        def keep_embedded(value: torch.Tensor, _point: HookPoint) -> None:
            self.hidden_states.append(value)

        return [(EMBED, keep_embedded)] + [
            (hook_name(point, layer), keep) for layer in range(self.n_layers) for point in kept
        ]
