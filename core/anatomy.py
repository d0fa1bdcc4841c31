"""The anatomy of one loaded model: what its layers, positions and tokenizer actually are.

Every page that states an architecture fact (a formula, a caption, "its positions come from ...")
reads it from here, so the sentence is true of the model on screen, whichever of the five
families it is. The wiring comes from core/weights.py's Architecture and ModelDims (read from
config.json); the special pieces come from what the tokenizer really adds to a probe pair, since
the same family can ship tokenizers that differ (a Llama tokenizer may or may not add <s>).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from core.transformer import Transformer
from core.weights import FAMILY_NAMES, Architecture, ModelDims

# A probe pair of plain words: what the template adds around them is the family's framing.
_PROBE = ("a", "b")
TEXT_A, TEXT_B = "A", "B"  # the slots of the probe's own pieces in a framing

ACTIVATION_NAMES = {
    "gelu": "GELU",
    "gelu_new": "GELU",  # GPT-2's tanh approximation of GELU
    "gelu_pytorch_tanh": "GELU",
    "relu": "ReLU",
    "silu": "SiLU",
}


@dataclass(frozen=True)
class Anatomy:
    """One model's architecture, as the pages state it. Shapes and sizes stay in ModelDims."""

    arch: Architecture
    dims: ModelDims
    single: tuple[str, ...]  # the framing of one text: ("[CLS]", "A", "[SEP]"), ("A",), ...
    pair: tuple[str, ...]  # of a pair: ("<s>", "A", "</s>", "</s>", "B", "</s>"), ...
    ffn_parameters: int  # trained numbers of one layer's feed-forward, gate included
    attention_parameters: int  # of one layer's attention: Q, K, V (grouped) and W_O
    lowercases: bool  # the tokenizer lowercases the text before cutting it into pieces
    # how the model was trained to make one vector of a sentence ("mean", "cls", "max"), as its
    # sentence-transformers files say; None for a model trained on something else
    sentence_pooling: str | None = None

    # ---- the layer ---------------------------------------------------------------------------
    @property
    def family_name(self) -> str:
        return FAMILY_NAMES[self.arch.family]

    @property
    def is_decoder(self) -> bool:
        return self.arch.is_decoder

    @property
    def kind(self) -> str:
        """ "encoder" (reads both ways) or "decoder" (causal by nature)."""
        return self.arch.kind

    @property
    def pre_norm(self) -> bool:
        """True: each sublayer reads a normalised copy, x + f(Norm(x)); False: Norm(x + f(x))."""
        return self.arch.norm_position == "pre"

    @property
    def norm_name(self) -> str:
        """ "LayerNorm" (mean and variance) or "RMSNorm" (root mean square only)."""
        return "RMSNorm" if self.arch.norm_kind == "rms" else "LayerNorm"

    @property
    def activation_name(self) -> str:
        """The feed-forward's nonlinearity as papers name it: GELU, SiLU, ReLU."""
        return ACTIVATION_NAMES.get(self.dims.activation, self.dims.activation)

    @property
    def gated(self) -> bool:
        """The feed-forward multiplies act(W_gate h) into W_up h (SwiGLU) instead of act(W_1 h)."""
        return self.arch.gated_ffn

    @property
    def grouped_heads(self) -> bool:
        """Fewer key/value heads than query heads: each key/value head serves a group."""
        return self.dims.n_kv_heads < self.dims.n_heads

    @property
    def d_q(self) -> int:
        """Width of all query heads together (d_model unless the config sets head_dim)."""
        return self.dims.n_heads * self.dims.d_head

    @property
    def d_kv(self) -> int:
        """Width of all key (or value) heads together: narrower than d_q when grouped."""
        return self.dims.n_kv_heads * self.dims.d_head

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices of the feed-forward: 2 (W_1, W_2), 3 when gated (gate, up, down)."""
        return 3 if self.gated else 2

    @property
    def tied_head(self) -> bool:
        """The next-piece head is the word-piece table itself (only models with a head)."""
        return self.arch.has_head and self.arch.tied_head

    # ---- the input ---------------------------------------------------------------------------
    @property
    def positions(self) -> str:
        """How positions enter: "learned" (a table added to the input), "offset" (the same, its
        row for position p is p + offset: RoBERTa), "rotary" (q and k turned inside attention)."""
        if self.arch.positions == "learned" and self.arch.position_offset:
            return "offset"
        return self.arch.positions

    @property
    def position_table(self) -> bool:
        """A position vector is added to each word-piece vector before the first layer."""
        return self.arch.positions == "learned"

    @property
    def position_table_rows(self) -> int:
        """Rows of the learned position table (0 for rotary): the positions a run can use plus
        the rows before the offset, which no position reads (RoBERTa's first row for a real
        piece comes after its padding index)."""
        if not self.position_table:
            return 0
        return self.dims.max_positions + self.arch.position_offset

    @property
    def segment_rows(self) -> int:
        """Rows of the segment table: 2 (first or second sentence), 1 (added to every piece,
        telling nothing apart), 0 (none)."""
        return self.dims.type_vocab_size

    @property
    def segments_tell_sentences_apart(self) -> bool:
        return self.segment_rows > 1

    @property
    def embedding_norm(self) -> bool:
        """A norm right after the embedding sum (the encoders)."""
        return self.arch.embedding_norm

    @property
    def final_norm(self) -> bool:
        """A norm after the last layer, before the head (the pre-norm decoders)."""
        return self.arch.final_norm

    # ---- special pieces ----------------------------------------------------------------------
    @property
    def special_pieces(self) -> tuple[str, ...]:
        """The specials the tokenizer adds to a pair, each once, in order of appearance."""
        slots = (TEXT_A, TEXT_B)
        return tuple(dict.fromkeys(piece for piece in self.pair if piece not in slots))

    @property
    def first_special(self) -> str | None:
        """The special before the text ([CLS], <s>), or None when the text starts at once."""
        return self.single[0] if self.single and self.single[0] != TEXT_A else None

    @property
    def closing_specials(self) -> tuple[str, ...]:
        """The specials after one text ([SEP], </s>); () for none."""
        if TEXT_A not in self.single:
            return ()
        return self.single[self.single.index(TEXT_A) + 1 :]

    @property
    def adds_specials(self) -> bool:
        return bool(self.special_pieces)

    # ---- what it was trained for -------------------------------------------------------------
    @property
    def trained_mean_pooled(self) -> bool:
        """True for a sentence encoder trained on the mean of its top layer's vectors (MiniLM):
        the cosine of two such means is an answer it learned to give."""
        return self.sentence_pooling == "mean"


# sentence-transformers' Pooling config: which flag names which way of pooling
_POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
}


def sentence_pooling(model_dir: Path) -> str | None:
    """The pooling a sentence-transformers model was trained with, from modules.json and its
    Pooling module's config.json; None when the folder describes no such module (a model
    trained on masked or next pieces) or the files cannot be read."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        pooling = next(m for m in modules if str(m.get("type", "")).endswith(".Pooling"))
        config = json.loads((model_dir / str(pooling["path"]) / "config.json").read_text())
    except (OSError, ValueError, TypeError, KeyError, AttributeError, StopIteration):
        return None
    modes = [mode for flag, mode in _POOLING_MODES.items() if config.get(flag) is True]
    return modes[0] if len(modes) == 1 else None


