"""Inside one layer: where attention sits, and how much of each token's change it makes.

A layer is two sublayers on a residual stream; BERT's (post-norm, Devlin et al., 2019) is
    a = MultiHeadAttention(x)            # the only step where tokens read each other
    h = LayerNorm(x + a)
    f = W_2 · GELU(W_1 · h)              # the feed-forward network, each token on its own
    y = LayerNorm(h + f)
and a pre-norm model's (GPT-2, Llama) is a = MultiHead(Norm(x)), h = x + a, f = FFN(Norm(h)),
y = h + f. core/anatomy.py says which one the loaded model has.
`a` and `f` are what each sublayer writes into the stream. Their sizes, token by token, say how
much of the change comes from attention and how much from the feed-forward network.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from core.anatomy import describe, parameter_count
from core.transformer import (
    ATTN_WRITE,
    FFN_ACT_INPUT,
    FFN_WRITE,
    STREAM_IN,
    STREAM_MID,
    STREAM_OUT,
    Trace,
    Transformer,
    hook_name,
)


@dataclass(frozen=True)
class Stage:
    """One box of the block diagram: its name, the width of what it outputs, its parameters."""

    name: str
    width: str  # e.g. "384" or "12 × 32": the shape of one token's vector after this step
    parameters: int  # trained numbers in this step (0 for the residual additions)
    part: str = ""  # "attention" | "ffn" | "add" (a residual addition) | "" (stream or norm)


def part_parameters(stages: list[Stage], part: str) -> int:
    """The trained numbers of one part of a layer ("attention", "ffn"): its stages' sum."""
    return sum(stage.parameters for stage in stages if stage.part == part)


def layer_stages(model: Transformer, layer: int = 0) -> list[Stage]:
    """The steps of one layer in order, with widths and parameter counts read from its weights,
    in the model's own arrangement (core/anatomy.py: norm after each addition, or before each
    sublayer; a gated feed-forward's gate counted with its up projection)."""
    anatomy = describe(model)
    w = model.layers[layer]
    att = w.attention
    d, h, kv, d_head = model.d_model, model.n_heads, model.n_kv_heads, model.d_head
    norm, act = anatomy.norm_name, anatomy.activation_name
    heads = f"3 × {h} heads × {d_head}" if kv == h else f"({h} + 2 × {kv}) heads × {d_head}"
    attention = [
        Stage(
            "Q, K, V projections",
            heads,
            parameter_count(att.query.weight, att.query.bias, att.key.weight, att.key.bias)
            + parameter_count(att.value.weight, att.value.bias),
            "attention",
        ),
        Stage("softmax(QKᵀ/√d_head) V, per head", f"{h} × {d_head}", 0, "attention"),
        Stage(
            "W_O: concatenated heads → stream",
            f"{d}",
            parameter_count(att.output.weight, att.output.bias),
            "attention",
        ),
    ]
    if anatomy.gated:
        widen = Stage(
            f"{act}(W_gate) ⊙ W_up (widen)",
            f"{model.dims.d_ff}",
            parameter_count(w.ffn_gate.weight, w.ffn_gate.bias, w.ffn_in.weight, w.ffn_in.bias),
            "ffn",
        )
    else:
        widen = Stage(
            f"W_1 + {act} (widen)",
            f"{model.dims.d_ff}",
            parameter_count(w.ffn_in.weight, w.ffn_in.bias),
            "ffn",
        )
    narrow_name = "W_down (narrow back)" if anatomy.gated else "W_2 (narrow back)"
    narrow = Stage(narrow_name, f"{d}", parameter_count(w.ffn_out.weight, w.ffn_out.bias), "ffn")
    stream = Stage("input x (residual stream)", f"{d}", 0)
    if anatomy.pre_norm:  # x + a(Norm(x)), h + f(Norm(h)): the norms sit on the branches
        return [
            stream,
            Stage(f"{norm} (attention's copy)", f"{d}", parameter_count(*w.attn_norm)),
            *attention,
            Stage("add x → h", f"{d}", 0, "add"),
            Stage(f"{norm} (feed-forward's copy)", f"{d}", parameter_count(*w.ffn_norm)),
            widen,
            narrow,
            Stage("add h → y", f"{d}", 0, "add"),
        ]
    return [
        stream,
        *attention,
        Stage(f"add x, {norm} → h", f"{d}", parameter_count(*w.attn_norm), "add"),
        widen,
        narrow,
        Stage(f"add h, {norm} → y", f"{d}", parameter_count(*w.ffn_norm), "add"),
    ]


