"""Checkpoint files -> named, shape-checked tensors for the own transformer, for five families.

A checkpoint in Hugging Face layout is a config.json plus model.safetensors (or the older
pytorch_model.bin). What differs between BERT, RoBERTa, DistilBERT, GPT-2 and the Llama family is
data, not code:
- an Architecture (read from config.json): where the norms sit, which norm, which positions,
  which activation, how many key/value heads, whether the output head is the word table;
- one explicit name map per family, from the file's parameter names to the names this project
  uses, so that one forward pass (core/transformer.py) reads every family.
Every tensor is checked against the shape the config promises, so a broken file fails with a
sentence, not a stack trace. GPT-2 stores its linear maps as Conv1D, (in, out) and with query,
key and value side by side in one matrix: they are transposed to torch's (out, in) and split.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from core.errors import CheckpointError

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu")
FAMILIES = ("bert", "roberta", "distilbert", "gpt2", "llama")
FAMILY_NAMES = {
    "bert": "BERT",
    "roberta": "RoBERTa",
    "distilbert": "DistilBERT",
    "gpt2": "GPT-2",
    "llama": "Llama",
}


@dataclass(frozen=True)
class Architecture:
    """How one family's layer is wired: the switches of the one config-driven block."""

    family: str  # "bert" | "roberta" | "distilbert" | "gpt2" | "llama"
    kind: str  # "encoder" (sees both ways) | "decoder" (causal by nature, predicts the next piece)
    norm_position: str  # "post": norm(x + sublayer(x)) (BERT) | "pre": x + sublayer(norm(x))
    norm_kind: str  # "layer" (mean and variance, scale and shift) | "rms" (root mean square, scale)
    positions: str  # "learned": a table added to the input | "rotary": q and k turned in attention
    position_offset: int = 0  # first row of the position table that position 0 reads (RoBERTa)
    gated_ffn: bool = False  # SwiGLU: W_down (act(W_gate x) * W_up x) instead of W_2 act(W_1 x)
    embedding_norm: bool = True  # a norm right after the embedding sum (the encoders)
    final_norm: bool = False  # a norm after the last layer (pre-norm decoders)
    tied_head: bool = False  # the next-piece head is the word-piece table itself
    has_head: bool = False  # the checkpoint is read with a next-piece output head
    bias: bool = True  # query, key, value and output projections carry a bias
    ffn_bias: bool = True
    wordpiece_specials: bool = True  # [CLS] A [SEP] (B [SEP]) added by the encoder itself

    @property
    def is_decoder(self) -> bool:
        return self.kind == "decoder"


@dataclass(frozen=True)
class ModelDims:
    """The sizes that fix every tensor's shape, read from config.json."""

    vocab_size: int
    d_model: int  # hidden_size: width of every token vector
    n_layers: int
    n_heads: int
    d_ff: int  # intermediate_size: width of the feed-forward hidden layer
    max_positions: int  # the longest input the positions allow (learned table rows past the offset)
    type_vocab_size: int  # number of segment ids (2 for BERT; 0: no segment table)
    layer_norm_eps: float  # the eps of every norm (LayerNorm or RMSNorm)
    activation: str
    d_head: int = 0  # width of one head; 0 means d_model // n_heads
    n_kv_heads: int = 0  # key/value heads (grouped-query attention); 0 means n_heads
    rope_theta: float = 10_000.0  # base of the rotary frequencies (rotary positions only)
    arch: Architecture = Architecture("bert", "encoder", "post", "layer", "learned")

    def __post_init__(self) -> None:  # fill the defaults that follow from other sizes
        if not self.d_head:
            object.__setattr__(self, "d_head", self.d_model // max(self.n_heads, 1))
        if not self.n_kv_heads:
            object.__setattr__(self, "n_kv_heads", self.n_heads)


# ---- config.json -> ModelDims ---------------------------------------------------------------------
def _read_json(model_dir: Path) -> dict:
    path = model_dir / "config.json"
    if not path.is_file():
        raise CheckpointError("no config.json in the model folder")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"config.json is not valid JSON ({err.msg}, line {err.lineno})"
        ) from err
    except (OSError, UnicodeDecodeError) as err:
        raise CheckpointError(f"config.json cannot be read ({type(err).__name__})") from err
    if not isinstance(config, dict):
        raise CheckpointError("config.json does not hold an object")
    return config


