"""From word pieces back to words, for figures a reader can read.

WordPiece cuts rare words into pieces ("embeddings" -> "em", "##bed", "##ding", "##s"); a piece
that starts with ## continues the word before it. To show a word-level picture (the convention
of Clark et al., 2019, "What does BERT look at?", which bertviz follows: bertviz #23/#40):
- an attention matrix sums the keys of a word (a word receives what its pieces receive) and
  averages its queries (a word's row is the mean of its pieces' rows, so rows still sum to 1);
- a per-piece score (a share, a saliency) is summed over the word's pieces.
[CLS] and [SEP] are words of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CONTINUATION = "##"


def word_groups(tokens: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """Piece positions grouped into words: a ## piece joins the word before it."""
    groups: list[list[int]] = []
    for position, token in enumerate(tokens):
        if groups and token.startswith(CONTINUATION) and len(token) > len(CONTINUATION):
            groups[-1].append(position)
        else:
            groups.append([position])
    return tuple(tuple(group) for group in groups)


def word_labels(tokens: Sequence[str], groups: Sequence[Sequence[int]]) -> list[str]:
    """Each group's pieces joined back into the word ("em", "##bed" -> "embed")."""
    return [
        tokens[group[0]] + "".join(tokens[p][len(CONTINUATION) :] for p in group[1:])
        for group in groups
    ]


def word_starts(groups: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """(w,) the first piece of each word; the groups must be consecutive runs covering 0..n-1.

    word_groups always gives such runs, which lets a merge add neighbouring columns
    (np.add.reduceat) instead of multiplying by a (w, n) 0/1 matrix: at 512 pieces and 72 heads
    that product is ~100x the work.
    """
    if [p for group in groups for p in group] != list(range(n)):
        raise ValueError("word groups must be consecutive runs of positions 0..n-1")
    return np.array([group[0] for group in groups], dtype=np.intp)


def merge_attention(matrix: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., n, n) -> (..., w, w): keys summed within a word, queries averaged."""
    starts = word_starts(groups, matrix.shape[-1])  # (w,)
    sizes = np.diff(np.append(starts, matrix.shape[-1]))  # (w,) pieces per word
    key_sums = np.add.reduceat(matrix, starts, axis=-1)  # (..., n, n) -> (..., n, w)
    query_sums = np.add.reduceat(key_sums, starts, axis=-2)  # (..., n, w) -> (..., w, w)
    return query_sums / sizes[:, None].astype(matrix.dtype)  # a word's row: its pieces' mean


def merge_scores(scores: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., n) -> (..., w): per-piece scores summed within each word."""
    return np.add.reduceat(scores, word_starts(groups, scores.shape[-1]), axis=-1)
