"""Per-head statistics and the data behind the explorer's views (no plotting here).

Everything takes attention weights shaped (L, H, n, n) — layers, heads, query rows, key columns —
or a Trace that holds them. Rows are where a query looks; every row of a softmax sums to 1.

Many BERT heads park most of their weight on [CLS] or [SEP] when they have nothing better to do
(Clark et al., 2019 call this a no-op). Such "sink" heads hide whatever else they do: dropping
the special columns and renormalising each row over the remaining tokens shows that rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.context import piece_index as piece_index  # where a shared piece sits views
from core.context import piece_key, shared_tokens
from core.multi_head import value_weighted_norms, value_weighted_share
from core.text import CLS, SEP
from core.transformer import Trace, Transformer

SPECIAL_TOKENS = frozenset({CLS, SEP})
SINK_THRESHOLD = 0.5  # a head is a sink when, on average, half its weight lands on [CLS]/[SEP]
THUMBNAIL_SIDE = 48  # model-view thumbnails longer than this are block-mean pooled
PAIR_FILTERS = ("All", "A→A", "A→B", "B→A", "B→B")  # query sentence → key sentence


def attention_of(source: Trace | np.ndarray) -> np.ndarray:
    """(L, H, n, n) attention weights of a Trace, or the array itself."""
    weights = source.attentions if isinstance(source, Trace) else np.asarray(source)
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"expected attention weights shaped (L, H, n, n), got {weights.shape}")
    return weights


def special_mask(tokens: Sequence[str], special: Sequence[bool] | None = None) -> np.ndarray:
    """(n,) bool: True where the token is special: the Trace's own mask when given ([CLS],
    [SEP], <s>, </s>, …; none for GPT-2), else [CLS] or [SEP] by their text."""
    if special is not None and len(special) == len(tokens):
        return np.asarray(special, dtype=bool)
    return np.array([token in SPECIAL_TOKENS for token in tokens], dtype=bool)


def row_entropy(attn_weights: np.ndarray) -> np.ndarray:
    """(..., n): entropy of every row in bits, H_i = -Σ_j α_ij log2 α_ij (0·log 0 = 0)."""
    weights = np.asarray(attn_weights)
    logs = np.log2(weights, out=np.zeros(weights.shape, dtype=weights.dtype), where=weights > 0)
    # Products stay in the input's precision (float32 at 512 tokens: 19 M of them); the sum
    # over keys accumulates in float64. An all-zero row (a query that could see nothing) gets
    # 0 bits; the maximum clips the −0.0 of rounding.
    return np.maximum(-(weights * logs).sum(axis=-1, dtype=np.float64), 0.0)


# ---- per-head statistics -----------------------------------------------------------------------
STAT_LABELS = {
    "entropy": "mean row entropy (bits)",
    "on_cls": "share on [CLS]",
    "on_sep": "share on [SEP]",
    "on_self": "share on itself",
    "on_previous": "share on previous token",
    "on_next": "share on next token",
}


@dataclass(frozen=True)
class HeadStats:
    """Per-head averages over the query rows of one sentence; every field is (L, H)."""

    entropy: np.ndarray  # mean row entropy in bits (0 = one key takes all, log2 n = uniform)
    on_cls: np.ndarray  # mean weight a row puts on [CLS]
    on_sep: np.ndarray  # mean weight a row puts on [SEP] (both of them for a pair)
    on_self: np.ndarray  # mean α_ii over role_rows (real word pieces)
    on_previous: np.ndarray  # mean α_i,i-1 over role_rows: a real piece after a real piece
    on_next: np.ndarray  # mean α_i,i+1 over role_rows: a real piece before a real piece
    sink: np.ndarray  # bool: on_cls + on_sep ≥ threshold

    @property
    def n_sinks(self) -> int:
        return int(self.sink.sum())

    def stat(self, name: str) -> np.ndarray:
        """(L, H): the statistic called `name` (a key of STAT_LABELS)."""
        return getattr(self, name)

    def top_head(self, name: str) -> tuple[int, int]:
        """(layer, head) with the largest value of the statistic `name` (the first of a tie)."""
        values = self.stat(name)  # (L, H)
        layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
        return int(layer), int(head)

    def mean_over_heads(self, name: str) -> float:
        """The statistic `name` averaged over every head of every layer."""
        return float(self.stat(name).mean())

    def table(self) -> dict[str, list]:
        """One row per head (layer-major), columns named for people: for st.dataframe / CSV."""
        n_layers, n_heads = self.entropy.shape
        columns: dict[str, list] = {
            "layer": np.repeat(np.arange(n_layers), n_heads).tolist(),
            "head": np.tile(np.arange(n_heads), n_layers).tolist(),
        }
        for name, label in STAT_LABELS.items():
            columns[label] = np.round(self.stat(name).ravel(), 4).tolist()
        columns["sink head"] = self.sink.ravel().tolist()
        return columns


def role_rows(special: np.ndarray, offset: int) -> np.ndarray:
    """(k,) the query rows i whose key i + offset exists, where both i and i + offset are real
    word pieces (special False): the rows that score "itself" (offset 0), "the token before"
    (−1) or "the token after" (+1). One rule for every page that scores these roles (the
    Heatmaps statistics and page 4's role scores, core/head_roles.py): weight a row parks on a
    special piece beside it does not count as weight on a neighbour, and a special row asks
    nothing."""
    special = np.asarray(special, dtype=bool)
    n = len(special)
    rows = np.arange(max(0, -offset), min(n, n - offset))  # rows whose key i + offset exists
    return rows[~special[rows] & ~special[rows + offset]]


def _mean_on_offset(weights: np.ndarray, special: np.ndarray, offset: int) -> np.ndarray:
    """(L, H): mean of α_i,i+offset over role_rows(special, offset); 0 where there is none."""
    rows = role_rows(special, offset)
    if not len(rows):
        return np.zeros(weights.shape[:2])
    # the two index arrays pick element (i, i + offset) of every head's matrix: (L, H, k)
    return weights[..., rows, rows + offset].astype(np.float64).mean(axis=-1)


def head_statistics(
    source: Trace | np.ndarray,
    tokens: Sequence[str] | None = None,
    sink_threshold: float = SINK_THRESHOLD,
    hide_specials: bool = False,
    special: Sequence[bool] | None = None,
) -> HeadStats:
    """Per-head averages over query rows of an (L, H, n, n) attention array (or a Trace).

    hide_specials: the averages describe the weights with the specials hidden and each row
    renormalised (without_specials), as the page shows them; the sink flag still comes from
    the weights as computed, since it says how much a head parks on those tokens.
    special: (n,) which pieces are special (special_mask; a Trace's own by default). "On
    [CLS]" is the weight on a special piece at position 0 (BERT's [CLS], a Llama's <s>), "on
    [SEP]" the weight on the other specials.
    """
    weights = attention_of(source)
    if isinstance(source, Trace):
        tokens = source.tokens if tokens is None else tokens
        special = source.special if special is None and tokens == source.tokens else special
    if tokens is None or len(tokens) != weights.shape[-1]:
        raise ValueError("need one token per row of the attention matrices")
    tokens = list(tokens)
    specials = special_mask(tokens, special)  # (n,)
    is_cls = specials & (np.arange(len(tokens)) == 0)
    is_sep = specials & ~is_cls
    # Summing the key columns first leaves (L, H, n) per query; the mean over rows follows.
    parked = (weights[..., specials]).sum(axis=-1, dtype=np.float64).mean(axis=-1)
    shown = without_specials(weights, tokens, special) if hide_specials else weights
    return HeadStats(
        # layer by layer: row_entropy's temporaries are two copies of what it reads
        entropy=np.stack([row_entropy(layer).mean(axis=-1) for layer in shown]),
        on_cls=shown[..., is_cls].sum(axis=-1, dtype=np.float64).mean(axis=-1),
        on_sep=shown[..., is_sep].sum(axis=-1, dtype=np.float64).mean(axis=-1),
        # offset -1 reads α_i,i-1 (the key before the query), +1 the key after
        on_self=_mean_on_offset(shown, specials, 0),
        on_previous=_mean_on_offset(shown, specials, -1),
        on_next=_mean_on_offset(shown, specials, 1),
        sink=parked >= sink_threshold,
    )


def without_specials(
    attn_weights: np.ndarray, tokens: Sequence[str], special: Sequence[bool] | None = None
) -> np.ndarray:
    """(..., n, n): α with the specials' columns dropped and each row rescaled to sum to 1
    (special: the Trace's mask, see special_mask; else [CLS]/[SEP] by their text).

    α'_ij = α_ij / Σ_{k not special} α_ik for ordinary keys j, 0 for special keys. A row whose
    whole weight sat on special tokens has nothing left to show and becomes all zeros.
    """
    keep = ~special_mask(tokens, special)  # (n,) True = ordinary key
    weights = (attn_weights * keep).astype(np.float32, copy=False)  # one copy, over key columns
    rest = weights.sum(axis=-1, keepdims=True)  # (..., n, 1) weight left in each row
    # in place: a row with no weight left is all zeros already and stays so
    return np.divide(weights, rest, out=weights, where=rest > 0)


# ---- thumbnails for the model view ------------------------------------------------------------
def block_size(n: int, max_side: int = THUMBNAIL_SIDE) -> int:
    """Tokens per block, ceil(n / max_side), so n positions fit in at most max_side blocks."""
    return max(1, int(np.ceil(n / max_side)))


def pooled_side(n: int, max_side: int = THUMBNAIL_SIDE) -> int:
    """The side of an (n, n) matrix after block_mean_pool: one cell per block of tokens."""
    return -(-n // block_size(n, max_side))  # ceil(n / tokens per block)


def block_starts(n: int, max_side: int) -> np.ndarray:
    """Start index of each block when n positions are pooled into at most max_side blocks."""
    return np.arange(0, n, block_size(n, max_side))


def block_mean_pool(matrix: np.ndarray, max_side: int = THUMBNAIL_SIDE) -> np.ndarray:
    """(..., n, n) -> (..., m, m) with m ≤ max_side: the mean of each block of cells.

    Blocks are ceil(n / max_side) tokens wide; the last block may be narrower and is averaged
    over its real number of cells, so it is not drawn paler than the others. When n ≤ max_side
    the matrix comes back unchanged.
    """
    n = matrix.shape[-1]
    starts = block_starts(n, max_side)
    if len(starts) == n:
        return np.asarray(matrix)
    sizes = np.diff(np.append(starts, n)).astype(np.float64)  # (m,) tokens per block
    summed = np.add.reduceat(np.add.reduceat(matrix, starts, axis=-1), starts, axis=-2)
    return (summed / sizes[:, None] / sizes[None, :]).astype(np.float32)  # (..., m, m)


def thumbnails(source: Trace | np.ndarray, max_side: int = THUMBNAIL_SIDE) -> np.ndarray:
    """(L, H, m, m): every head's matrix, block-mean pooled to at most max_side per side."""
    return block_mean_pool(attention_of(source), max_side)


# ---- the head view ----------------------------------------------------------------------------
def pair_mask(segments: Sequence[int], which: str) -> np.ndarray:
    """(n, n) bool: True where (query row, key column) belongs to the chosen sentence blocks.

    "A→B" keeps queries of sentence A looking at keys of sentence B; "All" keeps everything.
    """
    if which not in PAIR_FILTERS:
        raise ValueError(f"pair filter must be one of {PAIR_FILTERS}, got {which!r}")
    segments = np.asarray(segments)
    if which == "All":
        return np.ones((len(segments), len(segments)), dtype=bool)
    query_in = segments == (0 if which[0] == "A" else 1)  # (n,)
    key_in = segments == (0 if which[-1] == "A" else 1)  # (n,)
    return query_in[:, None] & key_in[None, :]


def has_pair(segments: Sequence[int]) -> bool:
    """True when the input holds a second sentence (some token has segment 1)."""
    return bool(np.any(np.asarray(segments) == 1))


@dataclass(frozen=True)
class HeadViewLines:
    """The lines of a head view: one entry per drawn (head, query, key)."""

    head: np.ndarray  # (k,) int: which head the line belongs to
    query: np.ndarray  # (k,) int: query token index (left column)
    key: np.ndarray  # (k,) int: key token index (right column)
    weight: np.ndarray  # (k,) float in [0, 1]: the weight the line stands for
    opacity: np.ndarray  # (k,) float in [0, 1]: = weight, or weight / the head's strongest line
    window: tuple[int, int]  # [start, stop) of the tokens drawn
    dropped_light: int  # lines fainter than min_opacity that were left out

    def __len__(self) -> int:
        return len(self.weight)


def head_view_lines(
    weights: np.ndarray,
    segments: Sequence[int],
    heads: Sequence[int],
    pair: str = "All",
    window: tuple[int, int] | None = None,
    min_opacity: float = 0.0,
    token: int | None = None,
    token_side: str = "query",
    stretch: bool = False,
) -> HeadViewLines:
    """Lines of the chosen heads of one layer; `weights` is (H, n, n) with values in [0, 1].

    Keeps a line (h, i, j) when h is chosen, i and j lie in the window, (i, j) passes the pair
    filter, w_hij > 0 and — if a token is chosen — i (or j, for token_side="key") is that token.
    Its opacity is w_hij, or with stretch w_hij / max of head h's kept lines (at 512 tokens a
    typical weight is ~1/512 and would be invisible). Lines under min_opacity are left out.
    """
    n = weights.shape[-1]
    start, stop = window if window is not None else (0, n)
    keep = pair_mask(segments, pair)  # (n, n)
    inside = np.zeros(n, dtype=bool)
    inside[start:stop] = True
    keep &= inside[:, None] & inside[None, :]
    if token is not None:
        side = np.zeros(n, dtype=bool)
        side[token] = True
        keep &= side[:, None] if token_side == "query" else side[None, :]
    chosen = np.asarray(sorted(set(heads)), dtype=int)
    selected = (weights[chosen] * keep).astype(np.float64)  # (h, n, n): zero outside kept cells
    opacity = selected
    if stretch:
        strongest = selected.max(axis=(1, 2), keepdims=True)  # (h, 1, 1)
        opacity = np.divide(selected, strongest, out=np.zeros_like(selected), where=strongest > 0)
    visible = selected > 0
    strong = visible & (opacity >= min_opacity)
    head_pos, query, key = np.nonzero(strong)
    return HeadViewLines(
        head=chosen[head_pos],
        query=query,
        key=key,
        weight=selected[head_pos, query, key],
        opacity=opacity[head_pos, query, key],
        window=(start, stop),
        dropped_light=int(visible.sum() - strong.sum()),
    )


def head_view_weights(
    model: Transformer, trace: Trace, layer: int, value_weighted: bool = False
) -> np.ndarray:
    """(H, n, n) line strengths of one layer: α, or ‖α_ij v_j W_Oʰ‖ as a share of its row."""
    if not value_weighted:
        return trace.attentions[layer]
    # Norms are not probabilities; dividing by the row total puts them on α's 0..1 scale so
    # the two modes can be compared line by line.
    return value_weighted_share(value_weighted_norms(model, trace, layer))


def every_layer_head_view_weights(
    model: Transformer, trace: Trace, value_weighted: bool = False
) -> np.ndarray:
    """(L, H, n, n) head_view_weights of every layer."""
    layers = range(model.n_layers)
    return np.stack([head_view_weights(model, trace, layer, value_weighted) for layer in layers])


def window_around(n: int, start: int, size: int) -> tuple[int, int]:
    """[start, stop) of at most `size` tokens, shifted left so it never runs past n."""
    size = max(1, min(size, n))
    start = int(np.clip(start, 0, n - size))
    return start, start + size


# ---- comparing a word in two sentences ---------------------------------------------------------
def query_row(
    trace: Trace, layer: int, head: int, query: int, renormalise: bool = False
) -> np.ndarray:
    """(n,): where one query looks in one head, optionally without [CLS]/[SEP] (see above)."""
    row = trace.attentions[layer, head, query]  # (n,)
    return without_specials(row[None, :], trace.tokens, trace.special)[0] if renormalise else row


def query_rows(trace: Trace, query: int, renormalise: bool = False) -> np.ndarray:
    """(L, H, n): where one query looks in every head; query_row for all layers and heads."""
    rows = trace.attentions[:, :, query, :]  # (L, H, n_q, n_k) -> (L, H, n_k)
    return without_specials(rows, trace.tokens, trace.special) if renormalise else rows


def shared_pieces(
    tokens_a: Sequence[str],
    tokens_b: Sequence[str],
    special_a: Sequence[bool] | None = None,
    special_b: Sequence[bool] | None = None,
) -> list[str]:
    """Word pieces present in both sentences (no specials; a BPE piece's leading space
    ignored, core.context.piece_key), longest first. special_a, special_b: the Traces' masks
    of special pieces (<s>, </s>, …); without them [CLS]/[SEP] by their text.

    Longest first puts content words ("bank") before "the" and "." — usually the one to compare.
    Ties keep the order of the first sentence. Find a piece again with piece_index.
    """
    specials = {
        piece_key(t)
        for tokens, special in ((tokens_a, special_a), (tokens_b, special_b))
        for t, is_special in zip(tokens, special_mask(tokens, special), strict=True)
        if is_special
    }
    shared = [t for t in shared_tokens(tokens_a, tokens_b) if t not in specials]
    return sorted(shared, key=lambda token: -len(token.removeprefix("##")))  # a stable sort


def ties_with_boldest(
    attentions: np.ndarray, special: np.ndarray, boldest: tuple[int, int, int, int, float]
) -> tuple[int, int]:
    """How many lines boldest_line chooses among read the same as `boldest` at two decimals:
    (in every head, in the boldest's own head), the boldest itself counted. Several lines at
    "1.00" look equally bold, so a sentence naming one should say it has company."""
    # boldest is the largest weight among these lines, so a line reads the same at two decimals
    # when it is at least the bottom of the boldest's reading (0.995 for "1.00"): one comparison,
    # no rounded copy of every head's weights (75 MB at 512 pieces on MiniLM)
    bottom = float(f"{boldest[4]:.2f}") - 0.005
    same = (attentions >= bottom) & ordinary_pairs(special)  # (L, H, n, n)
    layer, head = boldest[:2]
    return int(same.sum()), int(same[layer, head].sum())


def boldest_drawn(
    lines: HeadViewLines, head: int, special: np.ndarray
) -> tuple[int, int, float] | None:
    """(query, key, weight) of `head`'s strongest drawn line between two different ordinary
    pieces (special: (n,) bool over the drawn token positions), as boldest_line picks across
    heads; None when the head draws no such line."""
    ordinary = ~np.asarray(special, dtype=bool)  # (n,)
    between = ordinary[lines.query] & ordinary[lines.key] & (lines.query != lines.key)  # (k,)
    candidates = np.flatnonzero((lines.head == head) & between)
    if candidates.size == 0:
        return None
    strongest = candidates[np.argmax(lines.weight[candidates])]
    return int(lines.query[strongest]), int(lines.key[strongest]), float(lines.weight[strongest])


def ordinary_pairs(special: np.ndarray) -> np.ndarray:
    """(n,) bool special pieces -> (n, n) bool: query and key both ordinary and different (with
    one ordinary piece, itself), the lines boldest_line chooses among."""
    ordinary = ~np.asarray(special, dtype=bool)  # (n,)
    between = ordinary[:, None] & ordinary[None, :]  # (n, n) query and key both ordinary
    if between.sum() > 1:
        np.fill_diagonal(between, False)  # two different pieces
    return between


def boldest_line(attentions: np.ndarray, special: np.ndarray) -> tuple[int, int, int, int, float]:
    """(L, H, n, n) weights, (n,) bool special pieces -> (layer, head, query, key, weight) of
    the largest weight between two different ordinary pieces in any head: the head view's
    boldest line once the special pieces, where many heads park their weight, are left out.
    A piece's weight on itself is left out too: under the causal mask the first row has only
    itself to look at, and its 1.0 would win every time. (With one ordinary piece, itself.)"""
    weights = np.where(ordinary_pairs(special), attentions, -np.inf)  # (L, H, n, n)
    layer, head, query, key = np.unravel_index(int(np.argmax(weights)), weights.shape)
    return int(layer), int(head), int(query), int(key), float(attentions[layer, head, query, key])
