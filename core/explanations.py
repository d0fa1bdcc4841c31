"""Every method's answer to "which word pieces made this sentence's vector?", side by side.

Each method gives one score per word piece of one sentence (a Trace); the attention-based ones
come from core.information_flow (no target needed), the gradient ones from GradientScores:
- attention: the last layer's weights, averaged over heads and over the query rows (the
  sentence vector is the mean of those rows);
- rollout, flow, norm rollout: the top row of core.rollout's matrices, pooled the same way;
- gradient × input and integrated gradients of a Target (core.saliency).
The attention-based scores explain the sentence's own vector whatever the target; only the
gradient scores know about the other sentence. Rank agreement (Spearman) and the deletion test
(core.saliency.deletion_curves, against several seeded random orders) compare them; paper_check
sets rollout and flow against raw attention as Abnar & Zuidema (2020) did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from core import saliency
from core.information_flow import InformationFlow
from core.transformer import Trace, Transformer

METHOD_LABELS = {
    "attention": "last-layer attention",
    "rollout": "attention rollout",
    "flow": "attention flow",
    "norm": "norm rollout",
    "grad_x_input": "gradient × input",
    "integrated_gradients": "integrated gradients",
}
GRADIENT_METHODS = ("grad_x_input", "integrated_gradients")


@dataclass(frozen=True)
class GradientScores:
    """Gradient × input and integrated gradients of one target, per word piece."""

    grad_x_input: np.ndarray  # (n,)
    integrated_gradients: np.ndarray  # (n,)
    ig_gap: float  # Σ IG − (f(x) − f(baseline)): small when the steps suffice
    ig_steps: int
    ig_difference: float  # f(x) − f(baseline): what the IG scores share out

    @property
    def ig_miss(self) -> float:
        """|Σ IG − (f(x) − f(baseline))| as a share of |f(x) − f(baseline)|."""
        if self.ig_difference == 0:
            return 0.0 if self.ig_gap == 0 else float("inf")
        return abs(self.ig_gap) / abs(self.ig_difference)

    @property
    def ig_converged(self) -> bool:
        """Whether the IG scores add up to what they share out (saliency.ig_converged)."""
        return saliency.ig_converged(self.ig_gap, self.ig_difference)


def gradient_scores(
    model: Transformer, trace: Trace, target: saliency.Target, ig_steps: int
) -> GradientScores:
    """Both gradient methods on one sentence's Trace."""
    integrated, gap, difference = saliency.integrated_gradients(model, trace, target, ig_steps)
    return GradientScores(
        saliency.gradient_x_input(model, trace, target), integrated, gap, ig_steps, difference
    )


def side_by_side(flow: InformationFlow, gradients: GradientScores) -> dict[str, np.ndarray]:
    """method -> (n,) scores, in METHOD_LABELS order (flow missing above its limit; integrated
    gradients missing when their sum misses what they share out: scores that did not converge
    rank nothing)."""
    scores = {
        **flow.scores(),
        "grad_x_input": gradients.grad_x_input,
        **(
            {"integrated_gradients": gradients.integrated_gradients}
            if gradients.ig_converged
            else {}
        ),
    }
    return {name: scores[name] for name in METHOD_LABELS if name in scores}


def rank_agreement(scores: Mapping[str, np.ndarray], allowed: np.ndarray) -> np.ndarray:
    """(M, M) Spearman's ρ between every two methods over the allowed pieces (ties averaged).

    ρ is Pearson's correlation of the ranks; NaN where a method gives every piece one score.
    """
    # imported on first use: scipy.stats adds hundreds of modules and tens of MB to a server
    # whose visitors may never open this comparison (bench/bench_lab.py --imports)
    from scipy.stats import rankdata

    ranks = np.stack([rankdata(np.asarray(s)[allowed]) for s in scores.values()])  # (M, m)
    centred = ranks - ranks.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(centred, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (centred @ centred.T) / np.outer(norms, norms)


# ---- the deletion test, summarised --------------------------------------------------------------
RANDOM = "random order"
RANDOM_ORDERS = 10  # seeded random orders: their spread is what chance alone does


def random_name(seed: int) -> str:
    """The ranking name of the random order drawn with `seed`."""
    return f"{RANDOM} {seed}"


def is_random(name: str) -> bool:
    return name.startswith(RANDOM)


def deletion_rankings(
    scores: Mapping[str, np.ndarray],
    tokens: tuple[str, ...],
    n_random: int = RANDOM_ORDERS,
    special: tuple[bool, ...] | None = None,
) -> dict[str, np.ndarray]:
    """method -> removable pieces, highest score first; plus n_random seeded random orders
    (seeds 0 … n_random − 1), whose spread shows what removing pieces by chance does.
    special: the Trace's mask of special pieces, which stay (saliency.removable)."""
    allowed = saliency.removable(tokens, special)
    rankings = {name: saliency.ranking(values, allowed) for name, values in scores.items()}
    for seed in range(n_random):
        rankings[random_name(seed)] = saliency.random_ranking(allowed, seed)
    return rankings


def mean_change(curve: np.ndarray) -> float:
    """A deletion curve's mean move from its start: mean over k ≥ 1 of curve[k] − curve[0]."""
    return float((curve[1:] - curve[0]).mean()) if len(curve) > 1 else 0.0


@dataclass(frozen=True)
class ChanceBand:
    """The random orders' deletion curves, summarised: what a method has to beat."""

    curves: np.ndarray  # (R, k_max + 1) one curve per seeded random order

    @property
    def low(self) -> np.ndarray:
        """(k_max + 1,) the lowest random curve at each k."""
        return self.curves.min(axis=0)

    @property
    def high(self) -> np.ndarray:
        return self.curves.max(axis=0)

    @property
    def mean(self) -> np.ndarray:
        return self.curves.mean(axis=0)

    @property
    def changes(self) -> np.ndarray:
        """(R,) each random order's mean_change."""
        return np.array([mean_change(curve) for curve in self.curves])


def split_chance(curves: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], ChanceBand]:
    """deletion_curves' output -> (the methods' curves, the random orders as one band)."""
    methods = {name: values for name, values in curves.items() if not is_random(name)}
    band = np.stack([values for name, values in curves.items() if is_random(name)])
    return methods, ChanceBand(band)


