"""The answers to the learning pages' "predict, then see" questions, computed from the model.

Every question is built from the numbers the page is about to draw (or from a run the page's
figure will show), never from a stored string: change the sentence, the model, a slider or a
switch and the answer follows. A builder returns a Question, or None when the page's state
leaves nothing to ask (a one-word sentence). ui/predict.py shows it and checks the pick.

The extra runs a question needs (page 3's sentence without √d_k) go through ui.traces.trace,
which caches them in ui.door's one cache and admits them through its run slots; everything
else here is an argmax over a row or a vector the page already holds.

Ties: an option is right when its number, as the feedback prints it, equals the best one's.
A learner who reads "0.412 and 0.412" must not be told one of them is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

import core
from core import by_hand, context, head_stats, positional, qkv, scaling_masking
from ui import door, traces
from ui.escape import literal

MAX_OPTIONS = 8  # token choices offered at most: a phone shows them in two or three rows
PIECE_CHARS = 40  # a longer piece (a custom tokenizer's) is shortened in an option
SHOWN_NUMBERS = 5  # a row's largest weights named in the feedback
ALL_NUMBERS_UP_TO = 8  # layers or heads up to this many: the feedback names every one


@dataclass(frozen=True)
class Question:
    """One question: its options as plain text, the indices the model makes right, and why."""

    prompt: str  # Markdown, visitor text escaped
    options: tuple[str, ...]  # Markdown, visitor text escaped: shown as they are
    answers: frozenset[int]  # every option that is right (ties included)
    reason: str  # one line of Markdown, visitor text escaped: why the model's answer is what it is
    numbers: str  # one line of Markdown: the model's numbers behind the answer


# ---- helpers -----------------------------------------------------------------------------------
def _token_label(tokens: Sequence[str], position: int) -> str:
    """A token as Markdown text: the piece itself, "the · 5" (its position) when it occurs twice."""
    piece = literal(tokens[position], max_chars=PIECE_CHARS)  # a piece is text, never markup
    return piece if list(tokens).count(tokens[position]) == 1 else f"{piece} · {position}"


def _best(values: np.ndarray, shown: Callable[[float], str], largest: bool = True) -> set[int]:
    """Indices whose value, printed as the feedback prints it, equals the best value's."""
    values = np.asarray(values, dtype=np.float64)
    top = float(np.nanmax(values) if largest else np.nanmin(values))
    return {i for i, v in enumerate(values) if math.isfinite(v) and shown(float(v)) == shown(top)}


def _offered(
    n: int, ranked: Sequence[int], right: set[int], query: int | None, exclude: set[int]
) -> list[int]:
    """At most MAX_OPTIONS positions, in sentence order: every right one, the next strongest,
    and the places a learner would guess (the query's neighbours, the first and last piece)."""
    allowed = [j for j in range(n) if j not in exclude]
    if len(allowed) <= MAX_OPTIONS:
        return allowed
    around = [] if query is None else [query + d for d in (-1, 1, -2, 2, -3, 3)]
    wanted = [*sorted(right), *ranked[:3], 0, n - 1, *around, *ranked[3:]]
    picked: list[int] = []
    for j in wanted:
        if 0 <= j < n and j not in exclude and j not in picked:
            picked.append(j)
    return sorted(picked[: max(MAX_OPTIONS, len(right))])


def _named_values(
    tokens: Sequence[str], values: np.ndarray, shown: Callable[[float], str], largest: bool = True
) -> str:
    """'bank 0.672 · money 0.225 · …': the SHOWN_NUMBERS strongest entries, escaped."""
    order = np.argsort(-values if largest else values, kind="stable")[:SHOWN_NUMBERS]
    return " · ".join(f"{_token_label(tokens, int(j))} {shown(values[j])}" for j in order)


def _weight(value: float) -> str:
    return f"{value:.3f}"


