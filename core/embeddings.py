"""Where token vectors sit: projections to 2-D/3-D, cosine similarities, nearest tokens.

A word piece starts as one fixed row of the word-piece table (its static vector): "bank" is the
same point in every sentence. After each layer it is a different, contextual vector per
sentence. The functions here gather those vectors from several Traces, project them to a plane
(scikit-learn PCA or t-SNE) and compare them. Plain numpy in, numpy out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from threadpoolctl import threadpool_limits

from core.attention import NEAREST_TIE
from core.positional import cosine, similarity_matrix, unit_rows
from core.text import CLS, SEP, SPACE_MARK
from core.transformer import Trace

MAX_SENTENCES = 12
MAX_SENTENCE_CHARS = 5_000  # one line can still fill BERT's 512 positions
MAX_POINTS = 600  # tokens drawn per projection; t-SNE on more is slow and the plot unreadable
TSNE_PERPLEXITY = 30.0
TSNE_EXACT_UP_TO = 200  # below this, exact t-SNE is faster than Barnes-Hut and has no tree overhead
# One BLAS/OpenMP thread: with other sessions (or processes) on the same cores, a multi-threaded
# t-SNE here ran many times slower than a single thread (bench/RESULTS.md, Cited in code).
THREADS = 1

# ---------------------------------------------------------------------------------------------
# 1. From the user's lines to sentences
# ---------------------------------------------------------------------------------------------


def split_sentences(
    text: str | None, max_sentences: int = MAX_SENTENCES, max_chars: int = MAX_SENTENCE_CHARS
) -> tuple[list[str], list[str]]:
    """One sentence per non-empty line, each cut to max_chars, at most max_sentences; + notes."""
    lines = [line.strip() for line in (text or "").splitlines()]
    lines = [line for line in lines if line]
    notes = []
    if len(lines) > max_sentences:
        notes.append(f"Only the first {max_sentences} of {len(lines)} lines are used.")
        lines = lines[:max_sentences]
    if any(len(line) > max_chars for line in lines):
        notes.append(f"Lines longer than {max_chars:,} characters are cut.")
    return [line[:max_chars] for line in lines], notes


# ---------------------------------------------------------------------------------------------
# 2. Gathering every token of several sentences
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PointSet:
    """Every (non-special) token of several sentences: m points."""

    tokens: tuple[str, ...]  # (m,) word pieces
    sentence: np.ndarray  # (m,) int: which sentence the token is in
    position: np.ndarray  # (m,) int: its position in that sentence ([CLS] = 0)
    token_ids: np.ndarray  # (m,) int vocabulary rows
    static: np.ndarray  # (m, d_model) row of the word-piece table (context-free)
    hidden: np.ndarray  # (L + 1, m, d_model) hidden states 0..L (contextual)
    sentences: tuple[str, ...]  # the sentences themselves
    n_total: int  # tokens before any sampling

    @property
    def n_points(self) -> int:
        return len(self.tokens)


class TraceRows(NamedTuple):
    """The part of a Trace a PointSet is gathered from, without its (L, H, n, n) blocks."""

    tokens: tuple[str, ...]  # n
    static: np.ndarray  # (n, d_model)
    hidden_states: np.ndarray  # (L + 1, n, d_model)
    input_ids: np.ndarray  # (n,)

    @classmethod
    def of(cls, trace: Trace) -> TraceRows:
        return cls(trace.tokens, trace.static, trace.hidden_states, trace.input_ids)


def gather_points(traces: Sequence[Trace | TraceRows], sentences: Sequence[str]) -> PointSet:
    """Stack the tokens of several Traces (without [CLS]/[SEP]) into one PointSet."""
    tokens, sentence, position, rows = [], [], [], []
    for s, trace in enumerate(traces):
        for p, token in enumerate(trace.tokens):
            if token in (CLS, SEP):
                continue  # the markers are in every sentence and mean nothing on their own
            tokens.append(token)
            sentence.append(s)
            position.append(p)
            rows.append((s, p))
    d_model = traces[0].static.shape[1] if traces else 0
    n_states = traces[0].hidden_states.shape[0] if traces else 1
    static = np.zeros((len(rows), d_model), dtype=np.float32)
    hidden = np.zeros((n_states, len(rows), d_model), dtype=np.float32)
    ids = np.zeros(len(rows), dtype=np.int64)
    for m, (s, p) in enumerate(rows):
        static[m] = traces[s].static[p]
        hidden[:, m] = traces[s].hidden_states[:, p]
        ids[m] = traces[s].input_ids[p]
    return PointSet(
        tokens=tuple(tokens),
        sentence=np.asarray(sentence, dtype=np.int64),
        position=np.asarray(position, dtype=np.int64),
        token_ids=ids,
        static=static,
        hidden=hidden,
        sentences=tuple(sentences),
        n_total=len(rows),
    )


def occurrences(points: PointSet, word: str) -> np.ndarray:
    """(k,) indices of the points whose word piece is `word`."""
    return np.flatnonzero(np.asarray(points.tokens, dtype=object) == word)


def pick_occurrences(points: PointSet, word: str, limit: int) -> np.ndarray:
    """(≤ limit,) indices of `word`, taken round-robin over sentences so each sense is present."""
    found = occurrences(points, word)
    by_sentence = [found[points.sentence[found] == s] for s in np.unique(points.sentence[found])]
    picked: list[int] = []
    for rank in range(max((len(group) for group in by_sentence), default=0)):
        picked += [int(group[rank]) for group in by_sentence if rank < len(group)]
        if len(picked) >= limit:
            break
    return np.sort(np.asarray(picked[:limit], dtype=np.int64))


def sentence_sizes(points: PointSet) -> list[int]:
    """Number of points (word pieces without [CLS]/[SEP]) of every sentence."""
    return np.bincount(points.sentence, minlength=len(points.sentences)).tolist()


def word_counts(points: PointSet) -> dict[str, tuple[int, int]]:
    """word piece -> (number of sentences it is in, number of occurrences)."""
    counts: dict[str, tuple[set[int], int]] = {}
    for token, s in zip(points.tokens, points.sentence, strict=True):
        seen, n = counts.get(token, (set(), 0))
        counts[token] = (seen | {int(s)}, n + 1)
    return {token: (len(seen), n) for token, (seen, n) in counts.items()}


def default_word(
    words: Sequence[str],
    counts: dict[str, tuple[int, int]],
    specials: Collection[str],
    prefer: str = "bank",
) -> str:
    """The piece a page follows first: `prefer` (a leading space mark ignored) if present, else
    the first of `words` (most sentences first) that is no special piece, holds a letter and is
    in several sentences (counts: word_counts), else the first that is no special piece.

    A special piece is a poor default: a decoder's first piece sits at position 0 in every
    sentence and sees only itself, so every comparison of its occurrences compares one vector.
    """
    for word in words:
        if word.removeprefix(SPACE_MARK) == prefer:
            return word
    plain = [w for w in words if w not in specials]
    readable = [w for w in plain if any(c.isalpha() for c in w) and counts[w][0] >= 2]
    return (readable or plain or list(words))[0]


def cap_points(
    points: PointSet, keep: np.ndarray, cap: int = MAX_POINTS, seed: int = 0
) -> PointSet:
    """At most `cap` points: every index in `keep`, then an even random sample of the rest."""
    m = points.n_points
    if m <= cap:
        return points
    keep = np.unique(np.asarray(keep, dtype=np.int64))[:cap]
    rest = np.setdiff1d(np.arange(m), keep)
    rng = np.random.default_rng(seed)
    chosen = np.sort(np.concatenate([keep, rng.choice(rest, cap - len(keep), replace=False)]))
    return PointSet(
        tokens=tuple(points.tokens[i] for i in chosen),
        sentence=points.sentence[chosen],
        position=points.position[chosen],
        token_ids=points.token_ids[chosen],
        static=points.static[chosen],
        hidden=points.hidden[:, chosen],
        sentences=points.sentences,
        n_total=points.n_total,
    )


# ---------------------------------------------------------------------------------------------
# 3. Projections
# ---------------------------------------------------------------------------------------------


def tsne_perplexity(n_points: int, wanted: float = TSNE_PERPLEXITY) -> float:
    """t-SNE needs perplexity < n_points; a third of the points keeps small inputs sensible."""
    return float(max(1.0, min(wanted, (n_points - 1) / 3.0)))


def project(
    vectors: np.ndarray, method: str = "pca", n_components: int = 2, seed: int = 0
) -> np.ndarray:
    """(m, d) -> (m, n_components) by PCA or t-SNE; missing components (m too small) are 0."""
    vectors = np.asarray(vectors, dtype=np.float64)
    m = vectors.shape[0]
    out = np.zeros((m, n_components))
    usable = min(n_components, m - 1, vectors.shape[1]) if m > 1 else 0
    if usable < 1:
        return out  # one point (or none): it sits at the origin
    if method not in ("pca", "tsne"):
        raise ValueError(f"method must be 'pca' or 'tsne', got {method!r}")
    with threadpool_limits(THREADS):
        if method == "tsne" and m >= 4:
            tsne = TSNE(
                n_components=n_components,
                perplexity=tsne_perplexity(m),
                init="pca",
                method="exact" if m <= TSNE_EXACT_UP_TO else "barnes_hut",
                random_state=seed,
                max_iter=500,
                n_jobs=THREADS,
            )
            return tsne.fit_transform(vectors)
        out[:, :usable] = PCA(n_components=usable, random_state=seed).fit_transform(vectors)
    return out


def project_unique(
    vectors: np.ndarray, ids: np.ndarray, method: str = "pca", n_components: int = 2
) -> np.ndarray:
    """(m, d) -> (m, c), projecting each distinct id once: equal static rows land on one point.

    (t-SNE would otherwise push exact copies apart a little.)
    """
    unique_ids, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    del unique_ids
    return project(vectors[first], method, n_components)[inverse]


def explained_variance(
    vectors: np.ndarray, n_components: int = 2, ids: np.ndarray | None = None
) -> np.ndarray:
    """(m, d) -> (c,): the share of the points' total variance along each of PCA's first c axes,
    as `project` fits them (each distinct id once when ids are given, as `project_unique`)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    if ids is not None:
        _, first = np.unique(ids, return_index=True)
        vectors = vectors[first]
    usable = min(n_components, vectors.shape[0] - 1, vectors.shape[1])
    shares = np.zeros(n_components)
    if usable >= 1:
        with threadpool_limits(THREADS):
            shares[:usable] = PCA(n_components=usable).fit(vectors).explained_variance_ratio_
    return shares


