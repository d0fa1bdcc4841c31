"""The answers to the learning pages' "predict, then see" questions, computed from the model.

Every question is built from the numbers the page is about to draw (or from a run the page's
figure will show), never from a stored string: change the sentence, the model, a slider or a
switch and the answer follows. A builder returns a Question, or None when the page's state
leaves nothing to ask (a one-word sentence). ui/predict.py shows it and checks the pick.

A question is one a learner can reason out from what the course showed before it (a formula,
a rule such as "softmax keeps the order", the numbers its prompt quotes), never a pick among
near-equal numbers, and never one a figure above it already answered; its reason says why
the computed answer is what it is, not only which option won.

The extra runs a question needs (page 3's sentence without √d_k) go through ui.traces.trace,
which caches them in ui.door's one cache and admits them through its run slots; everything
else reads a row or a vector the page already holds.

Ties: an option is right when its number, as the feedback prints it, equals the best one's.
A learner who reads "0.412 and 0.412" must not be told one of them is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

import core
from core import by_hand, context, head_stats, positional, qkv
from ui import door, wording
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
    # each option's own number as shown ("0.004"), where options are tokens of a row: a wrong
    # pick is told its own, which `numbers` (the largest few) may leave out
    option_values: tuple[str, ...] = ()


# ---- helpers -----------------------------------------------------------------------------------
def _token_label(tokens: Sequence[str], position: int) -> str:
    """A token as Markdown text: the piece itself, "the · 5" (its position) when it occurs twice."""
    piece = literal(tokens[position], max_chars=PIECE_CHARS)  # a piece is text, never markup
    return piece if list(tokens).count(tokens[position]) == 1 else f"{piece} · {position}"


def _quoted_token(tokens: Sequence[str], position: int) -> str:
    """_token_label in curly quotes, the one way prose shows a token: a bare "." or "," would
    read as punctuation of the sentence around it."""
    return f"“{_token_label(tokens, position)}”"


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
        option_values=tuple(shown(values[j]) for j in offered),
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
SPREAD_OPTIONS = (
    "an even blend: the same weight on every key",
    "most on the best key, a fair share on others",
    "almost all on the best key (95 % or more)",
)


def soft_lookup_spread(
    words: Sequence[str], vectors: np.ndarray, query_word: str, sharpness: float
) -> Question:
    """Page 0, section 3: how softmax(c · q·k) spreads the query's weight over the toy's keys.
    words: (n,) the keys' words; vectors: (n, d) the keys (and values); the query is the row
    of query_word."""
    query = np.asarray(vectors[list(words).index(query_word)], dtype=np.float64)
    found = by_hand.lookup(query, vectors, vectors, sharpness)
    top = float(found.soft_weights.max())
    even = f"{found.soft_weights.min():.3f}" == f"{top:.3f}"
    answer = 0 if even else 2 if top >= 0.95 else 1
    ordered = np.sort(found.scores)[::-1]
    gap = float(ordered[0] - ordered[1]) if len(ordered) > 1 else 0.0
    scores = " · ".join(f"{literal(w)} {v:.0f}" for w, v in zip(words, found.scores, strict=True))
    return Question(
        f"The query **{literal(query_word)}** scores q·k = {scores}. With sharpness "
        f"c = {sharpness:g}, how will the soft lookup spread its weight?",
        SPREAD_OPTIONS,
        frozenset({answer}),
        (
            "At c = 0 every score becomes e⁰ = 1: an even blend, whatever the query."
            if sharpness == 0
            else f"The best key leads the next by {gap:.0f}, so it gets e^({sharpness:g} × {gap:.0f}) = "
            f"{math.exp(min(sharpness * gap, 700)):.3g} times the runner-up's weight; the "
            "larger c, the closer the soft lookup comes to the hard one."
        ),
        f"soft weights: {_named_values(words, found.soft_weights, _weight)}",
    )


# ---- page 1: static vectors --------------------------------------------------------------------
def static_strongest_other(
    sentence: context.StaticSentence,
    result: context.ParameterFree,
    other_tokens: Sequence[str],
) -> Question | None:
    """Page 1: in softmax(X Xᵀ) of the sentence, besides itself, which piece takes the largest
    weight in the row of its first piece that the other sentence lacks (else its middle piece).
    Not a shared piece's row: the page opens on the shared word's two rows, which would give the
    answer away."""
    tokens = sentence.tokens
    if len(tokens) < 2:
        return None
    # shared pieces are keys without a byte-level BPE's leading space (piece_key)
    shared = set(context.shared_tokens(tokens, other_tokens))
    row = next(
        (i for i, token in enumerate(tokens) if context.piece_key(token) not in shared),
        len(tokens) // 2,
    )
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


# ---- page 2: queries, keys and values ----------------------------------------------------------
RATIO_BUCKETS = (
    ("less than twice as much", 1.0, 2.0),
    ("2 to 10 times as much", 2.0, 10.0),
    ("more than 10 times as much", 10.0, math.inf),
)


def weight_ratio(result: qkv.QKVResult, tokens: Sequence[str], query: int) -> Question | None:
    """Page 2, step 2: how many times the weight of the query's top key is its runner-up's.
    None when the row has fewer than two keys it may read (the first row under a mask)."""
    allowed = np.flatnonzero(np.isfinite(result.scores[query]))  # keys the mask leaves
    if len(allowed) < 2:
        return None
    order = allowed[np.argsort(-result.scores[query, allowed], kind="stable")]
    best, second = int(order[0]), int(order[1])
    word, top, runner_up = (_quoted_token(tokens, j) for j in (query, best, second))
    gap = float(result.scores[query, best] - result.scores[query, second])  # after √d_k
    # α_best / α_second = e^gap: the row's sum cancels (and a weight that underflows to 0 in
    # float32 cannot turn the ratio into a division by zero)
    ratio = math.exp(min(gap, 700.0))
    root = math.sqrt(result.query.shape[-1])
    divide = f"Divide each by √d_k = {root:.2f} and take" if result.scale else "Take"
    return _bucket_question(
        f"The two largest dot products of the query of **{word}** are q·k = "
        f"{result.dot[query, best]:.2f} with **{top}** and {result.dot[query, second]:.2f} "
        f"with **{runner_up}**. {divide} the softmax: how many times the weight of "
        f"**{runner_up}** will **{top}** get?",
        ratio,
        RATIO_BUCKETS,
        f"Both weights are e^score divided by the same row sum, so the sum cancels in their "
        f"ratio: e^({gap:.2f}) = {ratio:.3g}. Only the gap between two scores decides "
        "how their weights compare"
        + (", and √d_k shrinks the gap before the exponential." if result.scale else "."),
        f"α in the row of {word}: {top} {result.attn_weights[query, best]:.3f}, {runner_up} "
        f"{result.attn_weights[query, second]:.3f}, a ratio of {ratio:.3g}",
    )


def same_input_apart(through_heads: qkv.SharedWordThroughHeads) -> Question | None:
    """Page 2, step 7: does any head of the layer give the shared word's two occurrences
    different outputs (cosine below 1.000 as printed)? Asked only where the two enter as one
    and the same vector (cosine 1.000 as printed): a model whose positions enter with the word
    (GPT-2's learned rows at other positions) hands the head two different vectors, and
    "the same vector in" is not the question there. None then."""
    cosines = through_heads.cosine_by_head  # (H,)
    word = literal(through_heads.word)
    lowest = int(np.argmin(cosines))
    same_input = f"{through_heads.cosine_input:.3f}" == "1.000"
    if not same_input:
        return None
    apart = f"{cosines[lowest]:.3f}" != "1.000"
    if len(cosines) <= ALL_NUMBERS_UP_TO:
        order = np.arange(len(cosines))
        title = "cosine of the two outputs"
    else:
        order = np.argsort(cosines, kind="stable")[:SHOWN_NUMBERS]
        title = "cosine of the two outputs, lowest first"
    return Question(
        f"The two **{word}**s enter layer {through_heads.layer} as one and the same vector. "
        f"Will each of its {len(cosines)} heads hand them the same output?",
        (
            "yes: the same vector in gives the same vector out",
            "no: some heads pull them apart",
        ),
        frozenset({1 if apart else 0}),
        f"A head's output for {word} is Σ α_j v_j over its own sentence, as on page 1: the "
        "neighbours differ, so their values and the weights they get differ, whatever the "
        f"word's own vector. Head {lowest} pulls them furthest apart, to cosine "
        f"{cosines[lowest]:.3f}; page 1's formula gives {through_heads.cosine_parameter_free:.3f}."
        if apart
        else f"Every head keeps the two {word}s together to three decimals: each row keeps "
        "nearly all of its weight on the word itself.",
        f"{title}: " + " · ".join(f"head {k} {cosines[k]:.3f}" for k in order),
    )


# ---- page 3: scaling -------------------------------------------------------------------------
def first_row_under_mask(
    masked_weights: np.ndarray, before: float, tokens: Sequence[str], *, trained_with_mask: bool
) -> Question:
    """Page 3, section 4: the weight the first token gives itself under the causal mask.
    masked_weights: (m, m) a head's weights with the mask; before: that head's weight from the
    first token to itself in the run without it. trained_with_mask: a decoder, whose run without
    the mask is off its training distribution (the answer says so)."""
    value = float(masked_weights[0, 0])
    n = len(tokens)
    candidates = (1.0, 1.0 / n, before)  # the options' values, in order
    first = _token_label(tokens, 0)
    return Question(
        f"Under the mask the first token, **{first}**, may read only itself. How much of its "
        "row's weight will it give itself?",
        ("all of it: 1", f"an even share: 1/{n}", "what it took without the mask"),
        frozenset(k for k, v in enumerate(candidates) if f"{v:.3f}" == f"{value:.3f}"),
        "Every key after it scores −∞ and e^−∞ = 0, while a row of weights still adds up to 1: "
        "the one key left takes all of it, whatever its score.",
        f"α({first} → {first}): {value:.3f} with the mask, {before:.3f} without"
        + (" (a run this decoder never saw in training: it is trained with the mask)"
           if trained_with_mask else ""),
    )  # fmt: skip


# ---- page 4: heads -----------------------------------------------------------------------------
def previous_token_row(
    weights: np.ndarray,
    tokens: Sequence[str],
    on_previous: np.ndarray,
    on_next: np.ndarray,
    layer: int,
    special: np.ndarray,
    shown_rows: Collection[int],
    causal: bool = False,
    overview_line: tuple[int, int, int, int, float] | None = None,
) -> Question | None:
    """Page 4, section 1: the layer's previous-token head, applied to a row the learner has not
    been shown. weights: (H, n, n) the layer's attention; on_previous, on_next: (H,) each head's
    mean weight on the token before and after over head_stats.role_rows (special: the Trace's
    (n,) mask).

    The page's first screen already names the head's role and draws one of its rows, and the
    Overview quotes another (shown_rows), so the prompt states the role and asks whether it holds
    in the clearest row not among those, from the third piece on (the second's token before is
    the first piece, where many heads of every kind put their weight): reasoned from the rule,
    not read off a figure. causal: the run had the causal mask, so row i sees i + 1 keys, and
    only those are offered as answers.

    When the head is the one the Overview's map opened on (overview_line: head_stats.boldest_line
    of the whole run), the prompt does not state the role: it points at the line the learner saw
    there, and the learner works out the rule from it.

    None without such a row, or when the head also leads the layer on the token after (its
    rows would then have two reasonable answers)."""
    n = weights.shape[-1]
    rows = head_stats.role_rows(special, -1)  # the rows on_previous averages
    asked = np.array([row for row in rows if row >= 2 and row not in set(shown_rows)], dtype=int)
    head = int(np.argmax(on_previous))
    other_heads_next = np.delete(on_next, head)  # (H − 1,)
    leads_after_too = other_heads_next.size > 0 and on_next[head] > other_heads_next.max()
    if not len(asked) or leads_after_too:
        return None
    # an even spread's weight on the token before, over the same rows: one over the keys row i
    # sees, i + 1 under the causal mask, n without
    chance = float(np.mean(1.0 / (rows + 1))) if causal else 1.0 / n
    named = wording.earns_role_name(on_previous[head], chance)
    before = weights[head, asked, asked - 1]  # (k,) row i's weight on i − 1
    query = int(asked[np.argmax(before)])  # the clearest row not shown yet
    # how often the rule holds at all: rows (of those on_previous averages) whose largest weight
    # is on the token before, so a weak lean's clearest row is not taken for the rule
    held = int(np.sum(np.argmax(weights[head, rows], axis=-1) == rows - 1))
    how_often = (
        f"the token before takes a row's largest weight in {wording.count_of(held, len(rows))} "
        "of this sentence"
    )
    row = weights[head, query]  # (n,)
    word, previous = _token_label(tokens, query), _token_label(tokens, query - 1)

    against = f"against {chance:.2f} for an even spread"
    # the lean, said as the two numbers stand: at or below an even spread is no lean at all
    share = float(on_previous[head])
    if named:
        leans = "leans to the token before"
    elif share > chance:
        leans = "leans only a little to the token before"
    else:
        leans = "gives the token before no more than an even spread would"

    def reason(best: int) -> str:
        if best == query - 1 and named:
            return (
                f"Head {head}'s role is a rule about places, not words: whatever the token, its "
                f"row looks one place back. So the row of {word} gives {previous}, the token just "
                f"before it, {row[query - 1]:.2f} (the head's average over its rows: "
                f"{share:.2f}, {against})."
            )
        if best == query - 1:
            return (
                f"Head {head} {leans} ({share:.2f} on average, {against}), and in the row of "
                f"{word} the token before, {previous}, still takes the most: {row[query - 1]:.2f}. "
                # rows 0 and 1 are never asked: row 1's one earlier key is the first piece
                f"Of the rows from the third token on not quoted so far, this is the head's "
                f"clearest, though: {how_often}."
            )
        return (
            f"Head {head} {leans} ({share:.2f} on average, {against}), yet this row gives "
            f"{_token_label(tokens, best)} {row[best]:.2f}, more than the {row[query - 1]:.2f} of "
            f"{previous}, the token before: an average over rows can hide a row that breaks it "
            f"({how_often})."
        )

    seen_there = (  # the Overview drew this head, its line there is one place back, it holds
        overview_line is not None
        and overview_line[:2] == (layer, head)
        and overview_line[3] == overview_line[2] - 1
        and named
    )
    if seen_there:
        seen_query, seen_key = overview_line[2], overview_line[3]
        prompt = (
            f"Head {head} of layer {layer} is the head the Overview's map opened on, where the "
            f"row of {_quoted_token(tokens, seen_query)} gave {_quoted_token(tokens, seen_key)} "
            f"{overview_line[4]:.2f}. Work out from that line what the head looks for: in its "
            f"row for **{word}**, a row not quoted so far, which token will take the most weight?"
        )
    else:
        prompt = (
            f"Of layer {layer}'s heads, head {head} gives the token before the most weight on "
            f"this sentence: {share:.2f} of a row's weight on average ({against}). In its row for "
            f"**{word}**, a row not quoted so far, which token will take the most weight?"
        )
    return _token_question(
        prompt,
        tokens,
        row,
        reason,
        f"α in head {head}'s row of {word}",
        query=query,
        exclude=frozenset(range(query + 1, n)) if causal else frozenset(),  # keys it cannot see
    )


def _heads_named(removed: Collection[tuple[int, int]], n_heads: int) -> str:
    """'head L1 H3', 'all 12 heads of layer 2' or '5 heads of layers 1 and 3': the removed
    heads, for a prompt (their layers named, so the question can be reasoned from it)."""
    layers = sorted({layer for layer, _ in removed})
    if len(removed) == 1:
        ((layer, head),) = removed
        return f"head L{layer} H{head}"
    if len(layers) == 1:
        count = f"all {n_heads}" if len(removed) == n_heads else f"{len(removed)}"
        return f"{count} heads of layer {layers[0]}"
    listed = ", ".join(str(layer) for layer in layers[:-1]) + f" and {layers[-1]}"
    return f"{len(removed)} heads of layers {listed}"


def _row_name(row: int) -> str:
    """A row of the layer-by-layer cosine heatmap as its axis names it: row 0 holds the
    embeddings, row k + 1 the vectors after layer k."""
    return "the embeddings" if row == 0 else f"after layer {row - 1}"


def _cosine_shown(value: float) -> str:
    return f"{value:.4f}"  # as the heatmap's hover prints a cosine


def first_turned_row(
    cosines: np.ndarray, removed: Collection[tuple[int, int]], n_heads: int
) -> Question:
    """Page 4, section 4: the first row of the layer-by-layer cosine heatmap in which some
    token's vector turns away from the full model's once the heads are removed.

    cosines: (L + 1, n) each token's cosine to the full run, row 0 the embeddings, row k + 1
    after layer k (core.scaling_masking.layer_cosines). A row has turned when its lowest cosine,
    printed to four decimals as the heatmap prints it, is below 1. The forward pass runs layer
    by layer, so nothing computed before the first removed layer can know of the removal: a
    learner reasons the answer out from "everything after it is recomputed"."""
    cosines = np.asarray(cosines, dtype=np.float64)
    n_layers = cosines.shape[0] - 1
    first_layer = min(layer for layer, _ in removed)
    lowest = cosines.min(axis=1)  # (L + 1,) the most-turned token of each row
    turned = [_cosine_shown(value) != _cosine_shown(1.0) for value in lowest]
    first = turned.index(True) if any(turned) else None
    at_layer = first_layer + 1  # the row of the first removed layer's output
    # the places a learner would guess: the embeddings, one row early, the right row, only the
    # final vectors, and "none" (the residual connection carries every vector past)
    rows = sorted({0, first_layer, at_layer, n_layers} | ({first} if first is not None else set()))
    options = (*(_row_name(row) for row in rows), "none: every row stays at 1")
    answer = len(rows) if first is None else rows.index(first)
    removed_named = _heads_named(removed, n_heads)
    earlier = "layer 0" if first_layer == 1 else f"layers 0 to {first_layer - 1}"
    before = (
        "The embeddings are"
        if first_layer == 0
        else f"The embeddings and the vectors after {earlier} are"
    )
    before += (
        f" computed before layer {first_layer} runs, so they cannot know of the removal and stay "
        "exactly the full model's."
    )
    if first == at_layer:
        later = turned[at_layer:]
        reason = (
            f"{before} The residual connection adds each layer's output to the vector it "
            f"carries, so layer {first_layer}'s output is the first to lack what the removed "
            "heads wrote"
            + (
                ", the last layer's, so it is the one row that changes."
                if at_layer == n_layers
                else ", and every later layer reads the changed vectors, so every row below it "
                "differs too."
                if all(later)
                else f"; later rows read the changed vectors, though {later.count(False)} of "
                "them print 1 again to four decimals."
            )
        )
    elif first is None:
        reason = (
            f"{before} From layer {first_layer} on the vectors lack what the removed heads "
            "wrote, but on this sentence that was so little that no cosine falls below 1 to "
            "four decimals."
        )
    elif first > at_layer:
        reason = (
            f"{before} Layer {first_layer}'s output lacks what the removed heads wrote, but "
            "on this sentence that was too little to move a cosine below 1 to four decimals "
            f"(lowest {_cosine_shown(lowest[at_layer])}); the later layers that read it turn "
            f"the vectors further, and the change first shows {_row_name(first)}."
        )
    else:  # a row computed before the removal moved: this run's layers are not in order
        reason = (
            f"Here even {_row_name(first)}, computed before layer {first_layer} runs, differs "
            "from the full model's: these two runs did not share their early layers."
        )
    shown_rows = range(n_layers + 1) if n_layers < ALL_NUMBERS_UP_TO else rows
    numbers = "lowest cosine to the full model, by row: " + " · ".join(
        f"{_row_name(row)} {_cosine_shown(lowest[row])}" for row in shown_rows
    )
    return Question(
        f"With {removed_named} removed, the heatmap compares every token's vector with the full "
        f"model's after each layer, from the embeddings (top row) down to layer {n_layers - 1}. "
        "In which row will some token's cosine first fall below 1 (to four decimals)?",
        options,
        frozenset({answer}),
        reason,
        numbers,
    )


# ---- page 5: a layer ---------------------------------------------------------------------------
def attention_majority(share_by_layer: np.ndarray, parameter_ratio: float) -> Question:
    """Page 5: in how many layers attention writes more than half of the update (‖a‖ > ‖f‖).
    parameter_ratio: the feed-forward network's trained numbers over attention's, per layer."""
    share = np.asarray(share_by_layer, dtype=np.float64)  # (L,)
    n_layers = len(share)
    majority = int((share > 0.5).sum())
    answer = 0 if majority == 0 else 2 if majority == n_layers else 1
    if len(share) <= ALL_NUMBERS_UP_TO:
        listed = " · ".join(f"layer {k} {share[k]:.0%}" for k in range(n_layers))
    else:
        listed = f"{share.min():.0%} to {share.max():.0%}"
    how_many = (
        f"{parameter_ratio:.1f} times as many trained numbers as"
        if parameter_ratio >= 1
        else f"{1 / parameter_ratio:.1f} times fewer trained numbers than"
    )
    return Question(
        f"The feed-forward network holds {how_many} attention, and "
        "transforms each token on its own; attention moves information between tokens. In how "
        f"many of the {n_layers} layers will attention write more than half of the update, "
        "‖a‖ / (‖a‖ + ‖f‖) above 0.5 on average over this sentence's tokens?",
        ("in none of them", "in some of them", "in every one"),
        frozenset({answer}),
        (
            "In every layer the feed-forward network writes the larger part: attention decides "
            "which tokens' information arrives, the feed-forward network does most of the "
            "transforming."
            if answer == 0
            else f"Attention writes more than the feed-forward network in {majority} of "
            f"{n_layers} layers here: how much a sublayer writes depends on what it does with "
            "this sentence, not on how many numbers it holds."
        ),
        f"attention share ‖a‖ / (‖a‖ + ‖f‖), token by token on average: {listed}",
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
        f"The sinusoid's {kind} similarity is a function of distance alone: distance "
        "explains all of its spread (R², the share of the spread a fit on distance explains, is "
        f"1). Of the other two, over {n_positions} positions, whose does distance |p − q| "
        "explain better?",
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


# ---- information flow ---------------------------------------------------------------------------
def rollout_row_sum(rolled: np.ndarray, tokens: Sequence[str], layer: int) -> Question:
    """Information flow, section 2: what a row of the rollout after `layer` adds up to.
    rolled: (L, n, n) attention rollout after every layer (core.information_flow)."""
    position = len(tokens) // 2
    total = float(np.asarray(rolled[layer, position], dtype=np.float64).sum())
    targets = (1.0, float(layer + 1))  # options 0 and 1: a mixture, or one unit per layer
    close = {k for k, target in enumerate(targets) if abs(total - target) < 5e-4}
    answers = close or ({2} if total < 1 else {int(np.argmin([abs(total - t) for t in targets]))})
    word = _token_label(tokens, position)
    return Question(
        f"Each Â averages the heads' rows (each adds up to 1) with the identity row and halves "
        f"the sum; the rollout multiplies {layer + 1} of them. After layer {layer}, what will "
        f"the row of **{word}** add up to?",
        (
            "exactly 1, at every layer",
            f"{layer + 1}, one for each layer so far",
            "less than 1, a little less with every layer",
        ),
        frozenset(answers),
        "Half of a row that adds up to 1 plus half of the identity's row adds up to 1 again, and "
        "a product of such matrices keeps every row adding up to 1: row i of the rollout is a "
        "mixture, the share of each input piece in position i.",
        f"row of {word} after layer {layer}: {total:.4f}",
    )
