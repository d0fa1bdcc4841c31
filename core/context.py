"""The math behind page 1, context from first principles, step by step, on real vectors.

Take the context-free vectors of a sentence's word pieces as the rows of X and let every token
mix in the others with no parameters at all,
    Y = softmax(X Xᵀ) X,
so the same word gets a different vector in a different sentence. Page 2 (core/qkv.py) gives
each token separate roles through learned matrices.

Shapes: n tokens, d = d_model.
Everything returned is float32 numpy; the arithmetic goes through core.attention (torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.attention import (
    attention_scores,
    causal_mask,
    masked_softmax,
    parameter_free_attention,
)
from core.errors import EmptyInput
from core.positional import cosine
from core.text import SPACE_MARK, cap_text
from core.transformer import ATTN_INPUT, Transformer, hook_name

# ---------------------------------------------------------------------------------------------
# Page 1: static vectors and parameter-free attention
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StaticSentence:
    """The word pieces of one sentence and their rows of the word-piece table (no [CLS]/[SEP])."""

    tokens: tuple[str, ...]  # n word pieces
    vectors: np.ndarray  # (n, d_model): row input_id of the embedding table, context-free
    n_pieces: int  # pieces the whole text produced, before the cut to max_pieces
    truncated: bool  # True when pieces beyond max_pieces were dropped


def static_sentence(model: Transformer, text: str, max_pieces: int | None = None) -> StaticSentence:
    """Text -> its word pieces and their static vectors X (n, d_model); EmptyInput if none.

    No special tokens are added: page 1 is about the words alone. At most max_pieces
    (default: the model's max_positions) are kept, so X X^T stays a bounded n x n matrix.
    """
    text = cap_text(text)
    if not text.strip():
        raise EmptyInput("The sentence is empty.")
    tokens, ids = model.tokenizer.pieces(text)
    if not ids:
        raise EmptyInput("The sentence holds no readable characters.")
    limit = max_pieces or model.max_positions
    kept = ids[:limit]
    vectors = model.word_vectors()[kept]  # fancy indexing copies: (n, d_model)
    return StaticSentence(tuple(tokens[:limit]), vectors, len(ids), len(ids) > limit)


@dataclass(frozen=True)
class ParameterFree:
    """Every intermediate of Y = softmax(X Xᵀ) X for one sentence."""

    similarity: np.ndarray  # (n, n) X Xᵀ: dot product of every pair of static vectors
    attn_weights: np.ndarray  # (n, n) row-wise softmax of the similarity; rows sum to 1
    output: np.ndarray  # (n, d) Y: row i is the weighted average of all rows of X


def parameter_free(x: np.ndarray, causal: bool = False) -> ParameterFree:
    """x (n, d) -> X Xᵀ (n, n), softmax(X Xᵀ) (n, n) and Y = softmax(X Xᵀ) X (n, d).

    causal: each row may weigh only itself and the rows before it (the scores after it are −∞
    before the softmax), to compare like with like beside a head run under the causal mask."""
    x_t = torch.from_numpy(np.array(x, dtype=np.float32))  # a writable copy of a read-only view
    similarity = attention_scores(x_t, x_t, scale=False)  # no √d: the bare first-principles form
    if not causal:
        output, attn_weights = parameter_free_attention(x_t, scale=False)
        return ParameterFree(similarity.numpy(), attn_weights.numpy(), output.numpy())
    masked = similarity.masked_fill(~causal_mask(len(x_t)), float("-inf"))  # (n, n)
    attn_weights = masked_softmax(masked)
    return ParameterFree(similarity.numpy(), attn_weights.numpy(), (attn_weights @ x_t).numpy())


def piece_key(token: str) -> str:
    """A piece as a word to match: byte-level BPE writes a word after a space with the space
    ("␣bank") and the same word at the start of a text without it ("bank"); both are "bank"."""
    return token.removeprefix(SPACE_MARK)


def piece_index(tokens: Sequence[str], word: str) -> int | None:
    """The first position whose piece is `word`, with or without BPE's leading space; None."""
    key = piece_key(word)
    return next((i for i, token in enumerate(tokens) if key and piece_key(token) == key), None)


def shared_tokens(tokens_a: Sequence[str], tokens_b: Sequence[str]) -> list[str]:
    """Word pieces present in both sentences (a leading space ignored: piece_key), each once,
    in the order they first appear in A."""
    in_b = {piece_key(t) for t in tokens_b}
    return list(dict.fromkeys(piece_key(t) for t in tokens_a if piece_key(t) in in_b - {""}))


def shared_piece(tokens_a: Sequence[str], tokens_b: Sequence[str], prefer: str) -> str | None:
    """`prefer` if both sentences hold it as a piece, else their first shared piece, else None
    (a tokenizer may cut the preferred word into pieces of its own)."""
    shared = shared_tokens(tokens_a, tokens_b)
    return prefer if piece_key(prefer) in shared else (shared[0] if shared else None)


@dataclass(frozen=True)
class SharedWord:
    """One word seen in two sentences: its vector before and after parameter-free attention."""

    word: str
    index_a: int  # first position of the word in sentence A
    index_b: int  # first position of the word in sentence B
    cosine_before: float  # static vectors: the same table row, so 1
    cosine_after: float  # rows of Y_A and Y_B: differ because the neighbours differ
    weights_a: np.ndarray  # (n_a,) how the word spreads its attention over sentence A
    weights_b: np.ndarray  # (n_b,) the same for sentence B

    @property
    def cosine_change(self) -> float:
        """cos(after) - cos(before): how far attention pulled the two readings of the word apart."""
        return self.cosine_after - self.cosine_before


def index_in_both(word: str, tokens_a: Sequence[str], tokens_b: Sequence[str]) -> tuple[int, int]:
    i_a, i_b = piece_index(tokens_a, word), piece_index(tokens_b, word)
    if i_a is None or i_b is None:
        raise ValueError(f"{word!r} is not a word piece of both sentences")
    return i_a, i_b


def compare_shared_word(
    word: str,
    sentence_a: StaticSentence,
    result_a: ParameterFree,
    sentence_b: StaticSentence,
    result_b: ParameterFree,
) -> SharedWord:
    """The word's cosine across the two sentences before (X rows) and after (Y rows); the word
    is found by piece_index (ValueError if a sentence lacks it)."""
    i_a, i_b = index_in_both(word, sentence_a.tokens, sentence_b.tokens)
    return SharedWord(
        word=word,
        index_a=i_a,
        index_b=i_b,
        cosine_before=float(cosine(sentence_a.vectors[i_a], sentence_b.vectors[i_b])),
        cosine_after=float(cosine(result_a.output[i_a], result_b.output[i_b])),
        weights_a=result_a.attn_weights[i_a],
        weights_b=result_b.attn_weights[i_b],
    )


# ---------------------------------------------------------------------------------------------
# Page 1: why the payoff needs short vectors
# ---------------------------------------------------------------------------------------------


def table_mean_length(model: Transformer) -> float:
    """Mean ‖row‖ over the whole word-piece table (vocab, d_model), in float64."""
    table = model.word_vectors()  # (vocab, d_model), read-only
    squared = np.einsum("vd,vd->v", table, table, dtype=np.float64)  # (vocab,), no (vocab, d) copy
    return float(np.sqrt(squared).mean())


@torch.inference_mode()
def attention_input(
    model: Transformer, input_ids: Sequence[int], segments: Sequence[int], layer: int
) -> np.ndarray:
    """(n, d_model) the rows `layer`'s heads read in a run of these pieces: the stream itself
    where the norm follows the sublayer (post-norm), its first norm where the norm comes first
    (pre-norm). Read at the one forward path's hook point, so the model's own structure decides.
    """
    name = hook_name(ATTN_INPUT, layer)
    _, cache = model.run_with_cache(input_ids, segments, names=[name])
    return cache[name].numpy().copy()  # (n, d_model)


@torch.inference_mode()
def layer_zero_sentence(model: Transformer, text: str) -> StaticSentence:
    """Text -> its word pieces and the rows layer 0's attention reads for them, specials ([CLS],
    [SEP], <s>) left out.

    A row is what the run's own layer 0 hands its heads (attention_input), cut to page 1's
    pieces. EmptyInput if none.
    """
    text = cap_text(text)
    if not text.strip():
        raise EmptyInput("The sentence is empty.")
    encoded = model.encode(text)  # [CLS] pieces [SEP] (or the family's own), cut to positions
    words = [i for i, special in enumerate(encoded.special) if not special]  # (n,) positions
    if not words:
        raise EmptyInput("The sentence holds no readable characters.")
    rows = attention_input(model, encoded.input_ids, encoded.segments, 0)[words]  # (n, d_model)
    n_specials = len(encoded.input_ids) - len(words)
    return StaticSentence(
        tuple(encoded.tokens[i] for i in words),
        rows,
        encoded.n_pieces - n_specials,
        encoded.truncated,
    )


@dataclass(frozen=True)
class MixingAtLength:
    """Page 1's mixing on one kind of row: how long the rows are and what the mixing makes."""

    lengths: np.ndarray  # (n_a + n_b,) ‖x_i‖ of sentence A's rows, then sentence B's
    self_leads: np.ndarray  # (n_a + n_b,) S_ii - max_{j≠i} S_ij; +inf for a one-piece sentence
    self_weights: np.ndarray  # (n_a + n_b,) α_ii of softmax(X Xᵀ), A's rows then B's
    pair: SharedWord  # the shared word: its cosine in X and in Y, its two rows of α


def self_leads(similarity: np.ndarray) -> np.ndarray:
    """(n, n) S -> (n,) S_ii - max_{j≠i} S_ij: by how much each row's own score wins.

    softmax gives the others at most e^(-lead) times the row's own weight. A row with no other
    entry (n = 1) has nothing to beat: +inf.
    """
    others = np.where(np.eye(len(similarity), dtype=bool), -np.inf, similarity)  # (n, n)
    return np.diag(similarity).astype(np.float64) - others.max(axis=1)


def rows_led_by_self(leads: np.ndarray) -> int:
    """(n,) self-score leads (self_leads) -> how many rows have their largest score on the
    diagonal, strictly above every other entry of the row."""
    return int(np.sum(np.asarray(leads) > 0))


def pieces_a_run_keeps(model: Transformer) -> int:
    """Word pieces of one text a run keeps: the model's positions minus the specials its
    tokenizer adds to one text (2 for [CLS] … [SEP], 1 for <s> …, 0 for GPT-2)."""
    return model.max_positions - model.tokenizer.n_specials[0]


def mix_at_length(a: StaticSentence, b: StaticSentence, word: str) -> MixingAtLength:
    """softmax(X Xᵀ) X of two sentences: row lengths, self-score leads, diagonal weights, and
    the shared word's cosine."""
    result_a, result_b = parameter_free(a.vectors), parameter_free(b.vectors)
    return MixingAtLength(
        lengths=np.linalg.norm(np.concatenate([a.vectors, b.vectors]), axis=1),  # (n_a + n_b,)
        self_leads=np.concatenate(
            [self_leads(result_a.similarity), self_leads(result_b.similarity)]
        ),
        self_weights=np.concatenate(
            [np.diag(result_a.attn_weights), np.diag(result_b.attn_weights)]
        ),
        pair=compare_shared_word(word, a, result_a, b, result_b),
    )


def stretched(sentence: StaticSentence, factor: float) -> StaticSentence:
    """The same pieces with every row multiplied by factor: same directions, other length."""
    return StaticSentence(
        sentence.tokens,
        sentence.vectors * np.float32(factor),
        sentence.n_pieces,
        sentence.truncated,
    )


@dataclass(frozen=True)
class LengthEffect:
    """Page 1's formula on the table's short rows, on layer 0's long inputs, and on the table's
    rows stretched to layer 0's length (same directions): the length decides."""

    table_mean_length: float  # mean ‖row‖ over the whole word-piece table
    table_rows: MixingAtLength  # page 1's X: rows of the table
    layer_zero: MixingAtLength  # what layer 0 reads for the same pieces
    stretched_rows: MixingAtLength  # the table rows times `stretch`
    stretch: float  # mean length of the layer-0 rows / mean length of the table rows


def length_effect(model: Transformer, text_a: str, text_b: str, word: str) -> LengthEffect | None:
    """Page 1's payoff on three kinds of row for the same two sentences and shared word.

    Both sentences are cut to the pieces a run keeps (max_positions minus the specials), so
    every kind of row holds the same pieces; None when `word` is not among them in both.
    """
    zero_a, zero_b = layer_zero_sentence(model, text_a), layer_zero_sentence(model, text_b)
    keep = pieces_a_run_keeps(model)
    table_a = static_sentence(model, text_a, max_pieces=keep)
    table_b = static_sentence(model, text_b, max_pieces=keep)
    if piece_index(table_a.tokens, word) is None or piece_index(table_b.tokens, word) is None:
        return None
    table = mix_at_length(table_a, table_b, word)
    zero = mix_at_length(zero_a, zero_b, word)
    stretch = float(zero.lengths.mean() / table.lengths.mean())
    return LengthEffect(
        table_mean_length=table_mean_length(model),
        table_rows=table,
        layer_zero=zero,
        stretched_rows=mix_at_length(
            stretched(table_a, stretch), stretched(table_b, stretch), word
        ),
        stretch=stretch,
    )


# ---------------------------------------------------------------------------------------------
# Page 2: queries, keys and values
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Page 2: all positions at once, and blind to their order
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Page 2: page 1's payoff redone with trained projections
# ---------------------------------------------------------------------------------------------