# Mean changes closer than this count as equal: their curves lie on top of each other. In the
# Target's units (a cosine, or a projection whose start is a few units); float noise of the
# batched passes is ~1e-6.
TIE = 5e-4


def orders_beaten(change: float, chance: np.ndarray, tie: float = TIE) -> int:
    """How many random orders one method's mean change lies below by more than a tie."""
    return int(np.sum(change < np.asarray(chance) - tie))


@dataclass(frozen=True)
class DeletionVerdict:
    """What the deletion test says about one sentence, against its random orders."""

    fastest: list[str]  # the methods whose curve falls fastest (several when they tie)
    lowest: float  # their mean change
    orders_beaten: int  # random orders whose mean change lies above theirs by more than a tie
    n_orders: int
    chance: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # the random orders' mean
    # changes: their mean, standard deviation (over the orders), smallest and largest

    @property
    def beats_chance(self) -> bool:
        """The fastest fall is a fall, and faster than every random order."""
        return self.lowest < 0 and self.orders_beaten == self.n_orders


def fastest_falls(
    changes: Mapping[str, float], chance: np.ndarray, tie: float = TIE
) -> DeletionVerdict:
    """The methods whose deletion curve falls fastest, and how many random orders they beat.

    changes: method -> mean_change of its curve (no random order among them); chance: (R,)
    the random orders' mean changes. Several methods are named when they tie (a short sentence
    leaves them the same pieces to remove). A random order counts as beaten only when the
    fastest method's change lies below it by more than a tie.
    """
    lowest = min(changes.values())
    fastest = [name for name, change in changes.items() if change <= lowest + tie]
    band = (float(chance.mean()), float(chance.std()), float(chance.min()), float(chance.max()))
    return DeletionVerdict(
        fastest, lowest, orders_beaten(lowest, chance, tie), len(chance), chance=band
    )


# ---- rollout and flow against the ablation and gradients (Abnar & Zuidema, 2020) --------------
ROLLED_METHODS = ("rollout", "flow")  # what the paper proposed, against raw "attention"


@dataclass(frozen=True)
class PaperCheck:
    """Does this sentence repeat Abnar & Zuidema's finding that rollout and flow rank the input
    pieces closer to ablation and gradient importance than raw attention does?"""

    rho: dict[str, dict[str, float]]  # reference -> method -> Spearman's ρ with it
    wins: int  # (rolled method, reference) pairs where it beats raw attention's ρ
    comparisons: int  # pairs where both ρ are defined

    @property
    def agrees(self) -> bool:
        return self.comparisons > 0 and self.wins == self.comparisons

    @property
    def disagrees(self) -> bool:
        return self.comparisons > 0 and self.wins == 0


def paper_check(
    scores: Mapping[str, np.ndarray],
    references: Mapping[str, np.ndarray],
    allowed: np.ndarray,
) -> PaperCheck:
    """ρ of attention, rollout and flow (when present) against each reference importance.

    scores: method -> (n,) as from InformationFlow.scores(); references: name -> (n,) e.g.
    leave-one-out drops and integrated gradients; allowed: (n,) the pieces ranked.
    """
    methods = [name for name in ("attention", *ROLLED_METHODS) if name in scores]
    rho: dict[str, dict[str, float]] = {}
    wins = comparisons = 0
    for reference, importance in references.items():
        table = {name: scores[name] for name in methods} | {"_reference": importance}
        grid = rank_agreement(table, allowed)  # (M + 1, M + 1)
        rho[reference] = {name: float(grid[m, -1]) for m, name in enumerate(methods)}
        raw = rho[reference]["attention"]
        for name in methods[1:]:
            rolled = rho[reference][name]
            if np.isfinite(raw) and np.isfinite(rolled):
                comparisons += 1
                wins += rolled > raw
    return PaperCheck(rho, wins, comparisons)


def top_pieces(scores: Mapping[str, np.ndarray], allowed: np.ndarray) -> dict[str, int | None]:
    """{method: (n,) scores}, (n,) bool pieces that may be ranked -> {method: index of its
    highest-scoring allowed piece}: what each method names as counting most for the output.
    None where no allowed piece scores above 0: the least negative piece still counts against
    the output, so the method names none."""
    tops: dict[str, int | None] = {}
    for name, values in scores.items():
        ranked = np.where(allowed, values, -np.inf)  # (n,)
        best = int(np.argmax(ranked))
        tops[name] = best if ranked[best] > 0 else None
    return tops