def _framing(tokens: tuple[str, ...], special: tuple[bool, ...], segments: tuple[int, ...]):
    """Pieces -> their framing: each special as it is, each run of text pieces as A or B."""
    framing: list[str] = []
    for token, is_special, segment in zip(tokens, special, segments, strict=True):
        slot = token if is_special else (TEXT_B if segment else TEXT_A)
        if is_special or not framing or framing[-1] != slot:
            framing.append(slot)
    return tuple(framing)


def parameter_count(*tensors: torch.Tensor | None) -> int:
    """Trained numbers in these tensors (None: a bias the model does not have)."""
    return sum(int(t.numel()) for t in tensors if t is not None)


def describe(model: Transformer) -> Anatomy:
    """The model's anatomy: its Architecture and sizes, and the framing its tokenizer adds."""
    one = model.encode(_PROBE[0])
    two = model.encode(*_PROBE)
    layer = model.layers[0]
    att = layer.attention
    projections = (att.query, att.key, att.value, att.output)
    ffn = [layer.ffn_in, layer.ffn_out] + ([layer.ffn_gate] if layer.ffn_gate is not None else [])
    return Anatomy(
        arch=model.arch,
        dims=model.dims,
        single=_framing(one.tokens, one.special, one.segments),
        pair=_framing(two.tokens, two.special, two.segments),
        ffn_parameters=sum(parameter_count(p.weight, p.bias) for p in ffn),
        attention_parameters=sum(parameter_count(p.weight, p.bias) for p in projections),
        lowercases=model.tokenizer.lowercases,
        sentence_pooling=sentence_pooling(Path(model.model_dir)),
    )
