"""Where token vectors sit: projections to 2-D/3-D, cosine similarities, nearest vocabulary words.

A word piece starts as one fixed row of the word-piece table (its static vector): "bank" is the
same point in every sentence. After each layer it is a different, contextual vector per
sentence. The functions here gather those vectors from several Traces, project them to a plane
(scikit-learn PCA or t-SNE) and compare them. Plain numpy in, numpy out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from threadpoolctl import threadpool_limits

from core.positional import cosine, similarity_matrix, unit_rows
from core.text import CLS, SEP
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


def trajectories(hidden: np.ndarray, n_components: int = 2, fit_rows: int = 4000) -> np.ndarray:
    """(L + 1, m, d) -> (L + 1, m, c): every layer's vectors in ONE PCA plane fitted on all of them.

    One shared plane is what makes a path readable: a point moves only because its vector moved.
    """
    n_states, m, d = hidden.shape
    flat = hidden.reshape(n_states * m, d).astype(np.float64)  # (L+1, m, d) -> ((L+1)·m, d)
    usable = min(n_components, flat.shape[0] - 1, d)
    out = np.zeros((n_states * m, n_components))
    if usable >= 1:
        step = max(1, flat.shape[0] // fit_rows)  # fit on a thinned set, project everything
        with threadpool_limits(THREADS):
            pca = PCA(n_components=usable, random_state=0).fit(flat[::step])
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


def stage_vectors(points: PointSet, indices: np.ndarray) -> np.ndarray:
    """(L + 2, k, d): the chosen points' static vectors, then their hidden states 0..L."""
    static = points.static[indices][None]  # (1, k, d)
    return np.concatenate([static, points.hidden[:, indices]], axis=0)


def nearest_by_stage(
    points: PointSet,
    indices: np.ndarray,
    unit_table: np.ndarray,
    allowed: np.ndarray | None = None,
    k: int = 5,
) -> tuple[np.ndarray, np.ndarray]:
    """(L + 2, n_chosen, k) ids and cosines of the nearest word pieces at every stage."""
    vectors = stage_vectors(points, indices)  # (S, n_chosen, d)
    n_stages, n_chosen, d = vectors.shape
    ids, cos = nearest_words(vectors.reshape(n_stages * n_chosen, d), unit_table, k, allowed)
    top = ids.shape[1]
    # (S·n_chosen, k) -> (S, n_chosen, k): one row of neighbours per stage and occurrence
    return ids.reshape(n_stages, n_chosen, top), cos.reshape(n_stages, n_chosen, top)


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
