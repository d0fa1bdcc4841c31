"""A seeded tiny BERT checkpoint written by hand, and BERT's forward pass written out in loops.

The loop version is the independent reference for the own encoder: float64, one token, head,
query and key at a time, every formula as the papers write it (Vaswani et al., 2017; Devlin et
al., 2019), with no call into core/. It is slow on purpose and only ever runs on tiny sizes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "bank", "river", "money",
              "flows", "grows", "a", "of", "##s", "time", "flies", "like", "an", "arrow", "."]  # fmt: skip


def write_tiny_bert(
    path: Path,
    *,
    seed: int = 0,
    d_model: int = 8,
    n_heads: int = 2,
    n_layers: int = 2,
    d_ff: int = 12,
    max_positions: int = 16,
    hidden_act: str = "gelu",
    prefix: str = "",
    legacy_norm_names: bool = False,
) -> Path:
    """Write config.json, vocab.txt and model.safetensors of a random BERT; return `path`.

    Every tensor is random, LayerNorm scales and shifts included, so a swapped weight/bias or a
    dropped term changes the output. `prefix` ("bert.") and `legacy_norm_names` (gamma/beta)
    mimic older exports.
    """
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)

    def rand(*shape: int, std: float = 0.5, mean: float = 0.0) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * std + mean

    def norm(name: str) -> dict[str, torch.Tensor]:
        weight, bias = ("gamma", "beta") if legacy_norm_names else ("weight", "bias")
        return {f"{name}.{weight}": rand(d_model, mean=1.0), f"{name}.{bias}": rand(d_model)}

    tensors = {
        "embeddings.word_embeddings.weight": rand(len(TINY_VOCAB), d_model),
        "embeddings.position_embeddings.weight": rand(max_positions, d_model),
        "embeddings.token_type_embeddings.weight": rand(2, d_model),
        **norm("embeddings.LayerNorm"),
        "pooler.dense.weight": rand(d_model, d_model),  # present in real files, unused by us
    }
    for i in range(n_layers):
        layer = f"encoder.layer.{i}"
        for name, (d_out, d_in) in {
            "attention.self.query": (d_model, d_model),
            "attention.self.key": (d_model, d_model),
            "attention.self.value": (d_model, d_model),
            "attention.output.dense": (d_model, d_model),
            "intermediate.dense": (d_ff, d_model),
            "output.dense": (d_model, d_ff),
        }.items():
            tensors[f"{layer}.{name}.weight"] = rand(d_out, d_in, std=1.0 / math.sqrt(d_in) * 2)
            tensors[f"{layer}.{name}.bias"] = rand(d_out, std=0.3)
        tensors.update(norm(f"{layer}.attention.output.LayerNorm"))
        tensors.update(norm(f"{layer}.output.LayerNorm"))
    save_file(
        {prefix + name: t.contiguous() for name, t in tensors.items()}, path / "model.safetensors"
    )
    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "vocab_size": len(TINY_VOCAB),
        "hidden_size": d_model,
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "intermediate_size": d_ff,
        "max_position_embeddings": max_positions,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "hidden_act": hidden_act,
        "position_embedding_type": "absolute",
    }
    (path / "config.json").write_text(json.dumps(config))
    (path / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    return path


def raw_tensors(path: Path) -> dict[str, np.ndarray]:
    """The checkpoint's tensors as float64 numpy, under their file names without a prefix."""
    from safetensors.numpy import load_file

    loaded = load_file(str(path / "model.safetensors"))
    return {
        name.removeprefix("bert.")
        .replace("LayerNorm.gamma", "LayerNorm.weight")
        .replace("LayerNorm.beta", "LayerNorm.bias"): value.astype(np.float64)
        for name, value in loaded.items()
    }


# ---- the forward pass, written out --------------------------------------------------------------


def cosine_loop(u, v) -> float:
    """cos(u, v) one product at a time (0 for a zero vector)."""
    dot = sum(a * b for a, b in zip(u, v, strict=True))
    norms = math.sqrt(sum(a * a for a in u)) * math.sqrt(sum(b * b for b in v))
    return dot / norms if norms else 0.0


def layer_norm_loop(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """(n, d): y_t = (x_t − mean) / sqrt(var + eps) · γ_t + β_t, row by row, population variance."""
    out = np.empty_like(x)
    for i, row in enumerate(x):
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)
        for t, v in enumerate(row):
            out[i, t] = (v - mean) / math.sqrt(var + eps) * weight[t] + bias[t]
    return out


def activation_loop(x: np.ndarray, name: str) -> np.ndarray:
    """GELU (erf), GELU (tanh approximation) or ReLU, element by element."""
    if name == "gelu":
        f = lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))  # noqa: E731
    elif name in ("gelu_new", "gelu_pytorch_tanh"):
        f = lambda v: 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))  # noqa: E731
    else:
        f = lambda v: max(v, 0.0)  # noqa: E731
    return np.vectorize(f)(x)


