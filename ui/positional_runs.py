"""Page 2b's runs of the model (positional encoding), computed once through ui.door.

The word-order experiment runs the model four times on shuffled sentences and the rotary check
rotates every layer's queries and keys: each is kept per (model, sentence) in the door's one
cache, read-only and shared by every session.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import core
from core import positional
from core.transformer import ATTN_INPUT, hook_name
from ui import door


# ---- Positional encoding -----------------------------------------------------------------------
def _permutation_cost(
    model: core.Transformer, trace: core.Trace, max_tokens: int, **_: object
) -> int:
    return 2 * model.run_bytes(min(trace.n_tokens, max_tokens))  # the sentence and its shuffle


@door.shared("the word-order experiment", cost=_permutation_cost)
def permutation_experiment(
    model: core.Transformer,
    trace: core.Trace,
    use_positions: bool,
    seed: int,
    max_tokens: int,
    causal: bool = False,
) -> positional.PermutationResult:
    """core.positional.permutation_experiment on the Trace's word pieces and sentences; causal:
    both runs under the causal mask (a decoder as trained), which is itself an order signal.

    Two forward passes (the sentence and its shuffle); at 64 word pieces the result holds
    two (6, 12, 64, 64) blocks, ~2.4 MB."""
    return positional.permutation_experiment(
        model,
        trace.tokens,
        trace.input_ids,
        trace.special,
        use_positions,
        int(seed),
        trace.options.scale,
        max_tokens,
        segments=trace.segments,
        causal=causal,
    )


def _rotary_check_cost(model: core.Transformer, trace: core.Trace, layer: int, **_: object) -> int:
    # the sentence rerun up to the layer, what its attention reads kept
    return model.cache_bytes(trace.n_tokens, [hook_name(ATTN_INPUT, layer)])


@door.shared("the rotary check", cost=_rotary_check_cost)
def rotary_check(
    model: core.Transformer, trace: core.Trace, layer: int, head: int, shift: int
) -> positional.RotaryCheck:
    """core.positional.rotary_check of one head on the Trace's sentence (a rotary model)."""
    return positional.rotary_check(model, trace, layer, head, shift)


# ---- 6 · adding word and position: the two tables' geometry -------------------------------------
def position_rows(model: core.Transformer) -> np.ndarray:
    """(max_positions, d_model) the learned position table a run can use, read-only: a view of
    the weights, nothing computed (a rotary model has none: ValueError)."""
    return model.position_vectors()


def score_terms(model: core.Transformer, trace: core.Trace) -> positional.ScoreTerms:
    """core.positional.score_terms of the sentence's word-piece rows and the position rows its
    pieces are read with (pieces 0 … n − 1: the first n rows a run reads)."""
    # (n, d_model) each: the table's rows cut to the sentence's length
    return positional.score_terms(trace.static, position_rows(model)[: trace.n_tokens])


@dataclass(frozen=True)
class TableGeometry:
    """How the rows of the word and position tables sit against each other."""

    word_word: np.ndarray  # (n_pairs,) cosines of random pairs of word rows
    position_position: np.ndarray  # (n_pairs,) cosines of random pairs of position rows
    word_position: np.ndarray  # (n_pairs,) cosines of a random word row with a random position row
    shared: positional.SharedComponent  # the one direction every position row shares
    centred_by_distance: np.ndarray  # (max_positions,) mean cosine of centred rows k apart


def _geometry_cost(model: core.Transformer) -> int:
    # float64: the (P, P) cosines of the centred rows with their unit rows, and the random pairs'
    # four (n_pairs, d) unit rows
    positions, d_model = model.max_positions, model.d_model
    return 8 * (positions * positions + 3 * positions * d_model + 4 * PAIRS * d_model)


PAIRS = 4000  # random pairs of rows per cosine histogram (positional.row_pair_cosines' default)


@door.shared("the embedding tables' geometry", cost=_geometry_cost)
def table_geometry(model: core.Transformer) -> TableGeometry:
    """core.positional's cosines of random row pairs, the shared direction of the position rows
    and the centred rows' cosine by distance, once per model."""
    words, positions = model.word_vectors(), model.position_vectors()
    centred = positional.centred_rows(positions)  # (P, d)
    return TableGeometry(
        word_word=positional.row_pair_cosines(words, n_pairs=PAIRS),
        position_position=positional.row_pair_cosines(positions, n_pairs=PAIRS),
        word_position=positional.row_pair_cosines(words, positions, n_pairs=PAIRS),
        shared=positional.shared_component(positions, n_pairs=PAIRS),
        centred_by_distance=positional.distance_profile(
            positional.similarity_matrix(centred, "cosine")
        )[0],
    )


def _recovery_cost(model: core.Transformer, trace: core.Trace, max_tokens: int) -> int:
    n = min(trace.n_tokens, max_tokens)  # float64 cosines of n rows against both whole tables
    return 8 * n * (model.dims.vocab_size + model.max_positions + 2 * model.d_model)


@door.shared("reading word and position back", cost=_recovery_cost)
def recovery(model: core.Transformer, trace: core.Trace, max_tokens: int) -> positional.Recovery:
    """core.positional.recover_token_and_position for the first max_tokens pieces of the
    Trace: each x = word row + position row against every row of both tables."""
    return positional.recover_token_and_position(
        model.word_vectors(), model.position_vectors(), trace.input_ids[:max_tokens]
    )