def _token_question(
    prompt: str,
    tokens: Sequence[str],
    values: np.ndarray,
    reason: Callable[[int], str],
    numbers_title: str,
    query: int | None = None,
    exclude: set[int] | frozenset[int] = frozenset(),
    shown: Callable[[float], str] = _weight,
    largest: bool = True,
) -> Question:
    """Which token holds the largest (or smallest) value of a row: tokens outside `exclude` are
    candidates; reason(best position) explains the answer."""
    values = np.asarray(values, dtype=np.float64)
    candidates = np.array([j for j in range(len(tokens)) if j not in exclude])
    right_positions = {int(candidates[i]) for i in _best(values[candidates], shown, largest)}
    ranked = [
        int(j)
        for j in candidates[
            np.argsort(-values[candidates] if largest else values[candidates], kind="stable")
        ]
    ]
    offered = _offered(len(tokens), ranked, right_positions, query, set(exclude))
    return Question(
        prompt=prompt,
        options=tuple(_token_label(tokens, j) for j in offered),
        answers=frozenset(k for k, j in enumerate(offered) if j in right_positions),
        reason=reason(ranked[0]),
        numbers=f"{numbers_title}: {_named_values(tokens, values, shown, largest)}",
    )


def _numbered_question(
    prompt: str,
    noun: str,
    values: np.ndarray,
    shown: Callable[[float], str],
    largest: bool,
    reason: str,
    numbers_title: str,
) -> Question:
    """Which of `noun` 0 … k−1 (a head, a layer) holds the largest (or smallest) value."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) <= ALL_NUMBERS_UP_TO:  # every one, in order: a learner reads them as a row
        order = np.arange(len(values))
    else:  # the strongest first
        order = np.argsort(-values if largest else values, kind="stable")[:SHOWN_NUMBERS]
        numbers_title += ", " + ("largest" if largest else "lowest") + " first"
    return Question(
        prompt=prompt,
        options=tuple(f"{noun} {k}" for k in range(len(values))),
        answers=frozenset(_best(values, shown, largest)),
        reason=reason,
        numbers=f"{numbers_title}: " + " · ".join(f"{noun} {k} {shown(values[k])}" for k in order),
    )


def _bucket_question(
    prompt: str,
    value: float,
    buckets: Sequence[tuple[str, float, float]],
    reason: str,
    numbers: str,
) -> Question:
    """Which range [low, high) holds the value (the range that reaches highest includes its high
    end; ranges may be listed in either order)."""
    lowest = min(low for _, low, _ in buckets)
    highest = max(high for _, _, high in buckets)
    # float rounding can carry a value just past the outer edges (a cosine of 1.0000001 between
    # two equal vectors): it belongs to the outermost range, not to none
    value = min(max(value, lowest), highest)
    right = {
        k
        for k, (_, low, high) in enumerate(buckets)
        if low <= value < high or (high == highest and value == high)
    }
    return Question(
        prompt, tuple(label for label, _, _ in buckets), frozenset(right), reason, numbers
    )


# ---- page 0: the toy ---------------------------------------------------------------------------
def toy_strongest_other(words: Sequence[str], row: int) -> Question | None:
    """Page 0: besides itself, which toy word takes the largest weight in the row of words[row]."""
    if len(words) < 2:
        return None
    toy = by_hand.toy_sentence(tuple(words))
    result = by_hand.attention_by_hand(toy.vectors)  # S = X Xᵀ, α = softmax of each row
    word = _token_label(words, row)

    def reason(best: int) -> str:
        scores = result.scores[row]
        return (
            f"The dot product of {word} and {_token_label(words, best)}, {scores[best]:.0f}, is "
            f"its largest with another word (with itself: {scores[row]:.0f}), and softmax keeps "
            "the order of the scores: the largest score gets the largest weight."
        )

    return _token_question(
        f"Besides itself, which word will **{word}** take the most from?",
        words,
        result.attn_weights[row],
        reason,
        f"α in the row of {word}",
        query=row,
        exclude={row},
    )


# ---- page 1: static vectors --------------------------------------------------------------------
def static_strongest_other(
    sentence: context.StaticSentence,
    result: context.ParameterFree,
    other_tokens: Sequence[str],
) -> Question | None:
    """Page 1: in softmax(X Xᵀ) of the sentence, besides itself, which piece takes the largest
    weight in the row of the first piece it shares with the other sentence (else its middle
    piece)."""
    tokens = sentence.tokens
    if len(tokens) < 2:
        return None
    shared = context.shared_tokens(tokens, other_tokens)
    # shared pieces are keys without a byte-level BPE's leading space: found by piece_index
    row = context.piece_index(tokens, shared[0]) if shared else None
    row = len(tokens) // 2 if row is None else row
    word = _token_label(tokens, row)

    def reason(best: int) -> str:
        return (
            f"The dot product of {word} and {_token_label(tokens, best)}, "
            f"{result.similarity[row, best]:.2f}, is its largest with another piece, and "
            "softmax keeps the order of the scores. With itself (its squared length) it is "
            f"{result.similarity[row, row]:.2f}."
        )

    return _token_question(
        f"Sentence A: besides itself, which word piece will **{word}** take the most from?",
        tokens,
        result.attn_weights[row],
        reason,
        f"α in the row of {word}",
        query=row,
        exclude={row},
    )


COSINE_BUCKETS = (
    ("almost the same (0.99 or more)", 0.99, 1.0),
    ("alike, but apart (0.8 to 0.99)", 0.8, 0.99),
    ("far apart (below 0.8)", -1.0, 0.8),
)


def shared_word_cosine(pair: context.SharedWord) -> Question:
    """Page 1: how alike the shared word's two rows of Y are (cosine), in three ranges."""
    word = literal(pair.word)
    return _bucket_question(
        f"In X the two **{word}**s are one and the same row. After Y = softmax(X Xᵀ) X, how "
        "alike will they be?",
        pair.cosine_after,
        COSINE_BUCKETS,
        f"Each {word} became a blend of its own sentence; the blends differ only as far as the "
        f"neighbours do, and {word} keeps {pair.weights_a[pair.index_a]:.2f} of its weight for "
        f"itself in A and {pair.weights_b[pair.index_b]:.2f} in B.",
        f"cosine of the two {word}s: {pair.cosine_before:.3f} in X, {pair.cosine_after:.3f} in Y",
    )