def trajectories(hidden: np.ndarray, followed: np.ndarray, n_components: int = 2) -> np.ndarray:
    """(L + 1, m, d) -> (L + 1, m, c): every token's direction at every state, in ONE plane.

    Three choices make the followed occurrences' paths read in order:
    - directions (unit rows), which is what a cosine compares: a longer vector is not a move;
    - each state's mean direction over all m tokens removed: that drift is shared by every
      token, and it is what tangled the paths when it was left in;
    - one PCA plane fitted on the followed occurrences at every state (`followed`, indices
      into m), so the plane spans how they move apart; every token is projected onto it.
    """
    n_states, m, d = hidden.shape
    directions = unit_rows(hidden)  # (L+1, m, d), float64
    hidden = directions - directions.mean(axis=1, keepdims=True)  # (L+1, m, d) drift removed
    flat = hidden.reshape(n_states * m, d).astype(np.float64)  # (L+1, m, d) -> ((L+1)·m, d)
    followed = np.asarray(followed, dtype=np.int64)
    # (L+1, k, d) -> ((L+1)·k, d): the rows the plane is fitted on; every token if none followed
    fit_on = (hidden[:, followed] if followed.size else hidden).reshape(-1, d)
    usable = min(n_components, fit_on.shape[0] - 1, d)
    out = np.zeros((n_states * m, n_components))
    if usable >= 1:
        with threadpool_limits(THREADS):
            pca = PCA(n_components=usable, random_state=0).fit(fit_on)
            out[:, :usable] = pca.transform(flat)
    return out.reshape(n_states, m, n_components)  # ((L+1)·m, c) -> (L+1, m, c)


