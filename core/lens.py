"""Lenses: how early does each vector, and the sentence, settle on its final meaning?

The encoder lens (MiniLM has no output head) compares every layer with the last one: each
token's cosine to its own final vector, the mean-pooled layer state's cosine to the final
sentence embedding, and (through the input word-piece table, which BERT also uses as its output
table) the nearest word pieces of a token at every layer, via core.embeddings.nearest_words.

A decoder's logit lens (nostalgebraist, 2020) reads every layer's vector at one position through
the model's own final norm and output head, as if the layers above were skipped: the next
pieces that vector would predict. It is a reading of the stream, not what the model computes at
that layer (the layers above do more than pass the vector on); the last layer's reading is the
model's real prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.embeddings import nearest_words
from core.positional import cosine, unit_rows
from core.transformer import Transformer


def token_settling(hidden_states: np.ndarray) -> np.ndarray:
    """(L + 1, n, d) -> (L + 1, n): cos(h_l[i], h_L[i]), each token against its final vector."""
    n_states, n, d = hidden_states.shape
    final = np.broadcast_to(hidden_states[-1], (n_states, n, d)).reshape(-1, d)
    # (L + 1, n, d) -> ((L + 1)·n, d): one row per (state, token), then back
    return cosine(hidden_states.reshape(-1, d), final).reshape(n_states, n)


def sentence_settling(hidden_states: np.ndarray) -> np.ndarray:
    """(L + 1, n, d) -> (L + 1,): cos(mean_i h_l[i], final sentence embedding)."""
    pooled = unit_rows(hidden_states.astype(np.float64).mean(axis=1))  # (L + 1, d)
    return np.clip(pooled @ pooled[-1], -1.0, 1.0)


def similarity_by_layer(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """(L + 1, n_a, d), (L + 1, n_b, d) -> (L + 1,): cos of the two mean-pooled states per state.

    The last entry is the two sentences' similarity; the earlier ones say where it emerges.
    """
    pooled_first = unit_rows(first.astype(np.float64).mean(axis=1))  # (L + 1, d)
    pooled_second = unit_rows(second.astype(np.float64).mean(axis=1))
    return np.clip(np.einsum("ld,ld->l", pooled_first, pooled_second), -1.0, 1.0)


def nearest_by_layer(
    hidden_states: np.ndarray,
    token: int,
    unit_table: np.ndarray,
    allowed: np.ndarray | None = None,
    k: int = 5,
) -> tuple[np.ndarray, np.ndarray]:
    """(L + 1, k) ids and cosines of the word pieces nearest one token's vector at every state."""
    return nearest_words(hidden_states[:, token], unit_table, k, allowed)


@dataclass(frozen=True)
class LogitLens:
    """A decoder's next-piece readings of one position at every state, embeddings to the top."""

    position: int  # the Trace position read
    ids: np.ndarray  # (L + 1, k) each state's k likeliest next pieces, likeliest first
    probabilities: np.ndarray  # (L + 1, k) their probabilities
    final_ids: np.ndarray  # (k,) the top state's k likeliest: the model's own prediction
    final_probabilities: np.ndarray  # (L + 1, k) each state's probability of those pieces


@torch.inference_mode()
def logit_lens(
    model: Transformer, hidden_states: np.ndarray, position: int, k: int = 5
) -> LogitLens:
    """(L + 1, n, d) states of a decoder's Trace -> the logit lens at one position.

    State l is read as model.logits does the last one: final norm, then the output head, then a
    softmax over the whole vocabulary (L + 1 rows of vocab scores, one position: small).
    """
    states = torch.from_numpy(np.array(hidden_states[:, position], dtype=np.float32))  # (L+1, d)
    log_probs = torch.log_softmax(model.logits(states).double(), dim=-1)  # (L + 1, vocab)
    top = log_probs.topk(min(k, log_probs.shape[-1]), dim=-1)  # (L + 1, k)
    final_ids = top.indices[-1]  # (k,)
    return LogitLens(
        position=position,
        ids=top.indices.numpy(),
        probabilities=top.values.exp().numpy(),
        final_ids=final_ids.numpy(),
        final_probabilities=log_probs[:, final_ids].exp().numpy(),  # (L + 1, k)
    )