@dataclass(frozen=True)
class SublayerSizes:
    """Per layer and token, the size of the stream and of what each sublayer adds to it."""

    stream: np.ndarray  # (L, n) ‖x‖, the layer's input
    attention_update: np.ndarray  # (L, n) ‖a‖, attention's output after W_O
    attention_sum: np.ndarray  # (L, n) ‖x + a‖, the residual sum before the first LayerNorm
    mid_stream: np.ndarray  # (L, n) ‖h‖, after the first LayerNorm
    ffn_update: np.ndarray  # (L, n) ‖f‖, the feed-forward output
    ffn_sum: np.ndarray  # (L, n) ‖h + f‖, the residual sum before the second LayerNorm
    output: np.ndarray  # (L, n) ‖y‖, the layer's output after the second LayerNorm
    kept_direction: np.ndarray  # (L, n) cos(x, x + a): how much attention's addition turns x
    units_off: np.ndarray  # (L, n) share of the d_ff units whose activation input is below zero
    max_rebuild_error: float  # max |y - hidden_states[l + 1]|: the recomputation matches the run

    @property
    def attention_share(self) -> np.ndarray:
        """(L, n) ‖a‖ / (‖a‖ + ‖f‖): attention's part of what the two sublayers write."""
        return self.attention_update / (self.attention_update + self.ffn_update)

    def layer_means(self) -> dict[str, np.ndarray]:
        """Each (L, n) field averaged over tokens -> (L,), named for the page's table."""
        return {
            "stream": self.stream.mean(axis=1),
            "attention_update": self.attention_update.mean(axis=1),
            "mid_stream": self.mid_stream.mean(axis=1),
            "ffn_update": self.ffn_update.mean(axis=1),
            "attention_share": self.attention_share.mean(axis=1),
            "kept_direction": self.kept_direction.mean(axis=1),
            "units_off": self.units_off.mean(axis=1),
            "output": self.output.mean(axis=1),
            "ffn_share": 1.0 - self.attention_share.mean(axis=1),  # ‖f‖ / (‖a‖ + ‖f‖)
        }

    def spread(self, field: str) -> float:
        """How far apart the longest and the shortest vectors of an (L, n) length field are:
        largest / smallest, over every layer and token."""
        lengths = getattr(self, field)  # (L, n)
        return float(lengths.max() / lengths.min())


# The points of every layer that sublayer_sizes reads, in the order the layer computes them.
_SUBLAYER_POINTS = (STREAM_IN, ATTN_WRITE, STREAM_MID, FFN_ACT_INPUT, FFN_WRITE, STREAM_OUT)


def sublayer_names(model: Transformer) -> list[str]:
    """The hook points sublayer_sizes keeps: x, a, h, the activation's input, f, y per layer."""
    return [
        hook_name(point, layer) for layer in range(model.n_layers) for point in _SUBLAYER_POINTS
    ]


@torch.inference_mode()
def sublayer_sizes(model: Transformer, trace: Trace) -> SublayerSizes:
    """Run `trace`'s pieces again through the one forward path, with the run's switches
    (scaling, causal mask, removed heads, positions), and measure ‖x‖, ‖a‖, ‖h‖, ‖f‖ per token
    from what every layer passes its hook points. The rerun's outputs are checked against the
    Trace's states (max_rebuild_error).
    """
    names = sublayer_names(model)
    _, cache = model.run_with_cache(
        trace.input_ids, trace.segments, names=names, options=trace.options
    )
    sizes: dict[str, list[np.ndarray]] = {name: [] for name in _SIZE_FIELDS}
    worst = 0.0
    for layer in range(model.n_layers):  # reading the cache, one layer's values at a time
        x, a, h, activation_input, f, y = (
            cache[hook_name(point, layer)] for point in _SUBLAYER_POINTS
        )  # (n, d_model) each, the activation's input (n, d_ff)
        expected = torch.from_numpy(np.array(trace.hidden_states[layer + 1]))
        worst = max(worst, float((y - expected).abs().max()))
        # 1. Attention, the only step that mixes tokens, writes a; 2. the feed-forward, each
        # token alone, writes f; h is the stream between them.
        attention_sum, ffn_sum = x + a, h + f  # what each norm (post-norm) receives
        measured = {
            "stream": x.norm(dim=-1),
            "attention_update": a.norm(dim=-1),
            "attention_sum": attention_sum.norm(dim=-1),
            "mid_stream": h.norm(dim=-1),
            "ffn_update": f.norm(dim=-1),
            "ffn_sum": ffn_sum.norm(dim=-1),
            "output": y.norm(dim=-1),
            "kept_direction": F.cosine_similarity(x, attention_sum, dim=-1),
            # what the activation reads: W_1 h, or SwiGLU's gate
            "units_off": (activation_input < 0).double().mean(dim=-1),  # (n, d_ff) -> (n,)
        }
        for name, value in measured.items():
            sizes[name].append(value.double().numpy())  # (n,)
    return SublayerSizes(
        **{name: np.stack(sizes[name]) for name in _SIZE_FIELDS}, max_rebuild_error=worst
    )


_SIZE_FIELDS = (
    "stream",
    "attention_update",
    "attention_sum",
    "mid_stream",
    "ffn_update",
    "ffn_sum",
    "output",
    "kept_direction",
    "units_off",
)


def weight_on_later_tokens(attentions: np.ndarray) -> float:
    """(L, H, n, n) weights -> mean over layers, heads and rows of Σ_{j > i} α_ij.

    The share of its attention a token gives to tokens after it: 0 under a causal mask (a
    decoder), above 0 in an encoder that reads both sides.
    """
    n = attentions.shape[-1]
    later = np.triu(np.ones((n, n), dtype=attentions.dtype), k=1)  # (n, n): 1 where j > i
    on_later = np.einsum("lhij,ij->lhi", attentions, later)  # (L, H, n), no (L, H, n, n) copy
    return float(on_later.mean(dtype=np.float64))


@torch.inference_mode()
def activation_floor(model: Transformer) -> float:
    """The smallest value the feed-forward activation takes (GELU: about -0.17; ReLU: 0).

    Read off a fine grid of negative inputs: every GELU variant has its minimum near -0.75.
    """
    grid = torch.linspace(-6.0, 0.0, 60_001, dtype=torch.float64)  # steps of 1e-4
    return float(model.activation(grid).min())
