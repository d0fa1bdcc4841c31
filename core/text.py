"""From the text a user typed to the word pieces BERT reads.

BERT reads `[CLS] sentence A [SEP]` or `[CLS] sentence A [SEP] sentence B [SEP]`, each piece an
entry of a fixed WordPiece vocabulary. Padding and truncation are done here, explicitly, instead
of inside the tokenizer: a tokenizer.json may ship with fixed padding to 128 tokens (the bundled
one does), and a Trace must hold only real tokens.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from core.errors import EmptyInput

# The server never trusts the browser's max_chars: anything longer is cut before tokenizing.
# 20,000 characters is far beyond 512 word pieces of English, so the cut never changes a
# result that the 512-position limit would not change anyway.
MAX_CHARS = 20_000
# The most word pieces one run reads, whatever a checkpoint's config allows: the (L, H, n, n)
# attention block grows with n², ~96 MB for MiniLM at 512 and ~39 GB for a 8,192-position config.
# BertEncoder.max_positions applies it, and every page reads that.
MAX_PIECES = 512

CLS, SEP = "[CLS]", "[SEP]"


@dataclass(frozen=True)
class Encoded:
    """One model input: word pieces with their ids and sentence (segment) ids."""

    tokens: tuple[str, ...]  # n word pieces, [CLS]/[SEP] included
    input_ids: tuple[int, ...]  # n vocabulary rows
    segments: tuple[int, ...]  # n: 0 for [CLS] + sentence A + [SEP], 1 for sentence B + [SEP]
    truncated: bool  # True when pieces were dropped to fit the model's positions
    n_pieces: int  # word pieces the full text(s) produced, before truncation (specials included)


def cap_text(text: str | None) -> str:
    """The text as the server accepts it: never None, at most MAX_CHARS characters."""
    return (text or "")[:MAX_CHARS]


def truncate_longest_first(first: list[int], second: list[int], budget: int) -> tuple[int, int]:
    """How many pieces of each sentence to keep so that both fit in `budget`.

    The rule Hugging Face calls "longest_first": the shorter sentence (the first, on a tie)
    keeps up to half of the budget, the longer one gets the rest; pieces come off the end.
    Never fails: with budget 0 both become empty.
    """
    budget = max(budget, 0)
    if len(first) + len(second) <= budget:
        return len(first), len(second)
    first_is_short = len(first) <= len(second)
    short, long = (first, second) if first_is_short else (second, first)
    keep_short = min(len(short), budget // 2)
    keep_long = min(len(long), budget - keep_short)
    return (keep_short, keep_long) if first_is_short else (keep_long, keep_short)


class WordPieceTokenizer:
    """Thread-safe wrapper around a `tokenizers` WordPiece tokenizer with no padding/truncation."""

    def __init__(self, model_dir: Path, lowercase: bool = True) -> None:
        from tokenizers import BertWordPieceTokenizer, Tokenizer

        tokenizer_json = model_dir / "tokenizer.json"
        if tokenizer_json.is_file():
            self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        else:
            self._tokenizer = BertWordPieceTokenizer(
                str(model_dir / "vocab.txt"), lowercase=lowercase
            )
        # Settings are changed once, here, and never again: changing them while another thread
        # encodes is what raises "Already borrowed" (tokenizers#537). The lock below makes the
        # shared object safe even if a future version of the library is not reentrant.
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._lock = threading.Lock()
        self.cls_id = self._required_id(CLS)
        self.sep_id = self._required_id(SEP)

    def _required_id(self, token: str) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"the vocabulary has no {token} token")
        return token_id

    def pieces(self, text: str) -> tuple[list[str], list[int]]:
        """Word pieces and ids of one text, without special tokens."""
        with self._lock:
            encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return list(encoding.tokens), list(encoding.ids)

    def token_of(self, token_id: int) -> str:
        return self._tokenizer.id_to_token(token_id) or "[UNK]"

    def id_of(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def encode(self, text: str, pair: str | None, max_positions: int) -> Encoded:
        """[CLS] A [SEP] (B [SEP]) cut to max_positions; EmptyInput if A holds no text."""
        text = cap_text(text)
        if not text.strip():
            raise EmptyInput("Type a sentence: the text is empty.")
        tokens_a, ids_a = self.pieces(text)
        if not ids_a:
            raise EmptyInput(
                "The text holds no readable characters (only control or format characters)."
            )
        pair = cap_text(pair)
        tokens_b, ids_b = self.pieces(pair) if pair.strip() else ([], [])
        n_specials = 3 if ids_b else 2
        n_pieces = len(ids_a) + len(ids_b) + n_specials
        keep_a, keep_b = truncate_longest_first(ids_a, ids_b, max_positions - n_specials)

        tokens = [CLS, *tokens_a[:keep_a], SEP]
        input_ids = [self.cls_id, *ids_a[:keep_a], self.sep_id]
        segments = [0] * len(tokens)
        if ids_b:
            tokens += [*tokens_b[:keep_b], SEP]
            input_ids += [*ids_b[:keep_b], self.sep_id]
            segments += [1] * (keep_b + 1)
        return Encoded(
            tuple(tokens), tuple(input_ids), tuple(segments), n_pieces > max_positions, n_pieces
        )