# ---------------------------------------------------------------------------------------------
# 4. Similarities and neighbours
# ---------------------------------------------------------------------------------------------


def cosine_by_layer(points: PointSet, indices: np.ndarray) -> np.ndarray:
    """(L + 2, k, k): the cosine table of the chosen points, static first, then states 0..L."""
    tables = [similarity_matrix(points.static[indices], "cosine")]
    tables += [similarity_matrix(state[indices], "cosine") for state in points.hidden]
    return np.stack(tables)


@dataclass(frozen=True)
class SenseSplit:
    """Mean cosine between occurrences of one word, over pairs of the same sense and over pairs
    of different senses, at each stage of a cosine_by_layer table; NaN where no such pair is."""

    same: np.ndarray  # (S,)
    other: np.ndarray  # (S,)

    @property
    def measured(self) -> bool:
        """Whether both kinds of pair exist (a word seen in one sense only has no split)."""
        return not (np.isnan(self.same).all() or np.isnan(self.other).all())

    @property
    def same_closer(self) -> np.ndarray:
        """(S,) bool: True where pairs of one sense are more alike than pairs across senses
        (False where they are not, or where either kind of pair is missing)."""
        return np.nan_to_num(self.same, nan=-np.inf) > np.nan_to_num(self.other, nan=np.inf)


