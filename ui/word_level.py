"""The word-level switch, shared by the heatmaps, head view and explanation pages.

One sidebar switch (URL key `words`) for all four pages, so a learner who turns words on keeps
them when moving from the heatmaps to an explanation; pages that draw no word pieces show it
greyed out. WordView is a small adapter around core.words: with the switch off every figure
gets the very same arrays and token tuple as before, so nothing changes.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from core import words
from core.transformer import Trace

WORD_LEVEL_HELP = (
    "Merge word pieces into words as Clark et al. (2019) did: a word's column is the sum of its "
    "pieces' columns, its row the mean of their rows, so rows still sum to 1; a per-piece score "
    "is summed over the word. Off: every figure shows word pieces exactly as before. Used by "
    "Attention heatmaps, Head view and the two Explain pages."
)


def word_level_switch(disabled: bool = False) -> bool:
    """The sidebar's URL-bound switch: show words instead of word pieces (greyed out on pages
    that do not use it, which keeps its value for the pages that do)."""
    return bool(
        st.toggle(
            "Words, not word pieces",
            key="words",
            bind="query-params",
            disabled=disabled,
            help=WORD_LEVEL_HELP,
        )
    )


class WordView:
    """Word pieces -> words for one sentence, or an identity when the switch is off.

    scheme and special: how the tokenizer joins pieces ("wordpiece" or "bpe") and which pieces
    are specials, as the Trace says (WordView.of); None: guessed from the pieces' look, which
    one BPE word alone ("un", "believ", "able") cannot tell.
    """

    def __init__(
        self,
        tokens: tuple[str, ...] | list[str],
        on: bool,
        scheme: str | None = None,
        special: tuple[bool, ...] | None = None,
    ) -> None:
        self.on = on
        self.groups = (
            words.word_groups(tokens, scheme, special)
            if on
            else tuple((i,) for i in range(len(tokens)))
        )
        self.labels = words.word_labels(tokens, self.groups, scheme) if on else list(tokens)

    @classmethod
    def of(cls, trace: Trace, on: bool) -> WordView:
        """The view of a Trace's pieces, with its own piece scheme and special pieces."""
        return cls(trace.tokens, on, trace.piece_scheme, trace.special or None)

    def matrix(self, matrix: np.ndarray) -> np.ndarray:
        """(..., n, n) -> (..., w, w): keys summed, queries averaged (unchanged when off)."""
        return words.merge_attention(matrix, self.groups) if self.on else matrix

    def scores(self, scores: np.ndarray) -> np.ndarray:
        """(..., n) -> (..., w) summed over each word's pieces (unchanged when off)."""
        return words.merge_scores(scores, self.groups) if self.on else scores

    def segments(self, segments: np.ndarray) -> np.ndarray:
        """(n,) -> (w,) each word's sentence, from its first piece (unchanged when off)."""
        return np.asarray(segments)[[group[0] for group in self.groups]] if self.on else segments

    def special(self, special: np.ndarray) -> np.ndarray:
        """(n,) -> (w,) whether each word is a special piece, from its first piece (a special
        piece is a word of its own; unchanged when off)."""
        return np.asarray(special)[[group[0] for group in self.groups]] if self.on else special

    def tokens(self, tokens: tuple[str, ...]) -> tuple[str, ...]:
        """The labels to draw: the words when on, the very same token tuple when off."""
        return tuple(self.labels) if self.on else tokens