def read_config(model_dir: Path) -> ModelDims:
    """config.json -> ModelDims, with a clear error for anything the own transformer cannot run."""
    config = _read_json(model_dir)
    model_type = config.get("model_type", "bert")
    if model_type not in FAMILIES:
        raise CheckpointError(
            f"model_type is '{str(model_type)[:40]}'; the explorer reads "
            + ", ".join(FAMILIES)
            + " checkpoints"
        )
    try:
        dims = _READERS[model_type](config)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        raise CheckpointError(f"config.json lacks or mangles a {model_type} size: {err}") from err
    if min(dims.d_model, dims.n_layers, dims.n_heads, dims.d_ff, dims.vocab_size) <= 0:
        raise CheckpointError("config.json has a size of zero or less")
    if dims.max_positions <= 0:
        raise CheckpointError("config.json leaves no position for a single word piece")
    if dims.arch.positions == "learned" and dims.d_model % dims.n_heads:
        raise CheckpointError(
            f"hidden_size {dims.d_model} is not divisible by {dims.n_heads} heads"
        )
    if dims.n_heads % dims.n_kv_heads:
        raise CheckpointError(
            f"{dims.n_heads} heads cannot share {dims.n_kv_heads} key/value heads evenly"
        )
    if dims.arch.positions == "rotary" and dims.d_head % 2:
        raise CheckpointError(f"rotary positions need an even head width, not {dims.d_head}")
    if dims.activation not in SUPPORTED_ACTIVATIONS:
        raise CheckpointError(f"activation '{str(dims.activation)[:40]}' is not supported")
    return dims


def _bert(config: dict) -> ModelDims:
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError("only absolute (learned) position embeddings are supported")
    return ModelDims(
        vocab_size=int(config["vocab_size"]),
        d_model=int(config["hidden_size"]),
        n_layers=int(config["num_hidden_layers"]),
        n_heads=int(config["num_attention_heads"]),
        d_ff=int(config["intermediate_size"]),
        max_positions=int(config["max_position_embeddings"]),
        type_vocab_size=int(config.get("type_vocab_size", 2)),
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        activation=str(config.get("hidden_act", "gelu")),
    )


def _roberta(config: dict) -> ModelDims:
    """RoBERTa: BERT's layer; positions start at padding_idx + 1, one segment row."""
    bert = _bert({"type_vocab_size": 1, **config})
    offset = int(config.get("pad_token_id", 1)) + 1  # position p reads row p + padding_idx + 1
    arch = Architecture(
        "roberta", "encoder", "post", "layer", "learned", position_offset=offset,
        wordpiece_specials=False,
    )  # fmt: skip
    return _replace(bert, max_positions=bert.max_positions - offset, arch=arch)


def _distilbert(config: dict) -> ModelDims:
    arch = Architecture("distilbert", "encoder", "post", "layer", "learned")
    return ModelDims(
        vocab_size=int(config["vocab_size"]),
        d_model=int(config["dim"]),
        n_layers=int(config["n_layers"]),
        n_heads=int(config["n_heads"]),
        d_ff=int(config["hidden_dim"]),
        max_positions=int(config["max_position_embeddings"]),
        type_vocab_size=0,  # no segment table
        layer_norm_eps=1e-12,  # fixed in DistilBERT's code, not in its config
        activation=str(config.get("activation", "gelu")),
        arch=arch,
    )


def _gpt2(config: dict) -> ModelDims:
    if not config.get("scale_attn_weights", True):
        raise CheckpointError("GPT-2 without √d_head scaling (scale_attn_weights) is not supported")
    if config.get("scale_attn_by_inverse_layer_idx", False):
        raise CheckpointError("GPT-2 with scale_attn_by_inverse_layer_idx is not supported")
    if config.get("add_cross_attention", False):
        raise CheckpointError("GPT-2 with cross-attention is not supported")
    d_model = int(config["n_embd"])
    arch = Architecture(
        "gpt2", "decoder", "pre", "layer", "learned", embedding_norm=False, final_norm=True,
        tied_head=bool(config.get("tie_word_embeddings", True)), has_head=True,
        wordpiece_specials=False,
    )  # fmt: skip
    return ModelDims(
        vocab_size=int(config["vocab_size"]),
        d_model=d_model,
        n_layers=int(config["n_layer"]),
        n_heads=int(config["n_head"]),
        d_ff=int(config.get("n_inner") or 4 * d_model),
        max_positions=int(config["n_positions"]),
        type_vocab_size=0,
        layer_norm_eps=float(config.get("layer_norm_epsilon", 1e-5)),
        activation=str(config.get("activation_function", "gelu_new")),
        arch=arch,
    )


