"""Where a sentence's meaning comes from: attention, rollout and flow, pooled into one score per
word piece (the numbers behind page 9, Where the meaning comes from).

The sentence vector is the mean of the last layer's token vectors, so every attention-based score
here is pooled over the query rows the same way; core.rollout computes the matrices. None of
them needs a target: they explain the sentence's own vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core import rollout, saliency
from core.transformer import Trace, Transformer


@dataclass(frozen=True)
class InformationFlow:
    """The attention-based views of one sentence: they need no target and no gradient."""

    last_attention: np.ndarray  # (n, n) last layer's weights, mean over heads
    rolled: np.ndarray  # (L, n, n) attention rollout after every layer
    norm_rolled: np.ndarray  # (L, n, n) norm-based contributions rolled out
    flow: np.ndarray | None  # (n, n) top-layer attention flow, None above MAX_FLOW_PIECES
    decoder: bool = False  # read the last position (it predicts the next piece), not the mean

    def flow_shares(self) -> np.ndarray | None:
        """(n, n) flow with each row divided by its sum, so it reads as shares like rollout.

        A max-flow value is not a share: every input can push up to its narrowest cut to every
        output, so raw rows sum to more than 1.
        """
        if self.flow is None:
            return None
        return self.flow / self.flow.sum(axis=-1, keepdims=True)

    def scores(self) -> dict[str, np.ndarray]:
        """method -> (n,) each input piece's share of the mean-pooled sentence vector; for a
        decoder, of the last position's vector, the one that predicts the next piece."""
        readout = _last_row if self.decoder else rollout.to_sentence
        scores = {
            "attention": readout(self.last_attention),
            "rollout": readout(self.rolled[-1]),
            "norm": readout(self.norm_rolled[-1]),
        }
        if self.flow is not None:
            scores["flow"] = readout(self.flow_shares())
        return scores


def _last_row(top: np.ndarray) -> np.ndarray:
    """(n, n) top-layer mixing -> (n,) the last position's row: each input's share of it."""
    return np.asarray(top[-1])


def information_flow(model: Transformer, trace: Trace) -> InformationFlow:
    """Rollout, norm rollout and (up to rollout.MAX_FLOW_PIECES) flow of one sentence's Trace."""
    mixing = rollout.residual_attention(trace.attentions)  # (L, n, n)
    # kept as float32 (a cached result at 512 pieces: ~13 MB instead of ~27 MB)
    return InformationFlow(
        last_attention=np.asarray(trace.attentions[-1], dtype=np.float64).mean(axis=0),
        rolled=rollout.rollout(mixing).astype(np.float32),
        norm_rolled=rollout.contribution_rollout(model, trace).astype(np.float32),
        flow=rollout.attention_flow(mixing),
        decoder=trace.is_decoder,
    )


def share_entropy(shares: np.ndarray) -> tuple[float, float]:
    """(entropy in bits of a share vector with Σ = 1, log2 n: the entropy of an even spread)."""
    p = np.asarray(shares, dtype=np.float64)
    even = float(np.log2(len(p)))
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum()), even


def special_share(
    scores: np.ndarray, tokens: tuple[str, ...], special: tuple[bool, ...] | None = None
) -> float:
    """The part of a share vector that sits on the special pieces ([CLS] and [SEP], <s>, …;
    special: the Trace's mask, else BERT's two by their text)."""
    return float(np.asarray(scores)[~saliency.removable(tokens, special)].sum())
