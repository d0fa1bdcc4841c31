"""Tiny random checkpoints of every family, built with transformers and saved in the hub layout.

Each is a seeded, randomly initialised model of a few layers with its own tiny tokenizer.json
(WordPiece for BERT and DistilBERT, byte-level BPE for RoBERTa and GPT-2, SentencePiece-style BPE
with byte fallback, or byte-level BPE as SmolLM2 has, for the Llama family), written by
save_pretrained into a folder the app's loader reads like a hub snapshot. Every parameter is
drawn at random (norm scales near 1, shifts, biases), so a swapped weight, a dropped term or a
misplaced norm changes the output. Nothing is downloaded.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

CORPUS = [
    "the river bank flows past the old mill, and money grows in the bank.",
    "Time flies like an arrow; fruit flies like a banana!",
    "She sat on the bank of the river. The bank raised its rates again.",
    "attention is all you need: queries, keys and values.",
    "unbelievable results (really) — the model predicts the next word piece.",
]
FAMILIES = ("bert", "roberta", "distilbert", "gpt2", "llama")


# ---- tokenizers ---------------------------------------------------------------------------------
def wordpiece_tokenizer_json(path: Path) -> int:
    """A BERT WordPiece tokenizer.json trained on CORPUS; returns its vocabulary size."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(lowercase=True)
    tokenizer.train_from_iterator(
        CORPUS * 4,
        vocab_size=120,
        min_frequency=1,
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
    )
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return tokenizer.get_vocab_size()


def byte_level_tokenizer_json(
    path: Path, specials: list[str], roberta: bool = False, extra_pieces: tuple[str, ...] = ()
) -> int:
    """A byte-level BPE tokenizer.json (GPT-2's alphabet) trained on CORPUS; its vocab size.

    roberta: <s> A </s></s> B </s> added by the template, as roberta-base's file does.
    extra_pieces: added tokens, each one piece wherever a text holds it (a hostile tokenizer's
    HTML and Markdown piece, tests/test_browser_hostile_tokenizer.py).
    """
    from tokenizers import ByteLevelBPETokenizer, processors

    tokenizer = ByteLevelBPETokenizer(add_prefix_space=False)
    tokenizer.train_from_iterator(
        CORPUS * 4, vocab_size=330, min_frequency=1, special_tokens=specials
    )
    if roberta:
        tokenizer._tokenizer.post_processor = processors.RobertaProcessing(
            ("</s>", specials.index("</s>")), ("<s>", specials.index("<s>"))
        )
    else:
        tokenizer._tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_tokens(list(extra_pieces))
    tokenizer.save(str(path / "tokenizer.json"))
    return tokenizer.get_vocab_size()


def sentencepiece_tokenizer_json(path: Path) -> int:
    """A Llama-2-style tokenizer.json: '▁' for spaces, BPE with byte fallback (<0x0A>), and
    <s> before the text (the template); returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = ["<unk>", "<s>", "</s>"]
    # a space becomes ▁ and starts a piece; the text gets one in front
    metaspace = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    draft = Tokenizer(models.BPE(unk_token="<unk>"))
    draft.pre_tokenizer = metaspace
    draft.train_from_iterator(
        CORPUS * 4,
        trainers.BpeTrainer(vocab_size=120, min_frequency=1, special_tokens=specials),
    )
    trained = json.loads(draft.to_str())["model"]
    vocab = dict(trained["vocab"])
    for byte in range(256):  # the byte pieces a character without a piece falls back to
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True))
    tokenizer.add_special_tokens(specials)
    tokenizer.pre_tokenizer = metaspace
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )  # fmt: skip
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", vocab["<s>"])]
    )
    tokenizer.save(str(path / "tokenizer.json"))
    return tokenizer.get_vocab_size()


# ---- models -------------------------------------------------------------------------------------
def randomise(model: torch.nn.Module, seed: int) -> None:
    """Every parameter at random: weights ~ N(0, (2/√fan_in)²), norm scales ~ 1 + N(0, 0.3²),
    biases and shifts ~ N(0, 0.2²). Attention then has peaked rows and every term matters."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() >= 2:
                fan_in = parameter.shape[0] if "c_" in name else parameter.shape[-1]  # Conv1D
                parameter.copy_(noise * 2.0 / math.sqrt(fan_in))
            elif "norm" in name.lower() or "ln_" in name:
                parameter.copy_(1.0 + 0.3 * noise if name.endswith("weight") else 0.2 * noise)
            else:
                parameter.copy_(0.2 * noise)


