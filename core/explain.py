"""Every method's answer to "which word pieces made this sentence's vector?", side by side.

Each method gives one score per word piece of one sentence (a Trace); the attention-based ones
come from InformationFlow (no target needed), the gradient ones from GradientScores:
- attention: the last layer's weights, averaged over heads and over the query rows (the
  sentence vector is the mean of those rows);
- rollout, flow, norm rollout: the top row of core.rollout's matrices, pooled the same way;
- gradient × input and integrated gradients of a Target (core.saliency).
The attention-based scores explain the sentence's own vector whatever the target; only the
gradient scores know about the other sentence. Rank agreement (Spearman) and the deletion test
(core.saliency.deletion_curves) compare them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from core import rollout, saliency
from core.bert import BertEncoder, Trace

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
class InformationFlow:
    """The attention-based views of one sentence: they need no target and no gradient."""

    last_attention: np.ndarray  # (n, n) last layer's weights, mean over heads
    rolled: np.ndarray  # (L, n, n) attention rollout after every layer
    norm_rolled: np.ndarray  # (L, n, n) norm-based contributions rolled out
    flow: np.ndarray | None  # (n, n) top-layer attention flow, None above MAX_FLOW_PIECES

    def flow_shares(self) -> np.ndarray | None:
        """(n, n) flow with each row divided by its sum, so it reads as shares like rollout.

        A max-flow value is not a share: every input can push up to its narrowest cut to every
        output, so raw rows sum to more than 1.
        """
        if self.flow is None:
            return None
        return self.flow / self.flow.sum(axis=-1, keepdims=True)

    def scores(self) -> dict[str, np.ndarray]:
        """method -> (n,) each input piece's share of the mean-pooled sentence vector."""
        scores = {
            "attention": rollout.to_sentence(self.last_attention),
            "rollout": rollout.to_sentence(self.rolled[-1]),
            "norm": rollout.to_sentence(self.norm_rolled[-1]),
        }
        if self.flow is not None:
            scores["flow"] = rollout.to_sentence(self.flow_shares())
        return scores


def information_flow(model: BertEncoder, trace: Trace) -> InformationFlow:
    """Rollout, norm rollout and (up to rollout.MAX_FLOW_PIECES) flow of one sentence's Trace."""
    mixing = rollout.residual_attention(trace.attentions)  # (L, n, n)
    # kept as float32 (a cached result at 512 pieces: ~13 MB instead of ~27 MB)
    return InformationFlow(
        last_attention=np.asarray(trace.attentions[-1], dtype=np.float64).mean(axis=0),
        rolled=rollout.rollout(mixing).astype(np.float32),
        norm_rolled=rollout.contribution_rollout(model, trace).astype(np.float32),
        flow=rollout.attention_flow(mixing),
    )


@dataclass(frozen=True)
class GradientScores:
    """Gradient × input and integrated gradients of one target, per word piece."""

    grad_x_input: np.ndarray  # (n,)
    integrated_gradients: np.ndarray  # (n,)
    ig_gap: float  # Σ IG − (f(x) − f(baseline)): small when the steps suffice
    ig_steps: int


def gradient_scores(
    model: BertEncoder, trace: Trace, target: saliency.Target, ig_steps: int
) -> GradientScores:
    """Both gradient methods on one sentence's Trace."""
    integrated, gap = saliency.integrated_gradients(model, trace, target, ig_steps)
    return GradientScores(
        saliency.gradient_x_input(model, trace, target), integrated, gap, ig_steps
    )


def side_by_side(flow: InformationFlow, gradients: GradientScores) -> dict[str, np.ndarray]:
    """method -> (n,) scores, in METHOD_LABELS order (flow missing above its limit)."""
    scores = {
        **flow.scores(),
        "grad_x_input": gradients.grad_x_input,
        "integrated_gradients": gradients.integrated_gradients,
    }
    return {name: scores[name] for name in METHOD_LABELS if name in scores}


def average_ranks(values: np.ndarray) -> np.ndarray:
    """(m,) values -> (m,) ranks 1..m, tied values sharing the mean of their ranks.

    Written out rather than imported: scipy.stats costs ~60 MB of server memory to import.
    """
    values = np.asarray(values)
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(1, len(values) + 1)
    _, group = np.unique(values, return_inverse=True)  # ties share a group
    mean_rank = np.bincount(group, weights=ranks) / np.bincount(group)
    return mean_rank[group]


def rank_agreement(scores: Mapping[str, np.ndarray], allowed: np.ndarray) -> np.ndarray:
    """(M, M) Spearman's ρ between every two methods over the allowed pieces (ties averaged).

    ρ is Pearson's correlation of the ranks; NaN where a method gives every piece one score.
    """
    ranks = np.stack([average_ranks(np.asarray(s)[allowed]) for s in scores.values()])  # (M, m)
    centred = ranks - ranks.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(centred, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (centred @ centred.T) / np.outer(norms, norms)


# ---- the deletion test, summarised --------------------------------------------------------------
RANDOM = "random order"


def deletion_rankings(
    scores: Mapping[str, np.ndarray], tokens: tuple[str, ...], seed: int = 0
) -> dict[str, np.ndarray]:
    """method -> removable pieces, highest score first; plus a fixed random order to beat."""
    allowed = saliency.removable(tokens)
    rankings = {name: saliency.ranking(values, allowed) for name, values in scores.items()}
    rankings[RANDOM] = saliency.random_ranking(allowed, seed)
    return rankings


def mean_change(curve: np.ndarray) -> float:
    """A deletion curve's mean move from its start: mean over k ≥ 1 of curve[k] − curve[0]."""
    return float((curve[1:] - curve[0]).mean()) if len(curve) > 1 else 0.0


# Mean cosine changes closer than this count as equal: their curves lie on top of each other.
TIE = 5e-4


def fastest_falls(changes: Mapping[str, float], tie: float = TIE) -> tuple[list[str], bool]:
    """(methods whose deletion curve falls fastest, whether they beat the random order).

    changes: method -> mean_change of its curve, the random order included. Several methods
    are named when they tie (a short sentence leaves them the same pieces to remove). They beat
    the random order only when their mean change is below zero and below the random order's by
    more than a tie: otherwise no method has found what the model uses better than chance.
    """
    methods = {name: change for name, change in changes.items() if name != RANDOM}
    lowest = min(methods.values())
    fastest = [name for name, change in methods.items() if change <= lowest + tie]
    chance = changes.get(RANDOM, 0.0)
    return fastest, lowest < 0 and lowest < chance - tie


def special_share(scores: np.ndarray, tokens: tuple[str, ...]) -> float:
    """The part of a share vector that sits on [CLS] and [SEP]."""
    return float(np.asarray(scores)[~saliency.removable(tokens)].sum())
