"""The project's own BERT encoder: real weights, every step in plain sight, a Trace out.

A BERT layer is
    h = LayerNorm(x + MultiHeadAttention(x))        # tokens exchange information
    y = LayerNorm(h + W_2 · GELU(W_1 · h))          # each token is transformed on its own
and the model is an embedding step followed by L such layers. The attention inside every layer
goes through core.attention, so the switches of a run (√d_head scaling, causal mask, removed
heads, removed positions) act in every layer and their effect reaches the final vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from core.attention import (
    AttentionWeights,
    MultiHeadResult,
    Projection,
    attention_scores,
    causal_mask,
    multi_head_attention,
)
from core.text import MAX_PIECES, Encoded, WordPieceTokenizer
from core.weights import BertDims


@dataclass(frozen=True)
class Trace:
    """Everything one forward pass computed, as read-only float32 numpy arrays.

    n = tokens, L = layers, H = heads. hidden_states[0] is the embedding output (the input of
    layer 0) and hidden_states[l + 1] the output of layer l.
    """

    model_name: str
    tokens: tuple[str, ...]  # n word pieces incl. [CLS]/[SEP]
    input_ids: np.ndarray  # (n,) int64 vocabulary rows
    segments: np.ndarray  # (n,) int64: 0 = first sentence, 1 = second
    truncated: bool  # True when the input was cut to the model's maximum positions
    n_pieces: int  # word pieces before truncation, specials included
    static: np.ndarray  # (n, d_model) rows of the word-piece table: context-free vectors
    hidden_states: np.ndarray  # (L + 1, n, d_model)
    queries: np.ndarray  # (L, H, n, d_head)
    keys: np.ndarray  # (L, H, n, d_head)
    values: np.ndarray  # (L, H, n, d_head)
    attentions: np.ndarray  # (L, H, n, n): softmax of the scores, rows sum to 1
    options: RunOptions

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

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
class RunOptions:
    """The switches of one run. The defaults are BERT as trained."""

    scale: bool = True  # divide scores by √d_head in every layer
    causal: bool = False  # every token sees only itself and tokens before it, in every layer
    positions: bool = True  # add the learned position embeddings
    ablate: frozenset[tuple[int, int]] = field(default_factory=frozenset)  # (layer, head) removed


@dataclass(frozen=True)
class BertLayerWeights:
    attention: AttentionWeights
    attn_norm: tuple[torch.Tensor, torch.Tensor]  # LayerNorm (weight, bias) after attention
    ffn_in: Projection  # (d_ff, d_model): widen
    ffn_out: Projection  # (d_model, d_ff): narrow back
    ffn_norm: tuple[torch.Tensor, torch.Tensor]  # LayerNorm (weight, bias) after feed-forward


def _readonly(tensor: torch.Tensor, dtype: torch.dtype = torch.float32) -> np.ndarray:
    """A numpy view that cannot be written: a cached Trace is shared by every browser session."""
    array = tensor.detach().to(dtype).numpy()
    array.setflags(write=False)
    return array


class BertEncoder:
    """A BERT encoder over loaded weights. Stateless after construction: safe to share."""

    def __init__(
        self,
        name: str,
        model_dir: Path,
        dims: BertDims,
        tensors: dict[str, torch.Tensor],
        tokenizer: WordPieceTokenizer,
    ) -> None:
        self.name = name
        self.model_dir = model_dir
        self.dims = dims
        self.tokenizer = tokenizer
        self.word_embeddings = tensors["embeddings.word"]  # (vocab, d_model)
        self.position_embeddings = tensors["embeddings.position"]  # (max_positions, d_model)
        self.segment_embeddings = tensors["embeddings.segment"]  # (type_vocab, d_model)
        self.embedding_norm = (tensors["embeddings.norm.weight"], tensors["embeddings.norm.bias"])
        self.layers = [self._layer(tensors, i) for i in range(dims.n_layers)]

    @staticmethod
    def _layer(tensors: dict[str, torch.Tensor], i: int) -> BertLayerWeights:
        def proj(name: str) -> Projection:
            return Projection(
                tensors[f"layers.{i}.{name}.weight"], tensors[f"layers.{i}.{name}.bias"]
            )

        def norm(name: str) -> tuple[torch.Tensor, torch.Tensor]:
            return tensors[f"layers.{i}.{name}.weight"], tensors[f"layers.{i}.{name}.bias"]

        attention = AttentionWeights(proj("query"), proj("key"), proj("value"), proj("attn_out"))
        return BertLayerWeights(
            attention, norm("attn_norm"), proj("ffn_in"), proj("ffn_out"), norm("ffn_norm")
        )

    # ---- sizes ------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return self.dims.n_layers

    @property
    def n_heads(self) -> int:
        return self.dims.n_heads

    @property
    def d_model(self) -> int:
        return self.dims.d_model

    @property
    def d_head(self) -> int:
        return self.dims.d_head

    @property
    def max_positions(self) -> int:
        """The most word pieces a run reads: the position table's rows, at most MAX_PIECES."""
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
        per_layer = n_heads * n * n + self.dims.d_ff * n * 2  # scores; feed-forward in and out
        stacked = self.n_layers * (3 * n_heads * n * d_head + n * d_model)
        return self.trace_bytes(n) + 4 * (per_layer + stacked)

    # ---- steps ------------------------------------------------------------------------------
    def encode(self, text: str, pair: str | None = None) -> Encoded:
        """Tokenize into [CLS] A [SEP] (B [SEP]), cut to the model's positions."""
        return self.tokenizer.encode(text, pair, self.max_positions)

    def _layer_norm(self, x: torch.Tensor, norm: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.layer_norm(x, (self.d_model,), norm[0], norm[1], self.dims.layer_norm_eps)

    def _activation(self, x: torch.Tensor) -> torch.Tensor:
        if self.dims.activation == "relu":
            return F.relu(x)
        if self.dims.activation in ("gelu_new", "gelu_pytorch_tanh"):
            return F.gelu(x, approximate="tanh")
        return F.gelu(x)  # BERT's exact (erf) GELU

    def embed(
        self, input_ids: torch.Tensor, segments: torch.Tensor, positions: bool = True
    ) -> torch.Tensor:
        """(n,) ids -> (n, d_model): word + position + segment vectors, then LayerNorm."""
        n = input_ids.shape[0]
        x = self.word_embeddings[input_ids] + self.segment_embeddings[segments]
        if positions:
            x = x + self.position_embeddings[:n]  # position p gets row p of the learned table
        return self._layer_norm(x, self.embedding_norm)

    def layer_forward(
        self,
        x: torch.Tensor,
        layer: int,
        mask: torch.Tensor | None,
        scale: bool,
        head_keep: torch.Tensor | None,
        out_scores: torch.Tensor | None = None,
        out_weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, MultiHeadResult]:
        """One encoder layer: (n, d_model) -> (n, d_model), plus what its attention computed."""
        weights = self.layers[layer]
        attention = multi_head_attention(
            x, x, weights.attention, self.n_heads, mask, scale, head_keep, out_scores, out_weights
        )
        h = self._layer_norm(x + attention.output, weights.attn_norm)  # residual + norm
        ffn = weights.ffn_out(self._activation(weights.ffn_in(h)))  # (n, d_ff) -> (n, d_model)
        return self._layer_norm(h + ffn, weights.ffn_norm), attention

    def _head_keep(self, layer: int, ablate: frozenset[tuple[int, int]]) -> torch.Tensor | None:
        removed = [head for (lyr, head) in ablate if lyr == layer]
        if not removed:
            return None
        keep = torch.ones(self.n_heads)
        keep[removed] = 0.0
        return keep

    # ---- the whole pass ---------------------------------------------------------------------
    @torch.inference_mode()
    def run(
        self,
        text: str,
        pair: str | None = None,
        *,
        scale: bool = True,
        causal: bool = False,
        positions: bool = True,
        ablate: frozenset[tuple[int, int]] | set | tuple = frozenset(),
    ) -> Trace:
        """Tokenize and run every layer; the switches act inside every layer."""
        options = RunOptions(scale, causal, positions, frozenset(tuple(x) for x in ablate))
        encoded = self.encode(text, pair)
        input_ids = torch.tensor(encoded.input_ids, dtype=torch.long)  # (n,)
        segments = torch.tensor(encoded.segments, dtype=torch.long)  # (n,)
        n = input_ids.shape[0]
        mask = causal_mask(n) if causal else None

        x = self.embed(input_ids, segments, positions)
        # Every layer's weights are written straight into one (L, H, n, n) block: at 512 tokens
        # it is 75 MB, and stacking per-layer copies would double the work. The scores need
        # only one layer's room at a time (the Trace recomputes them from queries and keys).
        attentions = torch.empty(self.n_layers, self.n_heads, n, n)  # (L, H, n, n)
        layer_scores = torch.empty(self.n_heads, n, n)  # (H, n, n), reused by every layer
        hidden_states, queries, keys, values = [x], [], [], []
        for layer in range(self.n_layers):
            head_keep = self._head_keep(layer, options.ablate)
            x, attention = self.layer_forward(
                x, layer, mask, scale, head_keep, layer_scores, attentions[layer]
            )
            hidden_states.append(x)
            queries.append(attention.query)
            keys.append(attention.key)
            values.append(attention.value)

        return Trace(
            model_name=self.name,
            tokens=encoded.tokens,
            input_ids=_readonly(input_ids, torch.int64),
            segments=_readonly(segments, torch.int64),
            truncated=encoded.truncated,
            n_pieces=encoded.n_pieces,
            static=_readonly(self.word_embeddings[input_ids]),
            hidden_states=_readonly(torch.stack(hidden_states)),  # (L + 1, n, d_model)
            queries=_readonly(torch.stack(queries)),  # (L, H, n, d_head)
            keys=_readonly(torch.stack(keys)),
            values=_readonly(torch.stack(values)),
            attentions=_readonly(attentions),
            options=options,
        )

    # ---- a differentiable pass, beside run() (gradient saliency) ---------------------------
    # run() stays in inference mode and fills preallocated blocks for the Trace; gradients need
    # autograd and a batch axis (integrated gradients runs all its steps at once), so they get
    # their own path here. Its output equals run()'s last hidden state (tests/test_explain.py).
    def forward_from_word_vectors(
        self,
        word_vectors: torch.Tensor,
        segments: torch.Tensor,
        *,
        scale: bool = True,
        causal: bool = False,
        positions: bool = True,
        checkpointed: bool = False,
    ) -> torch.Tensor:
        """(B, n, d_model) word-piece vectors -> (B, n, d_model) last hidden state, with autograd.

        word_vectors stand where rows of the word-piece table would be (gradients and
        integrated gradients move them); segments (n,) or (B, n) int; positions 0..n-1 added.
        checkpointed: keep only each layer's input for the backward pass and recompute the
        layer there (torch.utils.checkpoint): the same gradients for one extra forward pass,
        with one layer's attention block in memory instead of every layer's.
        """
        n = word_vectors.shape[1]
        x = word_vectors + self.segment_embeddings[segments]  # (B, n, d) + (n, d)
        if positions:
            x = x + self.position_embeddings[:n]
        x = self._layer_norm(x, self.embedding_norm)
        mask = causal_mask(n) if causal else None
        for weights in self.layers:
            if checkpointed:
                x = checkpoint(self._batched_layer, x, weights, mask, scale, use_reentrant=False)
            else:
                x = self._batched_layer(x, weights, mask, scale)
        return x

    def _batched_layer(
        self,
        x: torch.Tensor,
        weights: BertLayerWeights,
        mask: torch.Tensor | None,
        scale: bool,
    ) -> torch.Tensor:
        """One encoder layer on a batch, with autograd: (B, n, d_model) -> (B, n, d_model)."""
        batch, n, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            # (B, n, d_model) -> (B, n, H, d_head) -> (B, H, n, d_head)
            return t.view(batch, n, self.n_heads, self.d_head).transpose(1, 2)

        projections = weights.attention
        query, key = heads(projections.query(x)), heads(projections.key(x))
        value = heads(projections.value(x))
        scores = attention_scores(query, key, scale)  # (B, H, n, n)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # no row is fully masked
        head_outputs = torch.softmax(scores, dim=-1) @ value  # (B, H, n, d_head)
        merged = head_outputs.transpose(1, 2).reshape(batch, n, self.d_model)  # concat heads
        h = self._layer_norm(x + projections.output(merged), weights.attn_norm)
        ffn = weights.ffn_out(self._activation(weights.ffn_in(h)))
        return self._layer_norm(h + ffn, weights.ffn_norm)

    # ---- read-only views of the weights, for pages that show them ---------------------------
    def word_vectors(self) -> np.ndarray:
        """(vocab, d_model) the context-free word-piece table."""
        return _readonly(self.word_embeddings)

    def position_vectors(self) -> np.ndarray:
        """(max_positions, d_model) the rows of the learned position table a run can use."""
        return _readonly(self.position_embeddings[: self.max_positions])

    def attention_weights(self, layer: int) -> AttentionWeights:
        """The four projections of one layer's attention (torch tensors; do not modify)."""
        return self.layers[layer].attention
