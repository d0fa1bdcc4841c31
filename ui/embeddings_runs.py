"""The Embedding projections page's runs: the Traces of many sentences gathered into one point
set, and its projections (PCA, t-SNE), each computed once through ui.door and shared read-only by
every session.
"""

from __future__ import annotations

import numpy as np

import core
from core import embeddings
from ui import cut_notice, door, traces
from ui.models import load_model

# The work one projection request may ask for: word pieces summed over its sentences. Each
# sentence is a forward pass, and t-SNE's time grows faster than the number of points.
PROJECTION_PIECES = 2_048


def within_projection_budget(
    model: core.Transformer, sentences: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The first sentences whose word pieces add up to at most PROJECTION_PIECES, and a note on
    the lines left out (none when every sentence fits)."""
    total = 0
    for number, sentence in enumerate(sentences, start=1):
        total += door.pieces(model, sentence)
        if total > PROJECTION_PIECES:
            note = (
                f"Lines {number} to {len(sentences)} are left out: one projection reads at most "
                f"{PROJECTION_PIECES:,} word pieces, and the lines above already have "
                f"{total - door.pieces(model, sentence):,}."
            )
            return sentences[: number - 1], (note,)
    return sentences, ()


def _points_cost(model_name: str, sentences: tuple[str, ...], **_: object) -> int:
    # Each sentence's Trace is a run of its own through the door (costed there); kept here are
    # its rows, static and (L + 1) hidden, float32, and once more while they are stacked.
    model = load_model(model_name)
    kept, _notes = within_projection_budget(model, sentences)
    n_pieces = sum(door.pieces(model, sentence) for sentence in kept)
    return 2 * 4 * (model.n_layers + 2) * n_pieces * model.d_model


@door.shared("the projection's runs", cost=_points_cost)
def _cached_points(
    model_name: str, sentences: tuple[str, ...], scale: bool, causal: bool
) -> tuple[object, tuple[str, ...]]:
    # One PointSet per (sentences, switches): moving a slider must not rerun a dozen Traces.
    from core.embeddings import TraceRows, gather_points

    model = load_model(model_name)
    sentences, notes = within_projection_budget(model, sentences)
    rows, kept, notes = [], [], list(notes)
    for number, sentence in enumerate(sentences, start=1):
        try:
            result = traces.trace(model, sentence, None, scale=scale, causal=causal)
        except core.EmptyInput:
            notes.append(f"Line {number} holds no readable characters and is skipped.")
            continue
        if result.truncated:
            end = cut_notice.ends_on(result.tokens, None, result.piece_scheme, result.special)
            notes.append(f"Line {number} is cut to {model.max_positions} word pieces: {end}.")
        rows.append(TraceRows.of(result))  # not the Trace: its attention blocks can go
        kept.append(sentence)
    return gather_points(rows, kept), tuple(notes)


def point_set(
    model: core.Transformer, sentences: tuple[str, ...], *, scale: bool, causal: bool
) -> tuple[object, tuple[str, ...]]:
    """Cached core.embeddings.PointSet of several sentences' Traces, and notes on lines left out
    (past PROJECTION_PIECES, unreadable, or cut to the model's positions)."""
    return _cached_points(model.name, tuple(sentences), scale, causal)


def _projection_cost(vectors: np.ndarray, n_components: int, **_: object) -> int:
    # PCA or t-SNE's start: the points in float64, centred, and the SVD's (m, d) factor; t-SNE's
    # neighbour graph (3 x perplexity neighbours a point, float64 and ids) and its (m, c) steps
    from core.embeddings import TSNE_PERPLEXITY  # sklearn's import waits for a first projection

    m, d = vectors.shape
    neighbours = 3 * int(TSNE_PERPLEXITY) + 1
    return 8 * (3 * m * d + 2 * m * neighbours + 4 * m * n_components)


@door.shared("a projection", cost=_projection_cost, spinner="Projecting …")
def projection(vectors: object, method: str, n_components: int, ids: object = None) -> object:
    """Cached core.embeddings projection of (m, d) vectors (t-SNE takes seconds)."""
    from core.embeddings import project, project_unique

    if ids is not None:
        return project_unique(vectors, ids, method, n_components)
    return project(vectors, method, n_components)


def _paths_cost(hidden: np.ndarray, **_: object) -> int:
    # float64 directions and their centred copy, (L + 1, m, d) each, while the plane is fitted
    return 2 * int(np.asarray(hidden).size) * 8


@door.shared("the paths' projection", cost=_paths_cost)
def trajectory_projection(
    hidden: np.ndarray, followed: np.ndarray, n_components: int
) -> np.ndarray:
    """Cached core.embeddings.trajectories: (L + 1, m, d) -> (L + 1, m, c), one plane fitted on
    the followed occurrences' directions at every state."""
    return embeddings.trajectories(hidden, followed, n_components)