def _config_and_model(family: str, vocab_size: int, sizes: dict) -> tuple[object, torch.nn.Module]:
    import transformers as tf

    d, heads, layers, ff, positions = (
        sizes["d_model"], sizes["n_heads"], sizes["n_layers"], sizes["d_ff"], sizes["max_positions"]
    )  # fmt: skip
    if family == "bert":
        config = tf.BertConfig(
            vocab_size=vocab_size, hidden_size=d, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=ff, max_position_embeddings=positions,
            pad_token_id=0,
        )  # fmt: skip
        return config, tf.BertModel(config, add_pooling_layer=False)
    if family == "roberta":
        config = tf.RobertaConfig(
            vocab_size=vocab_size, hidden_size=d, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=ff, type_vocab_size=1,
            max_position_embeddings=positions + 2, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        )  # fmt: skip
        return config, tf.RobertaModel(config, add_pooling_layer=False)
    if family == "distilbert":
        config = tf.DistilBertConfig(
            vocab_size=vocab_size, dim=d, n_layers=layers, n_heads=heads, hidden_dim=ff,
            max_position_embeddings=positions, pad_token_id=0,
        )  # fmt: skip
        return config, tf.DistilBertModel(config)
    if family == "gpt2":
        config = tf.GPT2Config(
            vocab_size=vocab_size, n_embd=d, n_layer=layers, n_head=heads, n_inner=ff,
            n_positions=positions, bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
        return config, tf.GPT2LMHeadModel(config)
    config = tf.LlamaConfig(
        vocab_size=vocab_size, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=sizes.get("n_kv_heads", heads), intermediate_size=ff,
        max_position_embeddings=positions, tie_word_embeddings=sizes.get("tied", True),
        rope_theta=sizes.get("rope_theta", 10_000.0), bos_token_id=1, eos_token_id=2,
        pad_token_id=None, head_dim=sizes.get("d_head") or d // heads,
    )  # fmt: skip
    return config, tf.LlamaForCausalLM(config)


def write_tiny_family(
    path: Path,
    family: str,
    *,
    seed: int = 0,
    d_model: int = 32,
    n_heads: int = 4,
    n_layers: int = 3,
    d_ff: int = 48,
    max_positions: int = 64,
    n_kv_heads: int = 2,
    d_head: int | None = None,
    tied: bool = True,
    llama_tokenizer: str = "sentencepiece",
    extra_pieces: tuple[str, ...] = (),
) -> Path:
    """A random tiny checkpoint of `family` with its tokenizer, saved in the hub layout at `path`.

    Llama: n_kv_heads key/value heads for n_heads query heads, d_head (None: d_model / n_heads);
    tied or separate output head;
    llama_tokenizer "sentencepiece" (Llama 2's ▁ and byte fallback) or "byte_level" (SmolLM2).
    extra_pieces: added tokens of a GPT-2's tokenizer (byte_level_tokenizer_json).
    """
    path.mkdir(parents=True, exist_ok=True)
    if family in ("bert", "distilbert"):
        vocab_size = wordpiece_tokenizer_json(path)
    elif family == "roberta":
        vocab_size = byte_level_tokenizer_json(
            path, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], roberta=True
        )
    elif family == "gpt2" or llama_tokenizer == "byte_level":
        vocab_size = byte_level_tokenizer_json(
            path, ["<|endoftext|>", "<|im_start|>"], extra_pieces=extra_pieces
        )
    else:
        vocab_size = sentencepiece_tokenizer_json(path)
    sizes = {
        "d_model": d_model, "n_heads": n_heads, "n_layers": n_layers, "d_ff": d_ff,
        "max_positions": max_positions, "n_kv_heads": n_kv_heads, "tied": tied,
        "d_head": d_head,
    }  # fmt: skip
    torch.manual_seed(seed)
    _, model = _config_and_model(family, vocab_size, sizes)
    randomise(model, seed)
    model.save_pretrained(str(path))
    return path


def load_reference(path: Path, family: str, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """transformers' own model of the checkpoint, eager attention (sdpa returns no weights);
    decoders with their output head (GPT2LMHeadModel, LlamaForCausalLM)."""
    import transformers as tf

    cls = {
        "bert": tf.BertModel,
        "roberta": tf.RobertaModel,
        "distilbert": tf.DistilBertModel,
        "gpt2": tf.GPT2LMHeadModel,
        "llama": tf.LlamaForCausalLM,
    }[family]
    model = cls.from_pretrained(str(path), attn_implementation="eager")
    return model.to(dtype).eval()
