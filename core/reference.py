"""The check that keeps the own transformer honest: the same input through transformers' model.

Imported only when a user asks for the check (or by tests): transformers' modeling code costs
seconds to import, and the app never needs it to draw anything. Every family has its reference
class (BertModel, RobertaModel, DistilBertModel, GPT2LMHeadModel, LlamaForCausalLM), always with
eager attention: the default sdpa returns no attention weights.

Hidden states follow the Trace's convention, [l + 1] = the output of layer l. transformers puts
a decoder's final norm into its last hidden state; the check reads the last layer's own output
with a hook instead, and compares the final norm through the next-piece scores (logits).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.transformer import Trace, Transformer

REFERENCE_CLASSES = {
    "bert": "BertModel",
    "roberta": "RobertaModel",
    "distilbert": "DistilBertModel",
    "gpt2": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
}


@dataclass(frozen=True)
class ParityReport:
    """Largest absolute differences between the own Trace and transformers, per quantity."""

    reference_class: str  # the transformers class that ran (REFERENCE_CLASSES)
    layers_compared: int  # attention matrices compared (must equal the model's layer count)
    hidden_states_compared: int  # L + 1
    max_abs_attention_diff: float
    max_abs_hidden_diff: float
    logits_compared: int = 0  # positions whose next-piece scores were compared (decoders)
    max_abs_logit_diff: float = float("nan")


def load_reference(model_dir: Path) -> torch.nn.Module:
    """transformers' model of the checkpoint's family, eager attention (sdpa would return no
    attention weights); decoders with their output head."""
    import transformers

    model_type = json.loads((Path(model_dir) / "config.json").read_text()).get("model_type", "bert")
    reference_class = getattr(transformers, REFERENCE_CLASSES[model_type])
    return reference_class.from_pretrained(str(model_dir), attn_implementation="eager").eval()


def _layer_modules(reference: torch.nn.Module) -> torch.nn.ModuleList:
    """The reference's list of layers, wherever its family keeps it."""
    for path in ("encoder.layer", "transformer.layer", "transformer.h", "model.layers"):
        module: object = reference
        for part in path.split("."):
            module = getattr(module, part, None)
        if isinstance(module, torch.nn.ModuleList):
            return module
    raise ValueError(f"no layer list found in {type(reference).__name__}")


def _forward(reference: torch.nn.Module, trace: Trace) -> tuple[object, torch.Tensor]:
    """The reference's outputs for the Trace's exact input, and its last layer's own output."""
    input_ids = torch.from_numpy(np.array(trace.input_ids)).unsqueeze(0)  # (1, n): a batch of one
    inputs = {"input_ids": input_ids}
    if reference.config.model_type == "bert":  # the others have one segment row or none
        inputs["token_type_ids"] = torch.from_numpy(np.array(trace.segments)).unsqueeze(0)
    last_output: list[torch.Tensor] = []

    def keep(_module: object, _inputs: object, output: object) -> None:
        last_output.append(output[0] if isinstance(output, tuple) else output)

    handle = _layer_modules(reference)[-1].register_forward_hook(keep)
    try:
        out = reference(**inputs, output_attentions=True, output_hidden_states=True)
    finally:
        handle.remove()
    return out, last_output[-1][0]


def _states(
    out: object, last_layer_output: torch.Tensor
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Attentions (H, n, n) per layer and hidden states (n, d_model) of one forward's outputs,
    the last one replaced by the last layer's own output (before a decoder's final norm)."""
    attentions = [a[0].numpy() for a in (out.attentions or ())]  # (1, H, n, n) -> (H, n, n)
    hidden_states = [h[0].numpy() for h in (out.hidden_states or ())]  # (1, n, d) -> (n, d)
    if hidden_states:
        hidden_states[-1] = last_layer_output.numpy()
    return attentions, hidden_states


@torch.inference_mode()
def reference_outputs(
    reference: torch.nn.Module, trace: Trace
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(attentions per layer (H, n, n), hidden states (n, d_model)) for the Trace's exact input,
    hidden_states[l + 1] being the output of layer l (a decoder's final norm not applied)."""
    return _states(*_forward(reference, trace))


@torch.inference_mode()
def reference_logits(reference: torch.nn.Module, trace: Trace) -> np.ndarray | None:
    """(n, vocab) the reference's next-piece scores, or None for an encoder."""
    out, _ = _forward(reference, trace)
    logits = getattr(out, "logits", None)
    return None if logits is None else logits[0].numpy()


def reference_bytes(model: Transformer, n: int) -> int:
    """Peak bytes of compare() over n pieces beside the loaded reference: transformers' outputs
    (every layer's (H, n, n) weights and (n, d_model) states, as a Trace holds them, and its
    eager attention's scores of one layer), and a decoder's (n, vocab) next-piece scores from
    both sides."""
    logits = 2 * 4 * n * model.dims.vocab_size if model.is_decoder else 0
    return model.run_bytes(n) + logits


@torch.inference_mode()
def compare(
    reference: torch.nn.Module, trace: Trace, model: Transformer | None = None
) -> ParityReport:
    """Compare a default-switch Trace with the reference, layer by layer, in one forward pass;
    with the model, a decoder's next-piece scores too (its final norm and output head)."""
    out, last_layer_output = _forward(reference, trace)
    attentions, hidden_states = _states(out, last_layer_output)
    attn_diffs = [
        float(np.abs(ref - own).max())
        for ref, own in zip(attentions, trace.attentions, strict=False)
    ]
    hidden_diffs = [
        float(np.abs(ref - own).max())
        for ref, own in zip(hidden_states, trace.hidden_states, strict=False)
    ]
    logits_compared, logit_diff = 0, float("nan")
    expected = getattr(out, "logits", None)  # (1, n, vocab) for a decoder's reference class
    if model is not None and model.is_decoder and expected is not None:
        own = model.logits(torch.from_numpy(np.array(trace.hidden_states[-1]))).numpy()
        logits_compared = expected.shape[1]
        logit_diff = float(np.abs(expected[0].numpy() - own).max())
    return ParityReport(
        reference_class=type(reference).__name__,
        layers_compared=len(attn_diffs),
        hidden_states_compared=len(hidden_diffs),
        max_abs_attention_diff=max(attn_diffs, default=float("nan")),
        max_abs_hidden_diff=max(hidden_diffs, default=float("nan")),
        logits_compared=logits_compared,
        max_abs_logit_diff=logit_diff,
    )