def sense_split(tables: np.ndarray, senses: Sequence[str | None]) -> SenseSplit:
    """(S, k, k) cosine tables of k occurrences, each occurrence's sense (None: unknown, left
    out) -> SenseSplit. Occurrences of one sense drift apart less than occurrences of two when
    the context has told the model which sense it is."""
    known = np.array([sense is not None for sense in senses], dtype=bool)  # (k,)
    labels = np.array([sense or "" for sense in senses], dtype=object)  # (k,)
    pairs = np.triu(np.outer(known, known), k=1)  # (k, k) each pair of known senses once
    alike = labels[:, None] == labels[None, :]  # (k, k)

    def mean_over(chosen: np.ndarray) -> np.ndarray:
        if not chosen.any():
            return np.full(tables.shape[0], np.nan)
        return tables[:, chosen].mean(axis=-1)  # (S, pairs) -> (S,)

    return SenseSplit(same=mean_over(pairs & alike), other=mean_over(pairs & ~alike))


def mean_off_diagonal(tables: np.ndarray) -> np.ndarray:
    """(..., k, k) -> (...): mean of every table's entries off the diagonal (NaN if k < 2)."""
    k = tables.shape[-1]
    if k < 2:
        return np.full(tables.shape[:-2], np.nan)
    off = ~np.eye(k, dtype=bool)
    return tables[..., off].mean(axis=-1)


def word_mask(vocabulary: Sequence[str]) -> np.ndarray:
    """(vocab,) bool: True for real word pieces, False for [PAD], [CLS], [unused7] and the like."""
    return np.array([not (t.startswith("[") and t.endswith("]")) for t in vocabulary], dtype=bool)


# Rows of the word-piece table normalised at once: in float64, the work of one chunk stays near
# 2 x 2,048 x d_model x 8 bytes (25 MB at d_model 768) beside the float32 result, where the whole
# table at once held twice the table in float64 (~188 MB on MiniLM's 30,522 x 384).
TABLE_CHUNK_ROWS = 2_048


