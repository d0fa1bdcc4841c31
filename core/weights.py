"""Checkpoint files -> named, shape-checked tensors for the own BERT encoder.

A BERT checkpoint in Hugging Face layout is a config.json plus model.safetensors (or the older
pytorch_model.bin). Parameter names vary between exports: a `bert.` prefix (models saved with a
task head), and legacy TensorFlow-era `LayerNorm.gamma` / `LayerNorm.beta`. One explicit name
map below turns all of them into the names this project uses, and every tensor is checked
against the shape the config promises, so a broken file fails with a sentence, not a stack trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from core.errors import CheckpointError

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


@dataclass(frozen=True)
class BertDims:
    """The sizes that fix every tensor's shape, read from config.json."""

    vocab_size: int
    d_model: int  # hidden_size: width of every token vector
    n_layers: int
    n_heads: int
    d_ff: int  # intermediate_size: width of the feed-forward hidden layer
    max_positions: int  # rows of the learned position table: the longest input
    type_vocab_size: int  # number of segment ids (2: sentence A and B)
    layer_norm_eps: float
    activation: str

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


def read_config(model_dir: Path) -> BertDims:
    """config.json -> BertDims, with a clear error for anything the own encoder cannot run."""
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
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise CheckpointError(
            f"model_type is '{model_type}'; only BERT-family encoders are supported"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError("only absolute (learned) position embeddings are supported")
    try:
        dims = BertDims(
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
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"config.json lacks or mangles a BERT size: {err}") from err
    if dims.d_model % dims.n_heads:
        raise CheckpointError(
            f"hidden_size {dims.d_model} is not divisible by {dims.n_heads} heads"
        )
    if dims.activation not in SUPPORTED_ACTIVATIONS:
        raise CheckpointError(f"activation '{dims.activation}' is not supported")
    return dims


def expected_shapes(dims: BertDims) -> dict[str, tuple[int, ...]]:
    """Our parameter name -> shape. Linear weights are (out, in), as torch stores them."""
    d, f = dims.d_model, dims.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word": (dims.vocab_size, d),
        "embeddings.position": (dims.max_positions, d),
        "embeddings.segment": (dims.type_vocab_size, d),
        "embeddings.norm.weight": (d,),
        "embeddings.norm.bias": (d,),
    }
    for layer in range(dims.n_layers):
        per_layer = {
            "query.weight": (d, d),
            "query.bias": (d,),
            "key.weight": (d, d),
            "key.bias": (d,),
            "value.weight": (d, d),
            "value.bias": (d,),
            "attn_out.weight": (d, d),
            "attn_out.bias": (d,),
            "attn_norm.weight": (d,),
            "attn_norm.bias": (d,),
            "ffn_in.weight": (f, d),
            "ffn_in.bias": (f,),
            "ffn_out.weight": (d, f),
            "ffn_out.bias": (d,),
            "ffn_norm.weight": (d,),
            "ffn_norm.bias": (d,),
        }
        shapes.update({f"layers.{layer}.{name}": shape for name, shape in per_layer.items()})
    return shapes


# Hugging Face name (after the prefix and gamma/beta clean-up) -> our name. {i} is the layer.
_EMBEDDING_NAMES = {
    "embeddings.word_embeddings.weight": "embeddings.word",
    "embeddings.position_embeddings.weight": "embeddings.position",
    "embeddings.token_type_embeddings.weight": "embeddings.segment",
    "embeddings.LayerNorm.weight": "embeddings.norm.weight",
    "embeddings.LayerNorm.bias": "embeddings.norm.bias",
}
_LAYER_NAMES = {
    "attention.self.query": "query",
    "attention.self.key": "key",
    "attention.self.value": "value",
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "ffn_in",
    "output.dense": "ffn_out",
    "output.LayerNorm": "ffn_norm",
}


def hf_to_own_name(hf_name: str) -> str | None:
    """Map one checkpoint name to ours; None for tensors we do not use (pooler, heads, buffers)."""
    name = hf_name.removeprefix("bert.")
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )
    if name in _EMBEDDING_NAMES:
        return _EMBEDDING_NAMES[name]
    parts = name.split(".")
    # encoder.layer.{i}.{module path}.{weight|bias}
    if len(parts) >= 5 and parts[0] == "encoder" and parts[1] == "layer" and parts[2].isdigit():
        module, kind = ".".join(parts[3:-1]), parts[-1]
        if module in _LAYER_NAMES and kind in ("weight", "bias"):
            return f"layers.{parts[2]}.{_LAYER_NAMES[module]}.{kind}"
    return None


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


def load_weights(model_dir: Path, dims: BertDims) -> dict[str, torch.Tensor]:
    """Read a checkpoint into our names (float32), checking every expected name and shape."""
    raw = _read_tensors(model_dir)
    tensors: dict[str, torch.Tensor] = {}
    for hf_name, tensor in raw.items():
        own_name = hf_to_own_name(hf_name)
        if own_name is not None:
            tensors[own_name] = tensor.to(torch.float32)
    expected = expected_shapes(dims)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CheckpointError(f"checkpoint lacks {len(missing)} BERT tensors, e.g. '{missing[0]}'")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise CheckpointError(
                f"tensor '{name}' has shape {tuple(tensors[name].shape)}, config says {shape}"
            )
    return {name: tensors[name] for name in expected}
