"""The training lab's runs: one run per settings, and the many-seed comparison, through the door.

A run is a pure function of its settings (core.lab.train is seeded), so a cached run is the same
run a copied link would retrain: opening the page again (it opens on its switches' run) or
reopening a link costs no training, and the steps play in the browser from the run's snapshots.
Training goes through ui.door like every model run: one cache, one admission limit.

The comparison (every start × seed × task, COMPARISON_SEEDS seeds) takes a few seconds of one
core per task, longer on a loaded server: it trains in a background thread, once per server
process and comparison setting, so a visitor can press Train meanwhile (a rerun would otherwise
interrupt it and start it over), and the page polls its progress. Its result lives in the door's
cache like every other result.
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass

from core import lab
from ui import door, widgets

# The run the page opens on, and its switches' first positions. At d_head 128 a 100-step run
# is short, and whether the scores are scaled decides what it learns: the scaled head finds
# every first occurrence, the unscaled one leaves rows on wrong keys (bench/bench_lab.py
# --defaults); at d_head 8 both learn the task alike.
PAGE_DEFAULTS = lab.Settings(task="first", d_head=128, steps=100)
MAX_STEPS = 500  # the longest run the page offers (bench/bench_lab.py times it)
# Seeds per cell of the comparison: 2 tasks × 4 starts × 10 seeds = 80 runs of 300 steps at
# d_head 128, trained side by side: the page's longest wait (bench/bench_lab.py --scaling;
# bench/RESULTS.md, Cited in code). Fewer seeds leave more differences that chance
# could explain (the page then says so): 10 against 5 solved is clear, 10 against 7 is not.
COMPARISON_SEEDS = 10
COMPARISON_TASKS = ("previous", "first")  # the two tasks whose √d_head stories differ
COMPARISON_D_HEADS = (8, 32, 128)
COMPARISON_STEPS = (300, 1000)

_log = logging.getLogger(__name__)


# Snapshots crowd where the probe map moves (core.lab.SNAPSHOT_MOVES): Play spaces its frames
# by those moves (ui/lab_charts.play_indices). The door is told the most a run can keep: a
# snapshot after every update.
@door.shared("training", cost=lambda settings: lab.stack_bytes([settings], settings.steps))
def trained_run(settings: lab.Settings) -> lab.TrainingRun:
    """The run for these settings, trained on a miss with a progress bar (a hit draws none)."""
    with widgets.training_bar(f"Training {settings.steps} steps …", settings.steps) as report:
        return lab.train_one(settings, on_step=report, snapshot_moves=lab.SNAPSHOT_MOVES)


@dataclass(frozen=True)
class ComparisonChoice:
    """What the page lets a visitor choose about the comparison; the rest is fixed here."""

    d_head: int = 128
    steps: int = 300
    loss: str = "squared"

    def runs(self) -> int:
        return len(COMPARISON_TASKS) * len(lab.STARTS) * COMPARISON_SEEDS


def _comparison_bytes(choice: ComparisonChoice, _progress: Progress | None = None) -> int:
    """The tasks' stacks train one after the other: one stack at a time, plus what the earlier
    ones keep."""
    stack = [
        settings
        for start in lab.STARTS
        for settings in lab.comparison_settings(
            COMPARISON_TASKS[0], start, choice.d_head, choice.steps, choice.loss, COMPARISON_SEEDS
        )
    ]
    kept = len(stack) * lab.kept_bytes(stack[0], lab.COMPARISON_SNAPSHOTS)
    return lab.stack_bytes(stack, lab.COMPARISON_SNAPSHOTS) + (len(COMPARISON_TASKS) - 1) * kept


@door.shared("the comparison of many seeds", cost=_comparison_bytes)
def comparison(choice: ComparisonChoice, _progress: Progress | None = None) -> lab.Comparison:
    """Every start × seed × task for this choice (cached; _progress, if given, follows it)."""

    def report(done: int, total: int) -> None:
        if _progress is not None:
            _progress.done, _progress.total = done, total

    return lab.compare(
        COMPARISON_TASKS, choice.d_head, choice.steps, choice.loss, COMPARISON_SEEDS, report
    )


@dataclass
class Progress:
    """How far a comparison training in the background has got (read by any session)."""

    done: int = 0  # updates done, all stacks together
    total: int = 1
    error: str | None = None  # why it stopped, in words a visitor can read
    # The finished result, held weakly: the door's cache keeps it alive, and when the cache lets
    # it go this says so (without a second copy outside the cache's budget).
    result: weakref.ref[lab.Comparison] | None = None

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / max(1, self.total))


_jobs: dict[ComparisonChoice, Progress] = {}  # the latest attempt for each choice
_jobs_lock = threading.Lock()


def comparison_or_progress(
    choice: ComparisonChoice, start: bool = True
) -> lab.Comparison | Progress | None:
    """The comparison if it is trained and cached; otherwise how far its training is, started
    in the background if no one has started it (or the last attempt failed, or the cache has
    since let the result go). start=False: None instead of starting it (the page waits for a
    visitor to ask: ~12 s of a core that a public server should not spend on every visit)."""
    with _jobs_lock:
        progress = _jobs.get(choice)
        if progress is not None and progress.result is not None:
            result = progress.result()
            if result is not None:
                return result
            progress = None  # left the cache: train it again
        if progress is not None and progress.error is None:
            return progress  # under way
        if not start:
            return None
        progress = _jobs[choice] = Progress(total=len(COMPARISON_TASKS) * choice.steps)
    worker = threading.Thread(
        target=_train_comparison, args=(choice, progress), name="lab-comparison", daemon=True
    )
    worker.start()
    return progress


def _train_comparison(choice: ComparisonChoice, progress: Progress) -> None:
    """The background thread: train (or find) the comparison in the door, then say so."""
    try:
        progress.result = weakref.ref(comparison(choice, progress))
    except door.ServerShort as short:
        progress.error = str(short)
    except Exception:  # a thread's exception would vanish: log it, tell the page
        _log.exception("the lab's comparison failed")
        progress.error = "The comparison stopped with an error (the details went to the log)."


def wait_for_comparison(choice: ComparisonChoice) -> lab.Comparison:
    """The comparison, trained in this thread if it is not cached (tests, bench scripts); the
    page then finds it without starting a background run."""
    result = comparison(choice)
    with _jobs_lock:
        _jobs[choice] = Progress(done=1, total=1, result=weakref.ref(result))
    return result
