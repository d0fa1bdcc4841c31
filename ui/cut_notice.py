"""The one wording of a cut input: how many pieces, how many kept, and the word it now ends on.

A count alone ("only the first 512 are shown") leaves the learner to find where their text was
cut; the last word kept says it at once. That word is the visitor's text: escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.words import last_words
from ui.escape import literal

WORD_CHARS = 40  # a word longer than this (a pasted run of letters) is shortened with "…"


def ends_on(
    tokens: Sequence[str],
    segments: Sequence[int] | None = None,
    scheme: str | None = None,
    special: Sequence[bool] | None = None,
) -> str:
    """'it now ends on “arrow”' (one sentence), or 'the first sentence now ends on “a”, the
    second on “b”' (a pair); "" when no word was kept. Markdown, escaped."""
    words = last_words(tokens, segments or [0] * len(tokens), scheme, special)
    quoted = [f"“{literal(word, WORD_CHARS)}”" for word in words]
    if len(quoted) == 2:
        return f"the first sentence now ends on {quoted[0]}, the second on {quoted[1]}"
    return f"it now ends on {quoted[0]}" if quoted else ""


def notice(n_pieces: int, n_kept: int, reader: str, limit: int, end: str) -> str:
    """'The input has 3,002 word pieces; MiniLM reads at most 512, so only the first 512 are
    shown: it now ends on “attention”.' reader: who reads at most `limit` pieces."""
    return (
        f"The input has {n_pieces:,} word pieces; {reader} reads at most {limit:,}, so only the "
        f"first {n_kept:,} are shown" + (f": {end}." if end else ".")
    )
