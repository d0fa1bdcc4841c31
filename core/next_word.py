"""What a decoder predicts next, and what each switch of a run does to that prediction.

A decoder's last position has read the whole text; its vector, through the final norm and the
output head, gives every piece of the vocabulary a probability of coming next. The switches of
a run (√d_k scaling, the causal mask, the positions, removed heads) act inside every layer, so
each one moves that distribution. Here each switched run is compared with the run as trained:
the probability it gives the trained model's top pieces, its own top pieces, and the total
variation distance ½ Σ_v |p(v) − p_trained(v)| over the whole vocabulary (0: the same
prediction, 1: no piece in common).

A run here keeps no Trace: forward_from_word_vectors holds one layer's scores at a time, which
is all a prediction needs (a Trace of GPT-2 small at 512 pieces holds ~150 MB of attention).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.transformer import Transformer


@torch.inference_mode()
def next_log_probs(
    model: Transformer,
    text: str,
    pair: str | None = None,
    *,
    scale: bool = True,
    causal: bool | None = None,
    positions: bool = True,
    ablate: frozenset[tuple[int, int]] | set | tuple = frozenset(),
) -> np.ndarray:
    """(vocab,) float32 log p(next piece | text) after the last piece, one run with these
    switches (causal None: the model's nature). ValueError for an encoder (no head to read),
    EmptyInput for a text without pieces."""
    if not model.is_decoder:
        raise ValueError(f"{model.name} is an encoder: it predicts no next word piece")
    encoded = model.encode(text, pair)
    input_ids = torch.tensor(encoded.input_ids, dtype=torch.long)  # (n,)
    segments = torch.tensor(encoded.segments, dtype=torch.long)  # (n,)
    word_vectors = model.word_embeddings[input_ids][None]  # (1, n, d_model): a batch of one
    last_hidden = model.forward_from_word_vectors(
        word_vectors,
        segments,
        scale=scale,
        causal=causal,
        positions=positions,
        ablate=ablate,
        input_ids=input_ids,
    )  # (1, n, d_model)
    logits = model.logits(last_hidden[0, -1]).double()  # (vocab,)
    log_probs = torch.log_softmax(logits, dim=-1).float().numpy()
    log_probs.setflags(write=False)  # cached and shared by every session
    return log_probs


def top_k(log_probs: np.ndarray, k: int) -> np.ndarray:
    """(k,) vocabulary rows of the k likeliest pieces, likeliest first (ties: lower row first)."""
    k = min(k, len(log_probs))
    rows = np.argpartition(-log_probs, k - 1)[:k]
    return rows[np.lexsort((rows, -log_probs[rows]))]


def total_variation(log_p: np.ndarray, log_q: np.ndarray) -> float:
    """½ Σ_v |p(v) − q(v)| of two distributions given as log-probabilities, in [0, 1]."""
    p = np.exp(np.asarray(log_p, dtype=np.float64))
    q = np.exp(np.asarray(log_q, dtype=np.float64))
    return float(np.clip(0.5 * np.abs(p - q).sum(), 0.0, 1.0))


@dataclass(frozen=True)
class SwitchedPrediction:
    """One run's next-piece prediction beside the run as trained."""

    label: str  # what the run changed ("as trained" for the baseline itself)
    top_ids: np.ndarray  # (k,) its own likeliest pieces
    top_probabilities: np.ndarray  # (k,)
    trained_top_id: int  # the trained run's likeliest piece
    trained_top_probability: float  # p this run gives that piece
    total_variation: float  # ½ Σ_v |p(v) − p_trained(v)| over the whole vocabulary

    @property
    def same_top(self) -> bool:
        """The run's likeliest piece is the trained run's likeliest piece."""
        return int(self.top_ids[0]) == self.trained_top_id


def compare_runs(
    trained: np.ndarray, switched: Mapping[str, np.ndarray], k: int = 5
) -> list[SwitchedPrediction]:
    """The trained run's prediction, then each switched run's beside it (log-probs (vocab,))."""
    trained_top = int(top_k(trained, 1)[0])
    out = []
    for label, log_probs in {"as trained": trained, **switched}.items():
        rows = top_k(log_probs, k)
        out.append(
            SwitchedPrediction(
                label=label,
                top_ids=rows,
                top_probabilities=np.exp(log_probs[rows].astype(np.float64)),
                trained_top_id=trained_top,
                trained_top_probability=float(np.exp(np.float64(log_probs[trained_top]))),
                total_variation=total_variation(trained, log_probs),
            )
        )
    return out


def prediction_grid(runs: Sequence[np.ndarray], k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Columns to compare runs on: the first run's k likeliest pieces, then each other run's
    likeliest piece not yet among them; and (runs, columns) the probability each run gives each.
    """
    columns = list(top_k(runs[0], k))
    for log_probs in runs[1:]:
        first = int(top_k(log_probs, 1)[0])
        if first not in columns:
            columns.append(first)
    ids = np.array(columns, dtype=np.int64)  # (m,)
    probabilities = np.exp(np.stack([run[ids] for run in runs]).astype(np.float64))  # (runs, m)
    return ids, probabilities
