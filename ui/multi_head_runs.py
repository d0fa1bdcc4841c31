"""Page 4's runs of the model (multi-head attention): each runs several sentences, so it is
computed once.

Every result goes through ui.door (one cache, one admission limit) and is
shared read-only by every session.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import core
from core import head_roles, multi_head
from ui import anatomy_text, door
from ui.escape import literal


def _probe_cost(model: core.Transformer) -> int:
    # one probe sentence's run at a time; each keeps (L, H, rows) weights for the averages
    return max(door.run_bytes(model, sentence) for sentence in head_roles.PROBE_SENTENCES)


@door.shared(
    "measuring every head",
    cost=_probe_cost,
    spinner="Measuring every head on the probe sentences …",
)
def role_scores(model: core.Transformer) -> head_roles.RoleScores:
    """core.head_roles.role_scores over PROBE_SENTENCES, once per model."""
    return head_roles.role_scores(model)


ROLE_NAMES = head_roles.ROLES  # role key -> what a learner reads


def first_piece_name(model: core.Transformer) -> str:
    """What position 0 is for this model, escaped: its special ([CLS], <s>), or "the first
    piece" when its tokenizer starts the text at once (GPT-2)."""
    first = anatomy_text.of(model).first_special
    return literal(first, max_chars=40) if first else "the first piece"


def role_names(model: core.Transformer) -> dict[str, str]:
    """ROLE_NAMES with the weight on position 0 named as this model's first piece."""
    return ROLE_NAMES | {"cls": first_piece_name(model)}


def probe_sentences() -> tuple[str, ...]:
    """The fixed sentences the head roles are measured on."""
    return head_roles.PROBE_SENTENCES


def probe_lengths(model: core.Transformer) -> tuple[int, ...]:
    """Word pieces of each probe sentence, specials included (tokenizing only: well under a
    millisecond each): an even spread gives each key 1/n."""
    return tuple(door.pieces(model, sentence) for sentence in head_roles.PROBE_SENTENCES)


def _one_run_cost(model: core.Transformer, sentence: str, **_: object) -> int:
    return door.run_bytes(model, sentence)


@door.shared("the repeated word's run", cost=_one_run_cost)
def repeat_example(
    model: core.Transformer, sentence: str, layer: int, head: int
) -> head_roles.RepeatExample | None:
    """core.head_roles.repeat_example: how the later of two equal pieces reads the earlier."""
    return head_roles.repeat_example(model, sentence, layer, head)


# ---- 2 · the output projection W_O, read from the weights ---------------------------------------
@dataclass(frozen=True)
class OutputProjection:
    """One layer's W_O, copied out of the weights."""

    per_head: np.ndarray  # (H, d_head, d_model) the slice of W_O that reads each head
    weight: np.ndarray  # (d_model, H * d_head) in torch's (out, in) layout
    bias: np.ndarray  # (d_model,) zeros for a model without one

    @property
    def stacked(self) -> np.ndarray:
        """(H * d_head, d_model) W_Oᵀ: every head's slice stacked in the x W layout the page
        draws, head h in rows h·d_head … (h + 1)·d_head − 1."""
        return self.weight.T


def _w_o_cost(model: core.Transformer, **_: object) -> int:
    # W_O, its per-head copy and the bias b_O, float32
    return 4 * model.d_model * (2 * model.n_heads * model.d_head + 1)


@door.shared("the output projection", cost=_w_o_cost)
def output_projection(model: core.Transformer, layer: int) -> OutputProjection:
    """core.multi_head's W_O of one layer: per head (H, d_head, d_model), whole in torch's
    (out, in) layout (d_model, H * d_head), and its bias (d_model,)."""
    weight, bias = multi_head.output_projection(model, layer)
    per_head = multi_head.head_output_projection(model, layer)
    # copies: the cache makes what it holds read-only, which must not reach the weights
    return OutputProjection(per_head.copy(), weight.copy(), bias.copy())


# ---- 3 · the value-weighted view, 4 · the strongest writer -------------------------------------
def _value_cost(model: core.Transformer, trace: core.Trace, **_: object) -> int:
    # every value through W_O (H, n, d_model) and the (H, n, n) norms and shares
    n, n_heads = trace.n_tokens, model.n_heads
    return 4 * n_heads * n * (model.d_model + 2 * n) + _w_o_cost(model)


@door.shared("the value-weighted shares", cost=_value_cost)
def value_weighted_share(model: core.Transformer, trace: core.Trace, layer: int) -> np.ndarray:
    """(H, n, n) ‖α_ij v_j W_Oʰ‖ as a share of each query row (core.multi_head)."""
    return multi_head.value_weighted_share(multi_head.value_weighted_norms(model, trace, layer))


@door.shared("the heads' write lengths", cost=_value_cost)
def head_write_lengths(model: core.Transformer, trace: core.Trace, layer: int) -> np.ndarray:
    """(H,) core.multi_head.head_write_lengths: mean ‖head_h · W_Oʰ‖ over the tokens."""
    return multi_head.head_write_lengths(model, trace, layer)