def _llama(config: dict) -> ModelDims:
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else ""
    if rope_type != "default":
        raise CheckpointError(f"rotary scaling '{str(rope_type)[:30]}' is not supported")
    theta = rope.get("rope_theta", config.get("rope_theta", 10_000.0))
    activation = str(config.get("hidden_act", "silu"))
    if activation != "silu":
        raise CheckpointError(f"a Llama feed-forward with '{activation[:30]}' is not supported")
    n_heads = int(config["num_attention_heads"])
    d_model = int(config["hidden_size"])
    arch = Architecture(
        "llama", "decoder", "pre", "rms", "rotary", gated_ffn=True, embedding_norm=False,
        final_norm=True, tied_head=bool(config.get("tie_word_embeddings", False)), has_head=True,
        bias=bool(config.get("attention_bias", False)), ffn_bias=bool(config.get("mlp_bias", False)),
        wordpiece_specials=False,
    )  # fmt: skip
    return ModelDims(
        vocab_size=int(config["vocab_size"]),
        d_model=d_model,
        n_layers=int(config["num_hidden_layers"]),
        n_heads=n_heads,
        d_ff=int(config["intermediate_size"]),
        max_positions=int(config.get("max_position_embeddings", 2048)),
        type_vocab_size=0,
        layer_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        activation=activation,
        d_head=int(config.get("head_dim") or d_model // n_heads),
        n_kv_heads=int(config.get("num_key_value_heads") or n_heads),
        rope_theta=float(theta),
        arch=arch,
    )


def _replace(dims: ModelDims, **changes: object) -> ModelDims:
    from dataclasses import replace

    return replace(dims, **changes)


_READERS = {
    "bert": _bert,
    "roberta": _roberta,
    "distilbert": _distilbert,
    "gpt2": _gpt2,
    "llama": _llama,
}


# ---- our names and their shapes ---------------------------------------------------------------
def expected_shapes(dims: ModelDims) -> dict[str, tuple[int, ...]]:
    """Our parameter name -> shape. Linear weights are (out, in), as torch stores them."""
    arch, d, f = dims.arch, dims.d_model, dims.d_ff
    d_q, d_kv = dims.n_heads * dims.d_head, dims.n_kv_heads * dims.d_head
    norm_names = ("weight", "bias") if arch.norm_kind == "layer" else ("weight",)

    shapes: dict[str, tuple[int, ...]] = {"embeddings.word": (dims.vocab_size, d)}
    if arch.positions == "learned":
        shapes["embeddings.position"] = (dims.max_positions + arch.position_offset, d)
    if dims.type_vocab_size:
        shapes["embeddings.segment"] = (dims.type_vocab_size, d)
    if arch.embedding_norm:
        shapes.update({f"embeddings.norm.{kind}": (d,) for kind in norm_names})

    def linear(name: str, d_out: int, d_in: int, bias: bool) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (d_out, d_in), **({f"{name}.bias": (d_out,)} if bias else {})}

    for layer in range(dims.n_layers):
        per_layer = {
            **linear("query", d_q, d, arch.bias),
            **linear("key", d_kv, d, arch.bias),
            **linear("value", d_kv, d, arch.bias),
            **linear("attn_out", d, d_q, arch.bias),
            **{f"attn_norm.{kind}": (d,) for kind in norm_names},
            **linear("ffn_in", f, d, arch.ffn_bias),
            **(linear("ffn_gate", f, d, arch.ffn_bias) if arch.gated_ffn else {}),
            **linear("ffn_out", d, f, arch.ffn_bias),
            **{f"ffn_norm.{kind}": (d,) for kind in norm_names},
        }
        shapes.update({f"layers.{layer}.{name}": shape for name, shape in per_layer.items()})
    if arch.final_norm:
        shapes.update({f"final_norm.{kind}": (d,) for kind in norm_names})
    if arch.has_head and not arch.tied_head:
        shapes["head.weight"] = (dims.vocab_size, d)
    return shapes


# ---- the name maps, one per family ------------------------------------------------------------
@dataclass(frozen=True)
class NameMap:
    """A family's file names -> ours: whole-model names, and per-layer module paths."""

    prefixes: tuple[str, ...]  # removed first (a checkpoint saved with a task head adds one)
    model: dict[str, str]  # file name (after the prefix) -> our name
    layer_path: str  # "encoder.layer.": a layer's names start with this and its index
    layer: dict[str, str]  # module path inside a layer -> our module name
    conv1d: bool = False  # 2-D weights are stored (in, out), as GPT-2's Conv1D does


