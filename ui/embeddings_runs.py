"""Page 8's cached results (core/embeddings.py), through the one door (ui/door.py)."""

from __future__ import annotations

import numpy as np

from core import embeddings
from ui import door


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
