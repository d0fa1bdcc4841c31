"""Conclusion words chosen from the numbers they sit beside, one small rule per kind of number.

A page that says "differ a little" or "pulled apart" must say it because of the cosine it shows,
so the word is picked here from the number, never typed next to it. Each rule compares the number
at the decimals the page prints it with, so the words and the printed number cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

from ui.escape import literal

# Bands of the cosine of two vectors of one word piece (1: the same direction). A cosine of 0.95
# is an angle of 18 degrees, 0.8 of 37 degrees, 0.3 of 73 degrees, -0.3 of 107 degrees.
_APART_BANDS: tuple[tuple[float, str], ...] = (
    (0.95, "differ a little"),
    (0.8, "differ clearly"),
    (0.3, "differ a lot"),
    (-0.3, "are close to perpendicular"),
)


def how_far_apart(cosine: float) -> str:
    """What two vectors with this cosine do, as a verb phrase: "are the same to three decimals",
    "differ a little" (≥ 0.95), "differ clearly" (≥ 0.8), "differ a lot" (≥ 0.3), "are close to
    perpendicular" (≥ −0.3), "point largely opposite ways" (below)."""
    shown = round(float(cosine), 3)  # pages print a cosine with three decimals
    if shown >= 1.0:
        return "are the same to three decimals"
    for floor, words in _APART_BANDS:
        if shown >= floor:
            return words
    return "point largely opposite ways"


# A fall of the cosine below these counts as barely moving two vectors apart / a little.
BARELY = 0.02
A_LITTLE = 0.1


def moved_apart(before: float, after: float) -> str:
    """What a change of cosine from `before` to `after` did to two vectors, said of them:
    "stayed where they were" (no change at three decimals), "barely moved apart" (a fall under
    0.02), "moved a little apart" (under 0.1), "moved clearly apart"; a rise says "closer together"
    in the same bands."""
    change = round(float(after), 3) - round(float(before), 3)  # as the page prints both
    if change == 0:
        return "stayed where they were"
    way = "apart" if change < 0 else "closer together"
    if abs(change) < BARELY:
        return f"barely moved {way}"
    if abs(change) < A_LITTLE:
        return f"moved a little {way}"
    return f"moved clearly {way}"


def neighbours_share(self_weights: Sequence[float]) -> str:
    """What the weights a row keeps on itself leave its neighbours, as a closing clause: "a real
    share" when every row keeps at most half, "little" when every row keeps 0.9 or more, else
    "the rest"."""
    kept = [float(weight) for weight in self_weights]
    if max(kept) <= 0.5:  # even the most self-bound word hands out half
        return ", and the neighbours keep a real share"
    if min(kept) >= 0.9:
        return ", and the neighbours get little"
    return ", the rest to its neighbours"


# Shares of a whole below which a part does "little of" it, from which it does "much of" it.
LITTLE_SHARE = 0.1
MUCH_SHARE = 0.3


def how_much_of(low: float, high: float) -> str:
    """How much of a whole a part does whose share runs from `low` to `high` (0 to 1): "much of"
    when even its smallest share is 0.3 or more, "little of" when even its largest is under 0.1,
    else "part of"."""
    if low >= MUCH_SHARE:
        return "much of"
    if high < LITTLE_SHARE:
        return "little of"
    return "part of"


def count_of(count: int, total: int, noun: str = "row") -> str:
    """A count of `total` things said as the count it is: "all 5 rows", "none of the 5 rows",
    "3 of 5 rows"; of one thing, "the one row" or "not the one row"."""
    if total == 1:
        return f"the one {noun}" if count else f"not the one {noun}"
    if count == total:
        return f"all {total} {noun}s"
    if count == 0:
        return f"none of the {total} {noun}s"
    return f"{count} of {total} {noun}s"


def all_of(count: int, noun: str) -> str:
    """Every one of `count` things: "all 4 comparisons", "both comparisons", "the one
    comparison"."""
    if count == 1:
        return f"the one {noun}"
    if count == 2:
        return f"both {noun}s"
    return f"all {count} {noun}s"


def parking_rule(factor: float) -> str:
    """The rule core.head_roles.is_parking_place applies, in one sentence (factor: its
    PARKING_FACTOR)."""
    return (
        "A place counts as a parking spot when word pieces give it more than an even spread "
        f"would in every layer, and at least {factor:g}× that on average."
    )


def parking_verdict(spot: str | None, compared: Sequence[str]) -> str:
    """What the parking test found, naming only the places it compared: "the parking spot is
    [CLS]", "neither <s> nor </s> is a parking spot", "the first piece is no parking spot".
    spot and compared are shown as given: escape them first."""
    if spot:
        return f"the parking spot is {spot}"
    if len(compared) == 1:
        return f"{compared[0]} is no parking spot"
    return f"neither {' nor '.join(compared)} is a parking spot"


