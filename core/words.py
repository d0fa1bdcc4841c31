"""From word pieces back to words, for figures a reader can read.

WordPiece cuts rare words into pieces ("embeddings" -> "em", "##bed", "##ding", "##s"); a piece
that starts with ## continues the word before it. To show a word-level picture (bertviz's
convention, bertviz #23/#40):
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


def membership(groups: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """(w, n) 0/1: row g has a 1 at each piece of word g."""
    member = np.zeros((len(groups), n))
    for g, group in enumerate(groups):
        member[g, list(group)] = 1.0
    return member


def merge_attention(matrix: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., n, n) -> (..., w, w): keys summed within a word, queries averaged."""
    member = membership(groups, matrix.shape[-1])  # (w, n)
    key_sums = matrix @ member.T  # (..., n, n) @ (n, w) -> (..., n, w)
    query_means = member / member.sum(axis=1, keepdims=True)  # (w, n), rows sum to 1
    return query_means @ key_sums  # (w, n) @ (..., n, w) -> (..., w, w)


def merge_scores(scores: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., n) -> (..., w): per-piece scores summed within each word."""
    return scores @ membership(groups, scores.shape[-1]).T  # (..., n) @ (n, w)
