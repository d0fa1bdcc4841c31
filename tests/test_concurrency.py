"""One model shared by many browser sessions: parallel calls equal serial ones, and never raise."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

WORDS = "the river bank flooded while money in the bank grew and time flies like an arrow".split()


def _text(i: int) -> tuple[str, str | None]:
    """Mixed lengths (2 to ~120 pieces) and every third call a sentence pair."""
    length = 2 + (i * 37) % 120
    text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(length))
    return text, ("fruit flies like a banana " * (i % 4) if i % 3 == 0 else None)


def test_sixteen_threads_match_serial_runs(model):
    # 40 inputs (2 to 115 word pieces, every third with a pair), each run 16 times by 16 threads
    # at once (640 calls): every result equals its serial run bit for bit.
    jobs = [_text(i) for i in range(40)]
    serial = [model.run(*job).hidden_states[-1] for job in jobs]

    def work(i: int) -> tuple[int, np.ndarray]:
        return i, model.run(*jobs[i % len(jobs)]).hidden_states[-1]

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(work, range(16 * len(jobs))))
    assert len(results) == 16 * len(jobs)
    for i, last_hidden in results:
        np.testing.assert_array_equal(last_hidden, serial[i % len(jobs)])
