"""From the text a user typed to the word pieces a model reads, in a form a person can read.

BERT reads `[CLS] sentence A [SEP]` or `[CLS] sentence A [SEP] sentence B [SEP]`, each piece an
entry of a fixed WordPiece vocabulary. RoBERTa, GPT-2 and the Llama family cut text into
byte-level BPE pieces and add their own specials (`<s> A </s></s> B </s>` for RoBERTa, nothing
for GPT-2, a begin-of-text piece for many Llamas): for them the tokenizer.json's own template
adds the specials. Padding and truncation are done here, explicitly, instead of inside the
tokenizer: a tokenizer.json may ship with fixed padding to 128 tokens (the bundled one does), and
a Trace must hold only real tokens.

A byte-level piece is stored in a private alphabet (GPT-2 writes a leading space as `Ġ`, a
newline as `Ċ`, the two bytes of `é` as `Ã©`); a SentencePiece-style piece writes a space as `▁`
and a byte it has no piece for as `<0x0A>`. `readable_piece` turns both into the text they stand
for, with whitespace made visible (`␣bank`, `↵`) and a byte that is only part of a character
kept as `<0xE2>`. WordPiece pieces are shown as they are.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import EmptyInput

if TYPE_CHECKING:
    from tokenizers import Encoding

# The server never trusts the browser's max_chars: anything longer is cut before tokenizing.
# 20,000 characters is far beyond 512 word pieces of English, so the cut never changes a
# result that the 512-position limit would not change anyway.
MAX_CHARS = 20_000
# The most word pieces one run reads, whatever a checkpoint's config allows: the (L, H, n, n)
# attention block grows with n², ~96 MB for MiniLM at 512 and ~39 GB for a 8,192-position config.
# Transformer.max_positions applies it, and every page reads that.
MAX_PIECES = 512

CLS, SEP = "[CLS]", "[SEP]"


# Whitespace made visible in a readable piece: a leading space would vanish on an axis label.
SPACE_MARK, NEWLINE_MARK, TAB_MARK = "␣", "↵", "⇥"
_VISIBLE = {" ": SPACE_MARK, "\n": NEWLINE_MARK, "\t": TAB_MARK}
WORDPIECE, BYTE_LEVEL, METASPACE = "wordpiece", "byte_level", "metaspace"  # piece alphabets


@dataclass(frozen=True)
class Encoded:
    """One model input: word pieces with their ids and sentence (segment) ids."""

    tokens: tuple[str, ...]  # n readable word pieces, specials ([CLS], <s>, …) included
    input_ids: tuple[int, ...]  # n vocabulary rows
    segments: tuple[int, ...]  # n: 0 for [CLS] + sentence A + [SEP], 1 for sentence B + [SEP]
    truncated: bool  # True when pieces were dropped to fit the model's positions
    n_pieces: int  # word pieces the full text(s) produced, before truncation (specials included)
    special: tuple[bool, ...] = ()  # n: True for a special piece ([CLS], </s>, <|endoftext|>, …)


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


# ---- readable pieces ----------------------------------------------------------------------------
def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character -> byte: printable bytes stand for themselves, the
    others (space, control bytes, …) are moved to the characters from U+0100 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {byte: chr(byte) for byte in printable}
    moved = (byte for byte in range(256) if byte not in chars)
    chars.update({byte: chr(0x100 + i) for i, byte in enumerate(moved)})
    return {char: byte for byte, char in chars.items()}


_BYTE_OF = _byte_alphabet()


def _text_of_bytes(data: bytes) -> str:
    """UTF-8 text; a byte that is only part of a character here stays visible as <0xNN>."""
    out: list[str] = []
    while data:
        try:
            out.append(data.decode("utf-8"))
            break
        except UnicodeDecodeError as err:
            out.append(data[: err.start].decode("utf-8"))
            out.extend(f"<0x{byte:02X}>" for byte in data[err.start : err.end])
            data = data[err.end :]
    return "".join(out)


def _visible(text: str) -> str:
    """Spaces, newlines and tabs as marks; other control characters as <0xNN>."""
    return "".join(
        _VISIBLE.get(char)
        or (f"<0x{ord(char):02X}>" if ord(char) < 0x20 or ord(char) == 0x7F else char)
        for char in text
    )


def readable_piece(piece: str, alphabet: str) -> str:
    """A vocabulary piece as a person reads it: 'Ġbank' and '▁bank' -> '␣bank', 'Ċ' -> '↵',
    'Ã©' -> 'é', '<0x0A>' -> '↵', half a character -> '<0xE2>'. WordPiece pieces are unchanged."""
    if alphabet == BYTE_LEVEL:
        data = b"".join(
            bytes([_BYTE_OF[char]]) if char in _BYTE_OF else char.encode("utf-8") for char in piece
        )
        return _visible(_text_of_bytes(data))
    if alphabet == METASPACE:
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            try:  # a byte-fallback piece: one byte of UTF-8
                return _visible(_text_of_bytes(bytes([int(piece[3:5], 16)])))
            except ValueError:
                pass
        return _visible(piece.replace("▁", " "))
    return piece


def _lowercases(normalizer: dict | None) -> bool:
    """Whether a tokenizer.json's normalizer lowercases text (an uncased model's does)."""
    if not normalizer:
        return False
    kind = normalizer.get("type")
    if kind == "Lowercase":
        return True
    if kind == "BertNormalizer":
        return bool(normalizer.get("lowercase", True))
    if kind == "Sequence":
        return any(_lowercases(part) for part in normalizer.get("normalizers", []))
    return False


def _alphabet(config: dict) -> str:
    """Which alphabet a tokenizer.json writes its pieces in, from its model and decoder."""
    model = config.get("model") or {}
    if model.get("type") == "WordPiece":
        return WORDPIECE
    text = json.dumps([config.get("decoder"), config.get("pre_tokenizer")])
    if '"ByteLevel"' in text:
        return BYTE_LEVEL
    if '"Metaspace"' in text or "▁" in text or model.get("byte_fallback"):
        return METASPACE
    return WORDPIECE  # pieces of some other kind are shown as they are


# ---- the tokenizer ------------------------------------------------------------------------------
class PieceTokenizer:
    """Thread-safe wrapper around a `tokenizers` tokenizer with no padding or truncation.

    wordpiece_specials: the encoder adds [CLS] and [SEP] itself (BERT, DistilBERT); otherwise
    the tokenizer.json's own template adds the family's specials.
    """

    def __init__(self, model_dir: Path, lowercase: bool = True, wordpiece_specials: bool = True):
        from tokenizers import BertWordPieceTokenizer, Tokenizer

        tokenizer_json = model_dir / "tokenizer.json"
        if tokenizer_json.is_file():
            self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        elif wordpiece_specials:
            self._tokenizer = BertWordPieceTokenizer(
                str(model_dir / "vocab.txt"), lowercase=lowercase
            )
        else:
            raise ValueError("the model folder has no tokenizer.json")
        # Settings are changed once, here, and never again: changing them while another thread
        # encodes is what raises "Already borrowed" (tokenizers#537). The lock below makes the
        # shared object safe even if a future version of the library is not reentrant.
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._lock = threading.Lock()
        self.wordpiece_specials = wordpiece_specials
        config = json.loads(self._tokenizer.to_str())
        self.alphabet = _alphabet(config)
        self.lowercases = _lowercases(config.get("normalizer"))  # "Bank" is cut as "bank"
        # word pieces are merged into words by "##" (WordPiece) or by a leading space (BPE)
        self.piece_scheme = "wordpiece" if self.alphabet == WORDPIECE else "bpe"
        added_tokens = self._tokenizer.get_added_tokens_decoder()  # id -> AddedToken
        # The unknown piece ([UNK], <unk>) stands for text the vocabulary lacks: a piece of the
        # text, not a special, whatever the tokenizer.json says (a deletion test may remove it,
        # a page's words keep it).
        unknown = (config.get("model") or {}).get("unk_token")
        unknown_id = self._tokenizer.token_to_id(unknown) if isinstance(unknown, str) else None
        self.special_ids = frozenset(
            i for i, added in added_tokens.items() if added.special and i != unknown_id
        )
        # an added piece is stored as plain text, not in the byte-level alphabet
        self._added_ids = frozenset(added_tokens)
        if wordpiece_specials:
            self.cls_id = self._required_id(CLS)
            self.sep_id = self._required_id(SEP)
            self.special_ids |= {self.cls_id, self.sep_id}
            self.n_specials = (2, 3)  # one sentence, a pair
        else:
            self.n_specials = (
                self._tokenizer.num_special_tokens_to_add(False),
                self._tokenizer.num_special_tokens_to_add(True),
            )

    def _required_id(self, token: str) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"the vocabulary has no {token} token")
        return token_id

    def readable(self, piece: str, token_id: int | None = None) -> str:
        """The piece as shown: specials as they are, added pieces with visible whitespace,
        vocabulary pieces in readable text."""
        if token_id is not None and token_id in self.special_ids:
            return piece
        if token_id is not None and token_id in self._added_ids:
            return _visible(piece)
        return readable_piece(piece, self.alphabet)

    def _encoding(self, text: str) -> Encoding:
        with self._lock:
            return self._tokenizer.encode(text, add_special_tokens=False)

    def pieces(self, text: str) -> tuple[list[str], list[int]]:
        """Readable word pieces and ids of one text, without special tokens."""
        encoding = self._encoding(text)
        ids = list(encoding.ids)
        return [self.readable(t, i) for t, i in zip(encoding.tokens, ids, strict=True)], ids

    def token_of(self, token_id: int) -> str:
        """The readable piece of a vocabulary row ("[UNK]" for a row the tokenizer lacks)."""
        piece = self._tokenizer.id_to_token(token_id)
        return "[UNK]" if piece is None else self.readable(piece, token_id)

    def id_of(self, token: str) -> int | None:
        """The vocabulary row of a piece as the vocabulary writes it ("[PAD]", "Ġbank")."""
        return self._tokenizer.token_to_id(token)

    def encode(self, text: str, pair: str | None, max_positions: int) -> Encoded:
        """The model's input for A (and B), cut to max_positions; EmptyInput if A holds no text.

        BERT: [CLS] A [SEP] (B [SEP]); the other families: their tokenizer's own template.
        """
        text = cap_text(text)
        if not text.strip():
            raise EmptyInput("Type a sentence: the text is empty.")
        first = self._encoding(text)
        if not first.ids:
            raise EmptyInput(
                "The text holds no readable characters (only control or format characters)."
            )
        pair = cap_text(pair)
        second = self._encoding(pair) if pair.strip() else None
        if second is not None and not second.ids:
            second = None
        n_specials = self.n_specials[second is not None]
        ids_a, ids_b = list(first.ids), list(second.ids) if second is not None else []
        n_pieces = len(ids_a) + len(ids_b) + n_specials
        keep_a, keep_b = truncate_longest_first(ids_a, ids_b, max_positions - n_specials)
        if self.wordpiece_specials:
            return self._bert_input(first, second, keep_a, keep_b, n_pieces, max_positions)

        first.truncate(keep_a)
        if second is not None:
            second.truncate(keep_b)
        with self._lock:
            full = self._tokenizer.post_process(first, second, add_special_tokens=True)
        input_ids = tuple(full.ids)
        tokens = tuple(self.readable(t, i) for t, i in zip(full.tokens, input_ids, strict=True))
        special = tuple(
            bool(added) or token_id in self.special_ids
            for added, token_id in zip(full.special_tokens_mask, input_ids, strict=True)
        )
        # A special piece belongs to the sentence before it (the first one at the start).
        segments, current = [], 0
        for sequence in full.sequence_ids:
            current = sequence if sequence is not None else current
            segments.append(current)
        return Encoded(
            tokens, input_ids, tuple(segments), n_pieces > max_positions, n_pieces, special
        )

    @property
    def vocab_size(self) -> int:
        """Rows the tokenizer can write, added pieces included."""
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    def plain_ids(self) -> list[int]:
        """Every vocabulary row that is neither a special nor an added piece: what a random
        sequence of ordinary word pieces draws from."""
        excluded = self.special_ids | self._added_ids
        return [token_id for token_id in range(self.vocab_size) if token_id not in excluded]

    def template_ids(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The specials the family's template puts before and after any one text: ([CLS],),
        ([SEP],) for BERT; (<s>,), (</s>,) for RoBERTa; (), () for GPT-2."""
        _, pieces = self.pieces("the")
        if not pieces:
            return (), ()
        ids = list(self.encode("the", None, MAX_PIECES).input_ids)
        for before in range(len(ids) - len(pieces) + 1):
            if ids[before : before + len(pieces)] == pieces:
                return tuple(ids[:before]), tuple(ids[before + len(pieces) :])
        return (), ()

    def encode_ids(self, input_ids: tuple[int, ...] | list[int], max_positions: int) -> Encoded:
        """The model's input for ids already chosen (a probe of random pieces, say): read as they
        are, no specials added, one sentence (segment 0). The ids must be rows of the vocabulary
        and fit max_positions: an id sequence is built by code, so a wrong one is a bug to raise."""
        ids = tuple(int(token_id) for token_id in input_ids)
        if not ids:
            raise EmptyInput("No word pieces to run.")
        if len(ids) > max_positions:
            raise ValueError(f"{len(ids)} pieces given, the model reads at most {max_positions}")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise ValueError(f"every id must be a vocabulary row, 0 … {self.vocab_size - 1}")
        return Encoded(
            tokens=tuple(self.token_of(token_id) for token_id in ids),
            input_ids=ids,
            segments=(0,) * len(ids),
            truncated=False,
            n_pieces=len(ids),
            special=tuple(token_id in self.special_ids for token_id in ids),
        )

    def _bert_input(
        self,
        first: Encoding,
        second: Encoding | None,
        keep_a: int,
        keep_b: int,
        n_pieces: int,
        max_positions: int,
    ) -> Encoded:
        """[CLS] A [SEP] (B [SEP]) with BERT's segment ids."""
        tokens_a = [self.readable(t, i) for t, i in zip(first.tokens, first.ids, strict=True)]
        tokens = [CLS, *tokens_a[:keep_a], SEP]
        input_ids = [self.cls_id, *first.ids[:keep_a], self.sep_id]
        segments = [0] * len(tokens)
        if second is not None:
            tokens_b = [self.readable(t, i) for t, i in zip(second.tokens, second.ids, strict=True)]
            tokens += [*tokens_b[:keep_b], SEP]
            input_ids += [*second.ids[:keep_b], self.sep_id]
            segments += [1] * (keep_b + 1)
        special = tuple(token_id in self.special_ids for token_id in input_ids)
        return Encoded(
            tuple(tokens),
            tuple(input_ids),
            tuple(segments),
            n_pieces > max_positions,
            n_pieces,
            special,
        )


WordPieceTokenizer = PieceTokenizer  # the name the BERT-only code knew