# ---- page 2: queries, keys and values ----------------------------------------------------------
def strongest_key(result: qkv.QKVResult, tokens: Sequence[str], query: int) -> Question:
    """Page 2, step 4: which key the query's row of α weights most, with the page's W_q, W_k."""
    word = _token_label(tokens, query)
    scaled = "q·k/√d_k" if result.scale else "q·k"

    def reason(best: int) -> str:
        return (
            f"Its score with {_token_label(tokens, best)}, {scaled} = "
            f"{result.scores[query, best]:.2f}, is the largest in its row, and softmax keeps "
            "the order of the scores."
            + (
                " The causal mask leaves it only itself and the pieces before it."
                if result.causal
                else ""
            )
        )

    return _token_question(
        f"With these W_q and W_k, which key will the query **{word}** weight most?",
        tokens,
        result.attn_weights[query],
        reason,
        f"α in the row of {word}",
        query=query,
    )


def most_separating_head(through_heads: qkv.SharedWordThroughHeads) -> Question:
    """Page 2, step 7: which head of the layer leaves the shared word's two rows least alike."""
    cosines = through_heads.cosine_by_head  # (H,)
    best = int(np.argmin(cosines))
    word = literal(through_heads.word)
    return _numbered_question(
        f"Which head of layer {through_heads.layer} will pull the two **{word}**s furthest "
        "apart (the lowest cosine)?",
        "head",
        cosines,
        lambda v: f"{v:.3f}",
        largest=False,
        reason=f"Head {best}'s two outputs for {word} end at cosine {cosines[best]:.3f}, the "
        f"lowest of the layer: its W_q, W_k and W_v mix each {word} with its own "
        "sentence most differently. Page 1's formula, which has no W_q or W_k, leaves them at "
        f"{through_heads.cosine_parameter_free:.3f}.",
        numbers_title="cosine of the two outputs",
    )


