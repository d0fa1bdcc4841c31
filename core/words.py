"""From word pieces back to words, for figures a reader can read.

WordPiece cuts rare words into pieces ("embeddings" -> "em", "##bed", "##ding", "##s"); a piece
that starts with ## continues the word before it. Byte-level BPE (GPT-2, RoBERTa, the Llama
family) marks the other end: a piece that starts a word after a space carries the space
(core.text shows it as "␣bank"), and a piece without one continues the word before it
("␣un", "believ", "able"). Punctuation is a word of its own in both, as BERT's own splitting
makes it, and so is every special piece ([CLS], [SEP], <s>, <|endoftext|>).

To show a word-level picture, as Clark et al. (2019), "What does BERT look at?", did it (and as
asked of bertviz in its issues #23 and #40):
- an attention matrix sums the keys of a word (a word receives what its pieces receive) and
  averages its queries (a word's row is the mean of its pieces' rows, so rows still sum to 1);
- a per-piece score (a share, a saliency) is summed over the word's pieces.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np

from core.text import NEWLINE_MARK, SPACE_MARK, TAB_MARK

CONTINUATION = "##"
WORDPIECE, BPE = "wordpiece", "bpe"
_WORD_START_MARKS = (SPACE_MARK, NEWLINE_MARK, TAB_MARK)
_SPECIALS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")


def piece_scheme_of(tokens: Sequence[str]) -> str:
    """A guess for pieces of unknown origin: BPE when a piece starts with a whitespace mark.

    A Trace says its scheme (Trace.piece_scheme); pass it when you have one: one BPE word
    alone ("unbelievable" -> "un", "bel", "ievable") carries no mark to guess from.
    """
    return BPE if any(t.startswith(_WORD_START_MARKS) for t in tokens) else WORDPIECE


def _is_punctuation(piece: str) -> bool:
    """Only punctuation or symbols after its whitespace marks (".", "␣(", "!?"): a word of its
    own. A piece of whitespace alone is not: it starts the word that follows it."""
    body = piece.lstrip("".join(_WORD_START_MARKS))
    return bool(body) and all(unicodedata.category(c)[0] in "PS" for c in body)


def _is_special(piece: str) -> bool:
    """[CLS]-like, <s>-like and <|endoftext|>-like pieces; a piece that is a whole tag."""
    return piece in _SPECIALS or (
        len(piece) > 2 and piece[0] in "<[" and piece[-1] in ">]" and " " not in piece
        and not piece.startswith("<0x")
    )  # fmt: skip


def word_groups(
    tokens: Sequence[str],
    scheme: str | None = None,
    special: Sequence[bool] | None = None,
) -> tuple[tuple[int, ...], ...]:
    """Piece positions grouped into words.

    wordpiece: a ## piece joins the word before it. bpe: a piece joins the word before it unless
    it starts with a whitespace mark, is punctuation, follows punctuation, or either is special;
    a piece of whitespace alone ("␣" before "un", "believ") starts the word after it.
    scheme None: guessed from the pieces (piece_scheme_of). special: (n,) the Trace's mask of
    special pieces; None: recognised by their look.
    """
    scheme = scheme or piece_scheme_of(tokens)
    is_special = [bool(s) for s in special] if special else [_is_special(t) for t in tokens]  # (n,)
    groups: list[list[int]] = []
    for position, token in enumerate(tokens):
        if scheme == WORDPIECE:
            joins = token.startswith(CONTINUATION) and len(token) > len(CONTINUATION)
        else:
            previous = tokens[position - 1] if position else ""
            after_blank = position > 0 and not previous.strip("".join(_WORD_START_MARKS))
            joins = not (
                token.startswith(_WORD_START_MARKS)
                or _is_punctuation(token)
                or _is_punctuation(previous)
                or is_special[position]
                or (position > 0 and is_special[position - 1])
            ) or (
                after_blank and not token.startswith(_WORD_START_MARKS) and not is_special[position]
            )
        if groups and joins:
            groups[-1].append(position)
        else:
            groups.append([position])
    return tuple(tuple(group) for group in groups)


def word_labels(
    tokens: Sequence[str], groups: Sequence[Sequence[int]], scheme: str | None = None
) -> list[str]:
    """Each group's pieces joined back into the word ("em", "##bed" -> "embed";
    "␣un", "believ", "able" -> "unbelievable")."""
    scheme = scheme or piece_scheme_of(tokens)
    if scheme == WORDPIECE:
        return [
            tokens[group[0]] + "".join(tokens[p][len(CONTINUATION) :] for p in group[1:])
            for group in groups
        ]
    labels = []
    for group in groups:
        word = "".join(tokens[p] for p in group)
        stripped = word.removeprefix(SPACE_MARK)
        labels.append(stripped or word)  # a lone space stays visible
    return labels


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


def last_words(
    tokens: Sequence[str],
    segments: Sequence[int],
    scheme: str | None = None,
    special: Sequence[bool] | None = None,
) -> tuple[str, ...]:
    """The last whole or partial word of each sentence in a model input, specials left out: what
    a cut input ends on ("arrow"; "embed" when "em", "##bed" were kept of "embeddings"). One
    entry per segment that holds a word, in segment order.
    """
    groups = word_groups(tokens, scheme, special)
    labels = word_labels(tokens, groups, scheme)
    is_special = [bool(s) for s in special] if special else [_is_special(t) for t in tokens]
    last: dict[int, str] = {}
    for group, label in zip(groups, labels, strict=True):
        if not any(is_special[p] for p in group):
            last[int(segments[group[0]])] = label  # later words of a segment overwrite
    return tuple(last[segment] for segment in sorted(last))
