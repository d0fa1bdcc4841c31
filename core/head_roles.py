"""Heads with a nameable job, found by measurement over a fixed set of probe sentences.

For every head and every role, the mean attention weight that role predicts, averaged over the
query rows of all probe sentences (only real word pieces ask; [CLS]/[SEP] are left out as
queries so that the sink behaviour does not count as "previous token"):
    previous token   α_{i, i-1}               (i-1 a real word piece)
    next token       α_{i, i+1}               (i+1 a real word piece)
    [CLS]            α_{i, 0}
    same word        Σ_{j ≠ i, token_j = token_i} α_ij   (rows whose word occurs again)
The head with the largest mean is the model's best example of that role. Nothing is hard-coded:
another model gives other heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core import head_stats
from core.transformer import Transformer

# Probe sentences: ordinary text, plus words that occur twice in one sentence (the second time
# often in another sense: monitor as noun and verb) for the "same word" role.
PROBE_SENTENCES = (
    "The monitor on my desk keeps flickering.",
    "Nurses monitor the patient through the night.",
    "The monitor will monitor the room all night.",
    "We watch the old watch on the wall.",
    "Time flies like an arrow.",
    "She sat on the bank of the river and watched the water.",
    "They fish for fish in the lake.",
    "The cat chased the other cat around the garden.",
)
ROLES = {
    "previous": "previous token",
    "next": "next token",
    "self": "itself",
    "cls": "[CLS]",
    "same_word": "same word again",
}


def real_positions(tokens: Sequence[str], special: Sequence[bool] | None = None) -> list[int]:
    """The positions of real word pieces: not special (the Trace's mask; without one, positions
    1 … n-2, between BERT's [CLS] and its last [SEP])."""
    if special is not None and len(special) == len(tokens):
        return [i for i, is_special in enumerate(special) if not is_special]
    return list(range(1, len(tokens) - 1))


def role_weights(
    attn_weights: np.ndarray, tokens: Sequence[str], special: Sequence[bool] | None = None
) -> dict[str, np.ndarray]:
    """(L, H, n, n) weights of one sentence -> per role, (L, H, rows) the role's weight per row.

    Rows are real word pieces only (real_positions: not special). "cls" is the weight on
    position 0 ([CLS], a Llama's <s>, a GPT-2 text's first piece), from every real row after
    it. A role with no qualifying row in this sentence gets an empty last axis.
    """
    weights = np.asarray(attn_weights, dtype=np.float64)
    real = real_positions(tokens, special)
    not_real = np.ones(len(tokens), dtype=bool)
    not_real[real] = False
    same_rows = [i for i in real if any(tokens[j] == tokens[i] for j in real if j != i)]

    def rows(values: list[np.ndarray]) -> np.ndarray:
        return np.stack(values, axis=-1) if values else np.zeros(weights.shape[:2] + (0,))

    def on_offset(offset: int) -> np.ndarray:
        # query i reads key i + offset; both real word pieces: the rule the Heatmaps page's
        # statistics use too (head_stats.role_rows)
        role_rows = head_stats.role_rows(not_real, offset)
        return weights[..., role_rows, role_rows + offset]  # (L, H, rows)

    out = {
        "previous": on_offset(-1),
        "next": on_offset(+1),
        "self": on_offset(0),
        "cls": rows([weights[..., i, 0] for i in real if i > 0]),  # (L, H, real rows after 0)
    }
    if same_rows:
        out["same_word"] = np.stack(
            [
                weights[..., i, [j for j in real if j != i and tokens[j] == tokens[i]]].sum(-1)
                for i in same_rows
            ],
            axis=-1,
        )
    else:
        out["same_word"] = np.zeros(weights.shape[:2] + (0,))
    return out


def possible_roles(causal: bool) -> tuple[str, ...]:
    """The roles the page sets out: under the causal mask no key lies after the query, so every
    head's next-token score is 0 and the query itself takes that role's place (roles_for);
    without the mask the next token keeps it (one grid each, four in all)."""
    left_out = "next" if causal else "self"
    return tuple(role for role in ROLES if role != left_out)


def roles_for(causal: bool) -> tuple[str, str]:
    """The two roles "Why several heads" sets side by side. Under the causal mask no key lies
    after the query, so a next-token head cannot exist: the token before is set against the
    query itself instead."""
    return ("previous", "self") if causal else ("previous", "next")


def role_chance(
    tokens: Sequence[str], role: str, causal: bool, special: Sequence[bool] | None = None
) -> np.ndarray:
    """(rows,) the weight an even spread gives `role`'s key in each of role_weights' rows: one
    over the keys the row can see, 1/n, or 1/(i + 1) for row i under the causal mask."""
    n = len(tokens)
    real = real_positions(tokens, special)
    is_real = set(real)
    step = ROLE_KEY.get(role)
    if role == "cls":
        rows = [i for i in real if i > 0]
    elif step is not None:
        rows = [i for i in real if i + step in is_real]
    else:
        return np.zeros(0)
    return np.array([1.0 / (i + 1) if causal else 1.0 / n for i in rows])


def sentence_chance(
    tokens: Sequence[str], role: str, causal: bool, special: Sequence[bool] | None = None
) -> float:
    """An even spread's mean weight on `role`'s key over the rows best_on_sentence averages
    (role_chance's rows); 0 when the sentence has none."""
    chances = role_chance(tokens, role, causal, special)  # (rows,)
    return float(chances.mean()) if chances.size else 0.0


@dataclass(frozen=True)
class RoleScores:
    """(L, H) mean weight per role, over every qualifying row of every probe sentence."""

    means: dict[str, np.ndarray]  # role -> (L, H)
    rows: dict[str, int]  # role -> how many query rows the mean is over
    causal: bool = False  # the probe runs had the causal mask (a decoder as trained)
    chance: dict[str, float] | None = None  # role -> an even spread's mean weight on its key

    def best(self, role: str, other_than: tuple[int, int] | None = None) -> tuple[int, int, float]:
        """(layer, head, mean weight) of the head that plays `role` most strongly; other_than
        leaves out one (layer, head), so that one head is never shown as two roles."""
        grid = np.array(self.means[role], dtype=np.float64)
        if other_than is not None and grid.size > 1:
            grid[other_than] = -np.inf
        layer, head = np.unravel_index(int(np.argmax(grid)), grid.shape)
        return int(layer), int(head), float(self.means[role][layer, head])


def role_scores(model: Transformer, sentences: Sequence[str] = PROBE_SENTENCES) -> RoleScores:
    """Run every probe sentence (as trained: scaled, no mask) and average each role per head."""
    collected: dict[str, list[np.ndarray]] = {role: [] for role in ROLES}
    chances: dict[str, list[np.ndarray]] = {role: [] for role in ROLES}
    causal = False
    for sentence in sentences:
        trace = model.run(sentence)
        causal = trace.options.causal
        for role, rows in role_weights(trace.attentions, trace.tokens, trace.special).items():
            collected[role].append(rows)
            chances[role].append(role_chance(trace.tokens, role, causal, trace.special))
    means, counts = {}, {}
    for role, parts in collected.items():
        stacked = np.concatenate(parts, axis=-1)  # (L, H, all qualifying rows)
        counts[role] = stacked.shape[-1]
        means[role] = stacked.mean(axis=-1) if stacked.shape[-1] else np.zeros(stacked.shape[:2])
    chance = {
        role: float(np.concatenate(parts).mean()) if sum(p.size for p in parts) else 0.0
        for role, parts in chances.items()
    }
    return RoleScores(means, counts, causal, chance)


def _specials(tokens: Sequence[str], special: Sequence[bool] | None) -> np.ndarray:
    """(n,) the Trace's mask of special pieces; without one, [CLS] and [SEP] by their text."""
    if special is not None and len(special) == len(tokens):
        return np.asarray(special, dtype=bool)
    return np.array([t in ("[CLS]", "[SEP]") for t in tokens], dtype=bool)


def _sink_columns(
    tokens: Sequence[str], special: Sequence[bool] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n,) masks: the query rows of real word pieces after position 0, position 0 ([CLS], a
    Llama's <s>, a GPT-2 text's first piece, which every later piece of a decoder can see),
    and the other specials ([SEP], </s>)."""
    specials = _specials(tokens, special)
    first = np.arange(len(tokens)) == 0
    return ~specials & ~first, first, specials & ~first


def sink_names(tokens: Sequence[str], special: Sequence[bool] | None = None) -> tuple[str, str]:
    """What special_shares_by_layer's two shares are about: position 0 ("[CLS]", "<s>", or
    "the first piece" when it is a word) and the other specials ("[SEP]", or "the other
    specials" when they differ; "the first <s>" and "the later <s>" when both have one name)."""
    specials = _specials(tokens, special)
    first_name = tokens[0] if len(tokens) and specials[0] else "the first piece"
    others = sorted({tokens[i] for i in range(1, len(tokens)) if specials[i]})
    if others == [first_name]:  # a pair framed "<s> A <s> B": one name, two places
        return f"the first {first_name}", f"the later {first_name}"
    return first_name, others[0] if len(others) == 1 else "the other specials"


def special_shares_by_layer(
    attn_weights: np.ndarray, tokens: Sequence[str], special: Sequence[bool] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(L, H, n, n) -> (L,), (L,): mean weight that real word pieces put on the first piece
    ([CLS], <s>, or a GPT-2 text's first piece) and on the other specials ([SEP]).

    Averaged over heads and over the query rows of real word pieces after position 0.
    special: the Trace's mask (sink_names says what the two shares are about).
    """
    real, is_cls, is_sep = _sink_columns(tokens, special)  # (n,) each

    def share(columns: np.ndarray) -> np.ndarray:
        # only the special columns are copied, (L, H, n, k), and summed in float64: a float64
        # copy of the whole block would be 150 MB at 512 pieces
        on_special = attn_weights[..., columns].sum(-1, dtype=np.float64)  # (L, H, n)
        return on_special[:, :, real].mean(axis=(1, 2))

    return share(is_cls), share(is_sep)


def even_shares(
    tokens: Sequence[str], special: Sequence[bool] | None = None, causal: bool = False
) -> tuple[float, float]:
    """What special_shares_by_layer's two shares would be if every row spread its weight evenly
    over the keys it can see (n, or i + 1 for row i under the causal mask): the chance levels
    of the first piece and of the other specials, averaged over the same query rows."""
    real, _, is_sep = _sink_columns(tokens, special)  # (n,) each
    rows = np.flatnonzero(real)
    if not rows.size:
        return 0.0, 0.0
    n = len(tokens)
    keys = rows + 1 if causal else np.full(rows.shape, n)  # (rows,) keys each row sees
    seps = np.flatnonzero(is_sep)
    seen = np.array([(seps <= i).sum() if causal else seps.size for i in rows])  # (rows,)
    return float(np.mean(1.0 / keys)), float(np.mean(seen / keys))


def has_other_specials(tokens: Sequence[str], special: Sequence[bool] | None = None) -> bool:
    """Whether any special piece follows position 0 ([SEP], </s>); a GPT-2 text has none."""
    return bool(_sink_columns(tokens, special)[2].any())


# A place is where weight is parked only when the excess is clear and not one layer's doing: a
# share above an even spread in every layer, and on average at least this many times it. On the
# review's tiny GPT-2 the first piece's 0.14 against 0.11 (layer 2: 0.05) is no parking spot;
# MiniLM's [CLS], 0.18-0.55 by layer against 0.06, is.
PARKING_FACTOR = 2.0


def is_parking_place(shares: np.ndarray, even: float, factor: float = PARKING_FACTOR) -> bool:
    """(L,) one place's share by layer, its even-spread share -> whether weight parks there:
    above `even` in every layer and on average at least factor × even."""
    shares = np.asarray(shares, dtype=np.float64)
    return bool(shares.size) and bool((shares > even).all()) and shares.mean() >= factor * even


def parking_spot(
    attn_weights: np.ndarray,
    tokens: Sequence[str],
    special: Sequence[bool] | None = None,
    causal: bool = False,
) -> str | None:
    """sink_names' name ("[CLS]", "[SEP]", "the first piece") of the place where real word
    pieces park weight by is_parking_place (against even_shares, under the run's mask), the one
    with the larger mean excess when both do; None when neither does."""
    cls, sep = special_shares_by_layer(attn_weights, tokens, special)
    cls_even, sep_even = even_shares(tokens, special, causal)
    first_name, other_name = sink_names(tokens, special)
    places = {first_name: (cls, cls_even)}
    if has_other_specials(tokens, special):
        places[other_name] = (sep, sep_even)
    excess = {
        name: float(shares.mean() - even)
        for name, (shares, even) in places.items()
        if is_parking_place(shares, even)
    }
    return max(excess, key=excess.__getitem__) if excess else None


def keys_seen(n_tokens: int, row: int, causal: bool) -> int:
    """The keys query row `row` of an n-piece sentence may read: pieces 0 … row under the
    causal mask, every piece without it."""
    return row + 1 if causal else n_tokens


def even_weight(n_tokens: int, row: int, causal: bool) -> float:
    """What an even spread over the keys row `row` sees gives each: 1 / keys_seen."""
    return 1.0 / keys_seen(n_tokens, row, causal)


@dataclass(frozen=True)
class RepeatExample:
    """In one sentence, how much the later occurrence of a repeated word reads the earlier one."""

    word: str
    first: int  # position of the earlier occurrence
    second: int  # position of the later occurrence
    weight: float  # α[second, first] in the chosen head
    n_tokens: int  # the sentence's pieces: an even spread gives every key 1 / n_tokens
    to_itself: float  # α[second, second]
    to_cls: float  # α[second, 0]: [CLS], <s>, or a decoder's first piece
    to_sep: float  # α[second, every [SEP]] summed (every special after position 0)
    top_key: int  # the key the later occurrence gives its largest weight (argmax of its row)
    top_piece: str  # that key's piece
    top_weight: float  # α[second, top_key]
    causal: bool = False  # the run had the causal mask (a decoder as trained)

    @property
    def keys_seen(self) -> int:
        """The keys the later occurrence's row may read (keys_seen of its row)."""
        return keys_seen(self.n_tokens, self.second, self.causal)

    @property
    def even_weight(self) -> float:
        """What an even spread over the keys its row sees gives each: 1 / keys_seen."""
        return even_weight(self.n_tokens, self.second, self.causal)


def repeat_example(
    model: Transformer, sentence: str, layer: int, head: int
) -> RepeatExample | None:
    """The first word piece that occurs twice in `sentence`, read by `layer`/`head`; None if none."""
    trace = model.run(sentence)
    tokens = trace.tokens
    real = real_positions(tokens, trace.special)
    _, _, other_specials = _sink_columns(tokens, trace.special)
    for second in real:
        for first in (i for i in real if i < second):
            if tokens[first] == tokens[second]:
                weight = float(trace.attentions[layer, head, second, first])
                row = np.asarray(trace.attentions[layer, head, second], dtype=np.float64)
                seps = np.flatnonzero(other_specials)  # [SEP], </s>: none for a decoder
                top_key = int(np.argmax(row))
                return RepeatExample(
                    tokens[first], first, second, weight, len(tokens),
                    to_itself=float(row[second]), to_cls=float(row[0]),
                    to_sep=float(row[seps].sum()),
                    top_key=top_key, top_piece=tokens[top_key], top_weight=float(row[top_key]),
                    causal=trace.options.causal,
                )  # fmt: skip
    return None


# ---- the roles on one sentence ------------------------------------------------------------------
def best_on_sentence(
    attn_weights: np.ndarray,
    tokens: Sequence[str],
    role: str,
    special: Sequence[bool] | None = None,
    other_than: tuple[int, int] | None = None,
) -> tuple[int, int, float] | None:
    """(layer, head, mean weight) of the head that plays `role` most strongly on this sentence
    alone (role_weights' rows), other than `other_than`; None when the sentence has no row for
    the role."""
    rows = role_weights(attn_weights, tokens, special)[role]  # (L, H, rows)
    if rows.shape[-1] == 0:
        return None
    means = rows.mean(axis=-1)  # (L, H)
    if other_than is not None and means.size > 1:
        means[other_than] = -np.inf  # one head is never shown as two roles
    layer, head = np.unravel_index(int(np.argmax(means)), means.shape)
    return int(layer), int(head), float(means[layer, head])


ROLE_KEY = {"previous": -1, "next": +1, "self": 0}  # the key a role points at: i − 1, i + 1, i


def _real_rows(special: Sequence[bool], steps: Sequence[int]) -> list[int]:
    """Rows i that are a real word piece and whose neighbours i + step, for every step, are real
    word pieces too ([CLS] and [SEP] are not; a GPT-2 text has no specials, so its ends count):
    head_stats.role_rows for every step at once, the one row rule of every role score."""
    mask = np.asarray(special, dtype=bool)
    rows = set(range(len(mask)))
    for step in steps:
        rows &= set(head_stats.role_rows(mask, step).tolist())
    return sorted(rows)


def role_holds(head_weights: np.ndarray, role: str, special: Sequence[bool]) -> tuple[int, int]:
    """(rows whose largest weight is on the role's key, rows that have that key as a real word
    piece) for one head's (n, n) weights, role "previous", "next" or "self", and the
    Trace's (n,) special mask."""
    weights = np.asarray(head_weights)
    step = ROLE_KEY[role]
    rows = _real_rows(special, [step])
    held = sum(int(np.argmax(weights[i])) == i + step for i in rows)
    return held, len(rows)


def neighbour_focus(
    previous_head: np.ndarray,
    other_head: np.ndarray,
    special: Sequence[bool],
    other_role: str = "next",
) -> int | None:
    """The query row both roles show best: argmax over rows i whose keys i − 1 and i + step
    (other_role's step, ROLE_KEY) are real word pieces of
    min(previous_head[i, i − 1], other_head[i, i + step]).

    Both heads are one head's (n, n) weights; special the Trace's (n,) mask. None when no row
    has both keys as real word pieces."""
    step = ROLE_KEY[other_role]
    rows = _real_rows(special, [-1, step])
    if not rows:
        return None
    both = [min(float(previous_head[i, i - 1]), float(other_head[i, i + step])) for i in rows]
    return rows[int(np.argmax(both))]