# ---- page 3: scaling -------------------------------------------------------------------------
SHARE_BUCKETS = (
    ("less than half", 0.0, 0.5),
    ("half to 90 %", 0.5, 0.9),
    ("more than 90 %", 0.9, 1.0),
)


def saturation_top_share(scores: np.ndarray, multiplier: float) -> Question:
    """Page 3, section 1: the weight softmax(c·s) gives the largest score, in three ranges."""
    base, sharp = scaling_masking.saturation(
        scores, [1.0, multiplier]
    )  # (n,) weights at c = 1 and c
    ordered = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    gap = ordered[0] - ordered[1] if len(ordered) > 1 else math.inf
    return _bucket_question(
        f"Multiply these scores by c = {multiplier:g}: how much of the weight will the largest "
        "score take?",
        float(sharp.max()),
        SHARE_BUCKETS,
        f"The largest score leads the next by {gap:.2f}, so after multiplying it gets "
        f"e^(c × {gap:.2f}) = {math.exp(min(multiplier * gap, 700)):.3g} times the runner-up's "
        "weight, and the rest of the row counts too.",
        f"largest weight: {base.max():.3f} at c = 1, {sharp.max():.3f} at c = {multiplier:g}",
    )


def sharper_without_scaling(
    model: core.Transformer, text: str, pair: str | None, layer: int, head: int
) -> Question:
    """Page 3, section 3: does the head's mean row entropy fall (sharper) or rise (flatter) when
    every layer runs without the 1/√d_k factor? Two cached runs of the sentence."""
    trained = traces.trace(model, text, pair, scale=True, causal=False)
    unscaled = traces.trace(model, text, pair, scale=False, causal=False)
    before = float(head_stats.row_entropy(trained.attentions[layer, head]).mean())  # bits
    after = float(head_stats.row_entropy(unscaled.attentions[layer, head]).mean())

    def bits(value: float) -> str:
        return f"{value:.2f}"

    options = ("sharper (lower entropy)", "flatter (higher entropy)")
    same = bits(before) == bits(after)
    answers = frozenset({0, 1}) if same else frozenset({0 if after < before else 1})
    why = (
        f"Every score of layer {layer} is √d_k = {model.d_head**0.5:.2f} times larger, and a "
        "softmax of larger scores gives the top keys more of the weight"
        + (
            "."
            if layer == 0
            else "; the layers before it changed its input too, and here the larger scores win."
            if after < before
            else "; but the layers before it changed its input too, and here that wins."
        )
    )
    return Question(
        f"Turn off 1/√d_k in every layer: will L{layer} H{head}'s rows get sharper or flatter, "
        "on average?",
        options,
        answers,
        why,
        f"mean row entropy of L{layer} H{head}: {bits(before)} bits as trained, {bits(after)} "
        "bits without √d_k",
    )


# ---- page 4: heads -----------------------------------------------------------------------------
def previous_token_head(on_previous: np.ndarray, layer: int) -> Question:
    """Page 4, section 1: which head of the layer gives the token before the most weight.
    on_previous: (H,) each head's mean weight on the token before (head_stats.HeadStats)."""
    best = int(np.argmax(on_previous))
    return _numbered_question(
        f"Which head of layer {layer} looks most at the token just before, on this sentence?",
        "head",
        on_previous,
        lambda v: f"{v:.2f}",
        largest=True,
        reason=f"Head {best} gives the token before {on_previous[best]:.2f} of a row's weight on "
        "average: its line just below the diagonal is the brightest.",
        numbers_title="mean weight on the token before",
    )


def _heads_named(removed: Collection[tuple[int, int]], n_heads: int) -> str:
    """'L1 H3', 'all 12 heads of layer 2' or '5 heads': the removed heads, for a prompt."""
    layers = {layer for layer, _ in removed}
    if len(removed) == 1:
        ((layer, head),) = removed
        return f"head L{layer} H{head}"
    if len(layers) == 1 and len(removed) == n_heads:
        return f"all {n_heads} heads of layer {layers.pop()}"
    return f"{len(removed)} heads"