_BERT_LAYER = {
    "attention.self.query": "query",
    "attention.self.key": "key",
    "attention.self.value": "value",
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "ffn_in",
    "output.dense": "ffn_out",
    "output.LayerNorm": "ffn_norm",
}
_BERT_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "embeddings.word",
    "embeddings.position_embeddings.weight": "embeddings.position",
    "embeddings.token_type_embeddings.weight": "embeddings.segment",
    "embeddings.LayerNorm.weight": "embeddings.norm.weight",
    "embeddings.LayerNorm.bias": "embeddings.norm.bias",
}
NAME_MAPS: dict[str, NameMap] = {
    "bert": NameMap(("bert.",), _BERT_EMBEDDINGS, "encoder.layer.", _BERT_LAYER),
    "roberta": NameMap(("roberta.",), _BERT_EMBEDDINGS, "encoder.layer.", _BERT_LAYER),
    "distilbert": NameMap(
        ("distilbert.",),
        {
            "embeddings.word_embeddings.weight": "embeddings.word",
            "embeddings.position_embeddings.weight": "embeddings.position",
            "embeddings.LayerNorm.weight": "embeddings.norm.weight",
            "embeddings.LayerNorm.bias": "embeddings.norm.bias",
        },
        "transformer.layer.",
        {
            "attention.q_lin": "query",
            "attention.k_lin": "key",
            "attention.v_lin": "value",
            "attention.out_lin": "attn_out",
            "sa_layer_norm": "attn_norm",
            "ffn.lin1": "ffn_in",
            "ffn.lin2": "ffn_out",
            "output_layer_norm": "ffn_norm",
        },
    ),
    "gpt2": NameMap(
        ("transformer.",),
        {
            "wte.weight": "embeddings.word",
            "wpe.weight": "embeddings.position",
            "ln_f.weight": "final_norm.weight",
            "ln_f.bias": "final_norm.bias",
            "lm_head.weight": "head.weight",
        },
        "h.",
        {
            "ln_1": "attn_norm",
            "attn.c_attn": "qkv",  # query, key and value side by side: split after loading
            "attn.c_proj": "attn_out",
            "ln_2": "ffn_norm",
            "mlp.c_fc": "ffn_in",
            "mlp.c_proj": "ffn_out",
        },
        conv1d=True,
    ),
    "llama": NameMap(
        ("model.",),
        {
            "embed_tokens.weight": "embeddings.word",
            "norm.weight": "final_norm.weight",
            "lm_head.weight": "head.weight",
        },
        "layers.",
        {
            "input_layernorm": "attn_norm",
            "self_attn.q_proj": "query",
            "self_attn.k_proj": "key",
            "self_attn.v_proj": "value",
            "self_attn.o_proj": "attn_out",
            "post_attention_layernorm": "ffn_norm",
            "mlp.up_proj": "ffn_in",
            "mlp.gate_proj": "ffn_gate",
            "mlp.down_proj": "ffn_out",
        },
    ),
}


def hf_to_own_name(hf_name: str, family: str = "bert") -> str | None:
    """Map one checkpoint name to ours; None for tensors we do not use (pooler, heads, buffers)."""
    names = NAME_MAPS[family]
    name = hf_name
    for prefix in names.prefixes:
        name = name.removeprefix(prefix)
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )
    if name in names.model:
        return names.model[name]
    if not name.startswith(names.layer_path):
        return None
    # {layer_path}{i}.{module path}.{weight|bias}
    index, _, rest = name.removeprefix(names.layer_path).partition(".")
    module, _, kind = rest.rpartition(".")
    if index.isdigit() and module in names.layer and kind in ("weight", "bias"):
        return f"layers.{index}.{names.layer[module]}.{kind}"
    return None


# ---- sizes before reading ---------------------------------------------------------------------
# A model's memory is known before a tensor is read: the own transformer keeps every expected
# tensor in float32 (held_bytes, from config.json alone), and reading the file holds its tensors
# in their stored precision while they are converted (load_peak_bytes, from the file's header).
# A half-precision file (float16, bfloat16) doubles in memory: 2 bytes a number on disk, 4 here.
SAFETENSORS_ITEM_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
    "U16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}  # fmt: skip
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit on the JSON header


def held_bytes(dims: ModelDims) -> int:
    """Bytes of the loaded model's tensors: every expected shape in float32 (a tied output head
    is the word table itself, not a copy)."""
    return 4 * sum(math.prod(shape) for shape in expected_shapes(dims).values())


