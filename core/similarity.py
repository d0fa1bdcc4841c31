"""A sentence as one vector, and how similar two sentences are.

all-MiniLM-L6-v2 was trained for this: average the top layer's token vectors (every token,
[CLS] and [SEP] included: mean pooling) and scale the average to length 1. The cosine of two
such vectors is the model's answer to "do these sentences mean the same?".
"""

from __future__ import annotations

import numpy as np

from core.positional import cosine, unit_rows
from core.transformer import Trace


def mean_pooled(last_hidden: np.ndarray) -> np.ndarray:
    """(n, d_model) top-layer token vectors -> (d_model,) their mean."""
    return np.asarray(last_hidden, dtype=np.float64).mean(axis=0)


def sentence_embedding(trace: Trace) -> np.ndarray:
    """(d_model,) the sentence embedding: mean of the top layer's rows, scaled to length 1."""
    return unit_rows(mean_pooled(trace.hidden_states[-1])[None])[0]


def sentence_similarity(first: Trace, second: Trace) -> float:
    """Cosine of two sentences' embeddings (each sentence run on its own, as in training)."""
    # core.positional.cosine; the clip keeps rounding of two unit vectors inside [-1, 1]
    return float(np.clip(cosine(sentence_embedding(first), sentence_embedding(second)), -1.0, 1.0))


# Built-in pairs a learner can start from: (label, sentence A, sentence B).
EXAMPLE_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("paraphrase", "A man is playing a guitar.", "Someone strums an acoustic guitar."),
    (
        "same words, other meaning",
        "The dog bit the man.",
        "The man bit the dog.",
    ),
    ("same word, other sense", "She sat on the river bank.", "She paid the cheque at the bank."),
    ("unrelated", "The stock market fell sharply today.", "My cat sleeps on the warm windowsill."),
)