def most_moved_token(
    trace: core.Trace, ablated: core.Trace, removed: Collection[tuple[int, int]]
) -> Question:
    """Page 4, section 4: which token's final vector turns most when the heads are removed."""
    removed = _heads_named(removed, ablated.attentions.shape[1])
    moved = scaling_masking.how_far_moved(
        scaling_masking.layer_cosines(trace, ablated)[-1]
    )  # (n,) 1 − cosine

    def reason(best: int) -> str:
        return (
            f"Its final vector's cosine to the full model's is {1 - moved[best]:.4f}, the lowest "
            "of the sentence. Everything after the removed heads is recomputed, so their "
            "absence reaches each token through every later layer, not only through their own "
            "rows."
        )

    return _token_question(
        f"With {removed} removed, which token's final vector will turn the most?",
        trace.tokens,
        moved,
        reason,
        "1 − cosine to the full model",
        shown=lambda v: f"{v:.2g}",
    )


# ---- page 5: a layer ---------------------------------------------------------------------------
def largest_attention_share(share_by_layer: np.ndarray) -> Question:
    """Page 5: the layer whose attention writes the largest share of the update."""
    share = np.asarray(share_by_layer, dtype=np.float64)  # (L,)
    best = int(np.argmax(share))
    return _numbered_question(
        "In which layer does attention write the largest share of the update, on this sentence?",
        "layer",
        share,
        lambda v: f"{v:.0%}",
        largest=True,
        reason=f"In layer {best} attention's ‖a‖ is {share[best]:.0%} of ‖a‖ + ‖f‖, token by "
        "token on average; in every layer the feed-forward network writes the rest.",
        numbers_title="attention share",
    )


# ---- positional encoding -----------------------------------------------------------------------
def shuffle_without_positions(result: positional.PermutationResult) -> Question:
    """Positional, section 7: without positions, does the shuffled copy's attention, put back in
    order, match the original's? (PermutationResult.agrees: to float rounding)"""
    gap = result.max_abs_diff
    return Question(
        "Without positions: will the shuffled copy's attention, put back in order, match the "
        "original's?",
        ("the same, up to rounding", "different"),
        frozenset({0 if result.agrees else 1}),
        "Every step treats the pieces alike wherever they stand: dot products, softmax, the "
        "feed-forward network and the norms never read a position."
        if result.agrees
        else "Something in this run reads position after all.",
        f"largest difference over every layer and head: {gap:.1e}",
    )


def _tables_cost(model: core.Transformer, n_positions: int, **_: object) -> int:
    # per table: its float64 rows, unit rows and the (n, n) similarity, distances and residuals
    return 2 * 8 * (2 * n_positions * model.d_model + 5 * n_positions * n_positions)


@door.shared("the position tables' similarities", cost=_tables_cost)
def distance_explains(model: core.Transformer, n_positions: int, kind: str) -> Question:
    """Positional, section 4: of the binary code and the model's learned table, whose similarity
    of two positions does their distance |p − q| explain better (R², first n_positions rows)?"""
    tables = {  # (n_positions, width) each, as section 4 draws them
        "the binary code (±1 bits)": positional.binary_encoding(n_positions, signed=True),
        "the learned table": model.position_vectors()[:n_positions],
    }
    explained = np.array(
        [
            positional.explained_by_distance(positional.similarity_matrix(table, kind))
            for table in tables.values()
        ]
    )
    names = tuple(tables)
    best = int(np.argmax(explained))
    return Question(
        f"The sinusoid's {kind} similarity is a function of distance alone (R² = 1). Of the "
        f"other two, over {n_positions} positions, whose does distance |p − q| explain better?",
        names,
        frozenset(_best(explained, lambda v: f"{v:.2f}")),
        f"Distance explains {explained[best]:.2f} of the spread of {names[best]}'s "
        f"similarities: "
        + (
            "counting in binary puts neighbours such as 7 and 8 many bits apart."
            if best == 1
            else "how alike two learned rows are depends on more than their distance; nothing "
            "in training asked for distance at all."
        ),
        "R²: "
        + " · ".join(f"{name} {value:.2f}" for name, value in zip(names, explained, strict=True)),
    )
