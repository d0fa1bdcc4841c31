"""Page 4's runs of the model (multi-head attention): each runs several sentences, so it is
computed once.

Every result goes through ui.door (one cache, one admission limit) and is
shared read-only by every session.
"""

from __future__ import annotations

import core
from core import head_roles
from ui import anatomy_text, door
from ui.escape import literal


@door.shared("measuring every head", spinner="Measuring every head on the probe sentences …")
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