def linear_loop(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(n, d_in) -> (n, d_out): y_io = Σ_t x_it W_ot + b_o (torch's (out, in) layout)."""
    n, d_in = x.shape
    d_out = weight.shape[0]
    y = np.zeros((n, d_out))
    for i in range(n):
        for o in range(d_out):
            y[i, o] = bias[o] + sum(x[i, t] * weight[o, t] for t in range(d_in))
    return y


def attention_loop(
    x_query: np.ndarray,
    x_key_value: np.ndarray,
    raw: dict[str, np.ndarray],
    layer: int,
    n_heads: int,
    *,
    scale: bool = True,
    causal: bool = False,
    removed_heads: frozenset[int] = frozenset(),
) -> dict[str, np.ndarray]:
    """One multi-head attention block by loops: query/key/value/scores/weights per head + output."""
    p = f"encoder.layer.{layer}.attention"
    q = linear_loop(x_query, raw[f"{p}.self.query.weight"], raw[f"{p}.self.query.bias"])
    k = linear_loop(x_key_value, raw[f"{p}.self.key.weight"], raw[f"{p}.self.key.bias"])
    v = linear_loop(x_key_value, raw[f"{p}.self.value.weight"], raw[f"{p}.self.value.bias"])
    n_q, n_k, d_model = q.shape[0], k.shape[0], q.shape[1]
    d_head = d_model // n_heads
    queries = np.zeros((n_heads, n_q, d_head))
    keys = np.zeros((n_heads, n_k, d_head))
    values = np.zeros((n_heads, n_k, d_head))
    scores = np.zeros((n_heads, n_q, n_k))
    weights = np.zeros((n_heads, n_q, n_k))
    concatenated = np.zeros((n_q, d_model))
    for h in range(n_heads):
        cols = range(h * d_head, (h + 1) * d_head)  # head h owns these columns
        for i in range(n_q):
            queries[h, i] = [q[i, c] for c in cols]
        for j in range(n_k):
            keys[h, j] = [k[j, c] for c in cols]
            values[h, j] = [v[j, c] for c in cols]
        for i in range(n_q):
            for j in range(n_k):
                dot = sum(q[i, c] * k[j, c] for c in cols)
                scores[h, i, j] = dot / math.sqrt(d_head) if scale else dot
                if causal and j > i:
                    scores[h, i, j] = -math.inf
            finite = [s for s in scores[h, i] if s != -math.inf]
            top = max(finite)
            exps = [math.exp(s - top) if s != -math.inf else 0.0 for s in scores[h, i]]
            weights[h, i] = [e / sum(exps) for e in exps]
            if h not in removed_heads:
                for c in cols:
                    concatenated[i, c] = sum(weights[h, i, j] * v[j, c] for j in range(n_k))
    output = linear_loop(
        concatenated, raw[f"{p}.output.dense.weight"], raw[f"{p}.output.dense.bias"]
    )
    return {
        "queries": queries,
        "keys": keys,
        "values": values,
        "scores": scores,
        "attentions": weights,
        "concatenated": concatenated,
        "output": output,
    }


def forward_loop(
    raw: dict[str, np.ndarray],
    config: dict,
    input_ids: list[int],
    segments: list[int],
    *,
    scale: bool = True,
    causal: bool = False,
    positions: bool = True,
    ablate: frozenset[tuple[int, int]] = frozenset(),
) -> dict[str, np.ndarray]:
    """Every Trace array, computed by loops in float64: hidden_states, queries, …, attentions."""
    eps, act = config["layer_norm_eps"], config["hidden_act"]
    n_heads = config["num_attention_heads"]
    n = len(input_ids)
    x = np.zeros((n, config["hidden_size"]))
    for i in range(n):
        x[i] = raw["embeddings.word_embeddings.weight"][input_ids[i]]
        x[i] += raw["embeddings.token_type_embeddings.weight"][segments[i]]
        if positions:
            x[i] += raw["embeddings.position_embeddings.weight"][i]  # position i: row i
    x = layer_norm_loop(
        x, raw["embeddings.LayerNorm.weight"], raw["embeddings.LayerNorm.bias"], eps
    )
    out: dict[str, list] = {
        name: [] for name in ("queries", "keys", "values", "scores", "attentions")
    }
    hidden = [x]
    for layer in range(config["num_hidden_layers"]):
        removed = frozenset(h for (lyr, h) in ablate if lyr == layer)
        block = attention_loop(
            x, x, raw, layer, n_heads, scale=scale, causal=causal, removed_heads=removed
        )
        for name in out:
            out[name].append(block[name])
        p = f"encoder.layer.{layer}"
        h = layer_norm_loop(
            x + block["output"],
            raw[f"{p}.attention.output.LayerNorm.weight"],
            raw[f"{p}.attention.output.LayerNorm.bias"],
            eps,
        )
        inner = activation_loop(
            linear_loop(
                h, raw[f"{p}.intermediate.dense.weight"], raw[f"{p}.intermediate.dense.bias"]
            ),
            act,
        )
        ffn = linear_loop(inner, raw[f"{p}.output.dense.weight"], raw[f"{p}.output.dense.bias"])
        x = layer_norm_loop(
            h + ffn, raw[f"{p}.output.LayerNorm.weight"], raw[f"{p}.output.LayerNorm.bias"], eps
        )
        hidden.append(x)
    result = {name: np.stack(values) for name, values in out.items()}
    result["hidden_states"] = np.stack(hidden)
    return result