# Shares of the pieces an even spread with the same entropy would cover (2^bits of n), above
# which a spread reads "almost evenly" / "fairly evenly"; below the second, "unevenly".
ALMOST_EVEN_PIECES = 0.9
FAIRLY_EVEN_PIECES = 0.5


def pieces_covered(bits: float) -> float:
    """2^bits: how many pieces an even spread with this entropy covers, from the bits as a page
    prints them (two decimals)."""
    return 2.0 ** round(float(bits), 2)


def how_evenly(bits: float, n_pieces: int) -> str:
    """How evenly shares with entropy `bits` spread over n_pieces, as an adverb: "almost evenly"
    when they carry as many bits as an even spread over 90% of the pieces or more, "fairly
    evenly" from 50%, else "unevenly"."""
    covered = pieces_covered(bits) / n_pieces
    if covered >= ALMOST_EVEN_PIECES:
        return "almost evenly"
    if covered >= FAIRLY_EVEN_PIECES:
        return "fairly evenly"
    return "unevenly"


# float32 sums of the same products in another order agree to ~1e-7 of their size: a gap under
# this share of the largest entry is rounding.
ROUNDING_SHARE = 1e-5


def how_symmetric(gap: float, largest: float) -> str:
    """What max |S − Sᵀ| = gap says of a matrix whose largest |entry| is `largest`: "exactly
    symmetric" (gap 0), "symmetric up to float rounding" (gap ≤ 1e-5 of largest), else "not
    symmetric"."""
    if gap == 0:
        return "exactly symmetric"
    if gap <= ROUNDING_SHARE * abs(largest):
        return "symmetric up to float rounding"
    return "not symmetric"


def sense_sorting(first: int, last: int, counted: int, chance: float) -> str:
    """What context did to `counted` occurrences of a word, `first` of which had a same-sense
    occurrence as their nearest at the embedding output and `last` after the last layer (a
    random pick: `chance` of them): "sorts the occurrences by sense" only when all end sorted
    and fewer started so; "some of them" when more end sorted than started and than a random
    pick gives, but not all."""
    if first == last == counted:
        return "they were already sorted at the embedding output"
    if last > first and last == counted:
        return "context sorts the occurrences by sense"
    if last > first and last > chance * counted:
        return "context sorts some of them by sense: more than a random pick, not all"
    return "by this measure, context does not sort them by sense here"


# A head earns a role's name when its mean weight on the role's key is at least this many times
# what an even spread over the keys a row sees gives that key.
NAMED_ROLE_MARGIN = 2.0


def earns_role_name(share: float, chance: float) -> bool:
    """Does a mean weight `share` on a role's key (the token before, ...) stand far enough above
    `chance`, an even spread's, to call the head by that role? Read unrounded: a head at 0.144
    against 0.074 (1.95×) prints as 0.14 against 0.07 but does not earn the name."""
    return float(share) >= NAMED_ROLE_MARGIN * float(chance)


def role_head_label(role_name: str, key_phrase: str, share: float, chance: float) -> str:
    """How to call the head that leans most on a role's key: by the role's name ("previous-token
    head") only when it earns it (earns_role_name), else by what it was picked for."""
    if earns_role_name(share, chance):
        return f"{role_name} head"
    return f"leans most to {key_phrase}"


def boldest_link(
    tokens: Sequence[str],
    boldest: tuple[int, int, int, int, float],
    shown: tuple[int, int],
    figure: str,
    ties: tuple[int, int] = (1, 1),
) -> str:
    """The strongest link between two ordinary pieces, said once for every page that names it.

    `boldest` is head_stats.boldest_line's (layer, head, query, key, weight); `shown` is the
    (layer, head) the page's `figure` draws now, so the sentence says either that the figure is on
    that head or which sliders reach it. `ties` (head_stats.ties_with_boldest): the lines that
    read the same weight, in all heads and in its head; a tie is said, since the figure shows
    them equally bold.
    """
    layer, head, query, key, weight = boldest
    target = "itself" if query == key else literal(tokens[key])
    everywhere, in_head = ties
    company = ""
    if everywhere > 1:
        where = "all in that head" if in_head == everywhere else f"{in_head} in that head"
        company = f" (one of {everywhere} lines at {weight:.2f}, {where})"
    where = (
        f"the {figure} opens on that head (layer {layer}, head {head})."
        if shown == (layer, head)
        else f"set Layer to {layer} and Head to {head} to see it in the {figure}."
    )
    return f"L{layer} H{head}'s {literal(tokens[query])} → {target}, {weight:.2f}{company}: {where}"
