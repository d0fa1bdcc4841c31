"""The check's runs of the model: the sentence on screen as trained, with its mask flipped, without
√d_k, and shuffled, each through ui.door, and the numbers the check's feedback quotes.

Every run is one the course pages make too (the same cache entries: a learner who opened page
3 or 2b has them already), so the check costs at most a few forward passes of one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import core
from core import check_numbers
from ui import anatomy_text, door, positional_runs, traces

# The shuffle reads the sentence's first 64 word pieces, seed 0: for an encoder the same cache
# entries as page 2b's word-order experiment opened at its first shuffle (a decoder's keep its
# mask here; page 2b removes it).
SHUFFLE_MAX_PIECES = 64
SHUFFLE_SEED = 0
MIN_SHUFFLE_PIECES = 4  # with fewer, once the special pieces stay put, little is left to move


@dataclass(frozen=True)
class TraceNumbers:
    """What the check reads off the three runs of one sentence (trained, mask flipped, no √d_k)."""

    tokens: tuple[str, ...]  # (n,) the trained run's pieces
    n_rows: int  # L · H · n rows of attention weights
    row_sum_min: float  # smallest Σ_j α_ij over every row of every layer and head
    row_sum_max: float
    above_with_mask: float  # largest weight above the diagonal in the run with the causal mask
    above_without_mask: float  # … and in the run without it
    raw_spread: float  # std of q·k over every allowed cell, before dividing by √d_head
    top_weight_scaled: float  # a row's largest weight, mean over rows, as trained
    top_weight_unscaled: float  # … with 1/√d_k removed in every layer
    distinct_by_row: np.ndarray  # (L, n) how many different keys the H heads weight most
    example_tops: np.ndarray  # (H,) the key each head of layer 0 weights most in example_row
    example_row: int  # a piece in the middle of the sentence
    residual_cosine: float  # mean cos(vector entering a layer, vector leaving it)
    other_cosine: float  # mean cos of two different pieces leaving the same layer


@dataclass(frozen=True)
class CheckNumbers:
    """Everything the check's feedback quotes, for one model and sentence."""

    model_decoder: bool  # the model was trained with the causal mask
    positions_off: str  # what a run without positions leaves out (anatomy_text)
    n_layers: int
    n_heads: int
    d_head: int
    runs: TraceNumbers
    shuffle_pieces: int  # pieces the shuffle read (0: too short a sentence to shuffle)
    # max |attention − shuffled, put back| without positions; both shuffles keep the model's own
    # mask (a decoder's causal mask, as trained: it is an order signal of its own)
    shuffle_gap_without: float
    shuffle_gap_with: float  # … with positions


def _trace_numbers_cost(trained: core.Trace, **_: object) -> int:
    # the (L, H, n, n) cells above the diagonal copied once, and one layer's q·k in float64
    layers, heads, n, _ = trained.attentions.shape
    return trained.attentions.nbytes + heads * n * n * 8 * 2


@door.shared("the check's numbers", cost=_trace_numbers_cost)
def trace_numbers(
    trained: core.Trace, masked: core.Trace, unmasked: core.Trace, unscaled: core.Trace
) -> TraceNumbers:
    """The check's numbers of one sentence's runs (core/check_numbers.py reads each)."""
    row_sum_min, row_sum_max = check_numbers.row_sum_range(trained.attentions)
    distinct = check_numbers.distinct_top_keys(trained.attentions)  # (L, n)
    row = trained.n_tokens // 2
    return TraceNumbers(
        tokens=trained.tokens,
        n_rows=int(np.prod(trained.attentions.shape[:3])),
        row_sum_min=row_sum_min,
        row_sum_max=row_sum_max,
        above_with_mask=check_numbers.largest_above_diagonal(masked.attentions),
        above_without_mask=check_numbers.largest_above_diagonal(unmasked.attentions),
        raw_spread=check_numbers.raw_score_spread(
            trained.queries, trained.keys, trained.options.causal
        ),
        top_weight_scaled=check_numbers.mean_top_weight(trained.attentions),
        top_weight_unscaled=check_numbers.mean_top_weight(unscaled.attentions),
        distinct_by_row=distinct,
        example_tops=check_numbers.top_keys(trained.attentions)[0, :, row],  # (L, H, n) -> (H,)
        example_row=row,
        residual_cosine=float(check_numbers.residual_cosines(trained.hidden_states).mean()),
        other_cosine=check_numbers.other_piece_cosine(trained.hidden_states),
    )


def feedback_numbers(model: core.Transformer, text: str, pair: str | None) -> CheckNumbers:
    """The check's numbers for one sentence (and pair): its run as the model was trained, three
    runs with one switch flipped in every layer, and the word-order experiment, each cached
    through ui.door (one of the flipped runs is the trained one: an encoder runs unmasked, a
    decoder masked). Raises core.EmptyInput for a text with no word pieces."""
    trained = traces.trace(model, text, pair, scale=True, causal=model.is_decoder)
    flipped = {
        "masked": traces.trace(model, text, pair, scale=True, causal=True),
        "unmasked": traces.trace(model, text, pair, scale=True, causal=False),
        "unscaled": traces.trace(model, text, pair, scale=False, causal=model.is_decoder),
    }
    numbers = trace_numbers(trained, **flipped)
    shuffled = min(trained.n_tokens, SHUFFLE_MAX_PIECES)
    gaps = [0.0, 0.0]
    if shuffled >= MIN_SHUFFLE_PIECES:
        gaps = [
            positional_runs.permutation_experiment(  # the model's own mask: as it was trained
                model,
                trained,
                use_positions,
                SHUFFLE_SEED,
                SHUFFLE_MAX_PIECES,
                causal=model.is_decoder,
            ).max_abs_diff
            for use_positions in (False, True)
        ]
    return CheckNumbers(
        model_decoder=model.is_decoder,
        positions_off=anatomy_text.positions_switched_off(anatomy_text.of(model)),
        n_layers=model.n_layers,
        n_heads=model.n_heads,
        d_head=model.d_head,
        runs=numbers,
        shuffle_pieces=shuffled if shuffled >= MIN_SHUFFLE_PIECES else 0,
        shuffle_gap_without=gaps[0],
        shuffle_gap_with=gaps[1],
    )