def unit_table(vectors: np.ndarray, chunk_rows: int = TABLE_CHUNK_ROWS) -> np.ndarray:
    """(vocab, d) -> (vocab, d) float32 rows v / ‖v‖ (zero rows stay zero), each computed in
    float64 (unit_rows) a chunk of rows at a time."""
    table = np.empty(vectors.shape, dtype=np.float32)  # (vocab, d)
    for start in range(0, vectors.shape[0], chunk_rows):
        table[start : start + chunk_rows] = unit_rows(vectors[start : start + chunk_rows])
    return table


def unit_table_bytes(n_rows: int, d: int, chunk_rows: int = TABLE_CHUNK_ROWS) -> int:
    """Peak bytes of unit_table: the float32 result and one chunk's float64 copy and quotient."""
    return 4 * n_rows * d + 2 * 8 * min(n_rows, chunk_rows) * d


def nearest_words(
    vectors: np.ndarray, unit_table: np.ndarray, k: int = 5, allowed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(q, d) vectors -> (q, k) row ids and (q, k) cosines of the most similar table rows.

    unit_table is the (vocab, d) word-piece table with unit rows. Ties keep the lower row first.
    """
    cos = unit_rows(np.atleast_2d(vectors)).astype(unit_table.dtype) @ unit_table.T  # (q, vocab)
    if allowed is not None:
        cos = np.where(allowed[None, :], cos, -np.inf)
    k = min(k, cos.shape[1])
    candidates = np.argpartition(-cos, k - 1, axis=1)[:, :k]  # (q, k) unordered best k
    order = np.lexsort((candidates, -np.take_along_axis(cos, candidates, axis=1)), axis=1)
    ids = np.take_along_axis(candidates, order, axis=1)  # (q, k) best first
    return ids, np.take_along_axis(cos, ids, axis=1)


def contextual_neighbours(
    points: PointSet, indices: np.ndarray, state: int, k: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """(q,) chosen points -> (q, k) indices into the points and (q, k) cosines of the tokens
    nearest to each at hidden state `state`, among the tokens of the OTHER sentences.

    The tokens a word is compared with are contextual too: which *bank* of another sentence
    (or which *river*, *money*) a *bank* sits closest to is what its context made of it.
    Ties keep the lower index first; fewer than k candidates leave -1 and NaN.
    """
    indices = np.asarray(indices, dtype=np.int64)
    unit = unit_rows(points.hidden[state])  # (m, d)
    cos = unit[indices] @ unit.T  # (q, m)
    own = points.sentence[indices][:, None] == points.sentence[None, :]  # (q, m) same sentence
    cos = np.where(own, -np.inf, cos)
    order = np.lexsort((np.broadcast_to(np.arange(cos.shape[1]), cos.shape), -cos), axis=1)
    top = order[:, :k]  # (q, ≤k) best first
    top_cos = np.take_along_axis(cos, top, axis=1)
    found = np.isfinite(top_cos)
    ids = np.full((len(indices), k), -1, dtype=np.int64)
    cosines = np.full((len(indices), k), np.nan)
    ids[:, : top.shape[1]] = np.where(found, top, -1)
    cosines[:, : top.shape[1]] = np.where(found, top_cos, np.nan)
    return ids, cosines


def first_neighbour_shares_sense(
    points: PointSet, indices: np.ndarray, ids: np.ndarray, sentence_senses: Sequence[str | None]
) -> tuple[int, int]:
    """(how many, of how many): of the chosen occurrences whose sentence has a known sense
    (sentence_senses: one per sentence, None: unknown), those whose first contextual neighbour
    (ids[:, 0], from contextual_neighbours) is the same word piece in a sentence of that sense."""
    counted = matched = 0
    for row, i in enumerate(np.asarray(indices, dtype=np.int64)):
        sense = sentence_senses[int(points.sentence[i])]
        if sense is None:
            continue
        counted += 1
        j = int(ids[row, 0])
        if j >= 0 and points.tokens[j] == points.tokens[i]:
            matched += sentence_senses[int(points.sentence[j])] == sense
    return matched, counted


@dataclass(frozen=True)
class SenseMatch:
    """Whether each occurrence's nearest other occurrence (in another sentence) has its sense,
    at every hidden state, counted over the occurrences that have a choice (at least one other
    occurrence of their sense and one of another). An occurrence whose nearest rival of its own
    sense and nearest of another are equally near (NEAREST_TIE) is tied: not a match."""

    matched: np.ndarray  # (L + 1,) int: how many counted occurrences met their own sense first
    counted: int  # occurrences with a choice
    chance: float  # expected share matched if the nearest were drawn at random (NaN if none)
    tied: np.ndarray  # (L + 1,) int: how many counted occurrences had a tie between the senses

    @property
    def measured(self) -> bool:
        return self.counted > 0


def sense_match(points: PointSet, indices: np.ndarray, senses: Sequence[str | None]) -> SenseMatch:
    """indices: k occurrences of one word; senses: (k,) each one's sense (None: unknown)."""
    indices = np.asarray(indices, dtype=np.int64)
    labels = np.array([sense or "" for sense in senses], dtype=object)  # (k,)
    known = labels != ""  # (k,)
    other_sentence = points.sentence[indices][:, None] != points.sentence[indices][None, :]
    rivals = other_sentence & known[:, None] & known[None, :]  # (k, k) who may be nearest
    alike = labels[:, None] == labels[None, :]  # (k, k)
    has_choice = known & (rivals & alike).any(axis=1) & (rivals & ~alike).any(axis=1)  # (k,)
    if not has_choice.any():
        nothing = np.zeros(points.hidden.shape[0], dtype=np.int64)
        return SenseMatch(nothing, 0, float("nan"), nothing.copy())
    choice = np.flatnonzero(has_choice)
    # a random pick among its rivals meets its own sense with odds (alike rivals) / (rivals)
    chance = float(np.mean((rivals & alike).sum(axis=1)[choice] / rivals.sum(axis=1)[choice]))
    matched, tied = [], []
    for state in points.hidden:  # (m, d) one state
        unit = unit_rows(state[indices])  # (k, d) float64
        cos = unit @ unit.T  # (k, k)
        nearest_alike = np.where(rivals & alike, cos, -np.inf).max(axis=1)  # (k,)
        nearest_other = np.where(rivals & ~alike, cos, -np.inf).max(axis=1)  # (k,)
        # (counted,) finite: a counted occurrence has a rival of each kind
        gap = nearest_alike[choice] - nearest_other[choice]
        matched.append(int(np.sum(gap > NEAREST_TIE)))
        tied.append(int(np.sum(np.abs(gap) <= NEAREST_TIE)))
    return SenseMatch(
        np.asarray(matched, dtype=np.int64),
        int(has_choice.sum()),
        chance,
        np.asarray(tied, dtype=np.int64),
    )


@dataclass(frozen=True)
class SharedPlane:
    """The same tokens from two runs (e.g. with and without √d_k), in one PCA plane."""

    coords_first: np.ndarray  # (m, 2)
    coords_second: np.ndarray  # (m, 2)
    cosines: np.ndarray  # (m,) cos(first_i, second_i): 1 = the vector did not turn
    mean_cosine: float


def shared_plane(first: np.ndarray, second: np.ndarray) -> SharedPlane:
    """(m, d), (m, d) -> both projected by one PCA fitted on all 2m vectors, and their cosines."""
    m = first.shape[0]
    both = project(np.concatenate([first, second], axis=0), "pca", 2)  # (2m, 2)
    cosines = cosine(first, second)  # (m,)
    return SharedPlane(both[:m], both[m:], cosines, float(cosines.mean()) if m else float("nan"))