def file_tensors(model_dir: Path) -> dict[str, tuple[int, int]]:
    """Checkpoint name -> (numbers in it, bytes a number on disk), read without any tensor: the
    safetensors header (8 bytes of length, then JSON), or pytorch_model.bin's pickle with its
    storages mapped, not read."""
    safetensors_path = model_dir / "model.safetensors"
    bin_path = model_dir / "pytorch_model.bin"
    try:
        if safetensors_path.is_file():
            with safetensors_path.open("rb") as file:
                (length,) = struct.unpack("<Q", file.read(8))  # little-endian u64
                if length > MAX_HEADER_BYTES:
                    raise ValueError("header too long")
                header = json.loads(file.read(length))
            return {
                name: (math.prod(entry["shape"]), SAFETENSORS_ITEM_BYTES[entry["dtype"]])
                for name, entry in header.items()
                if name != "__metadata__"
            }
        if bin_path.is_file():
            state = torch.load(bin_path, map_location="cpu", weights_only=True, mmap=True)
            return {
                name: (tensor.numel(), tensor.element_size())
                for name, tensor in state.items()
                if isinstance(tensor, torch.Tensor)
            }
    except Exception as err:  # a truncated or foreign file: say which, keep the reason short
        raise CheckpointError(f"cannot read the weights' header ({type(err).__name__})") from err
    raise CheckpointError("no model.safetensors or pytorch_model.bin in the model folder")


def load_peak_bytes(model_dir: Path) -> int:
    """Peak bytes of load_weights: every file tensor at max(its own size, float32) (the file is
    read whole, and each tensor replaced by its float32 copy in turn), plus one float32 copy of
    the largest in flight (a conversion, a transposed Conv1D, a split of GPT-2's fused qkv)."""
    tensors = file_tensors(model_dir).values()
    largest = max((numbers for numbers, _ in tensors), default=0)
    return sum(numbers * max(item_bytes, 4) for numbers, item_bytes in tensors) + 4 * largest


def _read_tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    """Raw tensors from model.safetensors, else pytorch_model.bin (loaded with weights_only)."""
    safetensors_path = model_dir / "model.safetensors"
    bin_path = model_dir / "pytorch_model.bin"
    try:
        if safetensors_path.is_file():
            from safetensors.torch import load_file

            return load_file(str(safetensors_path))
        if bin_path.is_file():
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
            return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    except Exception as err:  # a truncated or foreign file: say which, keep the reason short
        raise CheckpointError(f"cannot read the weights ({type(err).__name__})") from err
    raise CheckpointError("no model.safetensors or pytorch_model.bin in the model folder")


def _check_shape(name: str, tensor: torch.Tensor, shape: tuple[int, ...]) -> None:
    if tuple(tensor.shape) != shape:
        raise CheckpointError(
            f"tensor '{name}' has shape {tuple(tensor.shape)}, config says {shape}"
        )


def _split_fused(tensors: dict[str, torch.Tensor], dims: ModelDims) -> None:
    """GPT-2's qkv (3 d, d) and (3 d,) -> query, key, value: its columns [q | k | v], in place."""
    d = dims.d_model
    for layer in range(dims.n_layers):
        for kind, shape in (("weight", (3 * d, d)), ("bias", (3 * d,))):
            fused_name = f"layers.{layer}.qkv.{kind}"
            fused = tensors.pop(fused_name, None)
            if fused is None:
                continue  # reported as missing below, under our names
            _check_shape(fused_name, fused, shape)
            for part, name in zip(fused.split(d, dim=0), ("query", "key", "value"), strict=True):
                tensors[f"layers.{layer}.{name}.{kind}"] = part.contiguous()


def load_weights(model_dir: Path, dims: ModelDims) -> dict[str, torch.Tensor]:
    """Read a checkpoint into our names (float32), checking every expected name and shape."""
    family = dims.arch.family
    name_map = NAME_MAPS[family]
    raw = _read_tensors(model_dir)
    tensors: dict[str, torch.Tensor] = {}
    # Popped one by one: a transposed (Conv1D) or converted copy replaces its source at once,
    # so loading GPT-2 never holds the checkpoint twice (~500 MB for GPT-2 small).
    for hf_name in list(raw):
        tensor = raw.pop(hf_name)
        own_name = hf_to_own_name(hf_name, family)
        if own_name is None:
            continue
        tensor = tensor.to(torch.float32)
        if name_map.conv1d and own_name.startswith("layers.") and tensor.dim() == 2:
            tensor = tensor.T.contiguous()  # Conv1D (in, out) -> Linear (out, in)
        tensors[own_name] = tensor
    if name_map.conv1d:
        _split_fused(tensors, dims)
    expected = expected_shapes(dims)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CheckpointError(
            f"checkpoint lacks {len(missing)} {FAMILY_NAMES[family]} tensors, e.g. '{missing[0]}'"
        )
    for name, shape in expected.items():
        _check_shape(name, tensors[name], shape)
    return {name: tensors[name] for name in expected}
