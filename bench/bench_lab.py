"""The training lab's runs against one MiniLM forward pass, timed side by side in one process.

The lab promises a run in well under ~5 s on this machine. Each task's default run (300 Adam
steps) and its slowest offered run (500 steps, d_head 128) are alternated with a forward pass
of the bundled model on a 32-piece sentence, so machine noise hits all alike. Prints the median
times and the ratio run / forward pass; never asserts.

With --scaling it instead trains the lab page's comparison (core.lab.compare: every start ×
seed × task, as the page does, timed) and prints how many runs of each cell were solved
(held-out accuracy ≥ SOLVED_ACCURACY), the mean final weight on the target key, and the story
the page tells for each task.

    python bench/bench_lab.py [--repeats 3] [--scaling [--seeds 12 --d-head 128 --steps 300]]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import core  # noqa: E402
from core import lab  # noqa: E402

SENTENCE = "the river bank flooded and money in the bank grew while time flies like an arrow " * 2


def seconds(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def scaling_table(seeds: int, d_head: int, steps: int, loss: str) -> None:
    """The lab page's comparison: solved runs and mean final weight per start and task."""
    started = time.perf_counter()
    comparison = lab.compare(("previous", "first"), d_head, steps, loss, seeds)
    print(
        f"d_head {d_head}, {steps} steps, {loss}, {seeds} seeds per cell: "
        f"{time.perf_counter() - started:.1f} s wall"
    )
    for task in comparison.tasks:
        for start in lab.STARTS:
            print(
                f"{task:<9} {start.label:<45} {comparison.solved(task, start):>3}/{seeds} "
                f"{comparison.mean_mass(task, start):>7.3f}"
            )
        print(
            f"{task:<9} story: {comparison.verdict(task).story}, early spread growth "
            f"unscaled/scaled from the same start {comparison.growth_ratio(task):.1f}×"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling", action="store_true", help="the page's scaling table")
    parser.add_argument("--seeds", type=int, default=12, help="seeds per cell of that table")
    parser.add_argument("--d-head", type=int, default=128)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--loss", default="squared", choices=["squared", "cross_entropy"])
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the app
    if args.scaling:
        scaling_table(args.seeds, args.d_head, args.steps, args.loss)
        return
    model = core.load_model("minilm")
    n_tokens = model.run(SENTENCE).n_tokens
    for _ in range(3):
        model.run(SENTENCE)  # warm up

    print(f"torch {torch.__version__}, 1 thread, median of {args.repeats}")
    print(f"{'run':<34} {'run s':>7} {'forward ms':>11} {'ratio':>8}")
    for name in lab.TASKS:
        default = lab.Settings(task=name)
        slowest = dataclasses.replace(default, steps=500, d_head=128)
        for label, settings in (
            (f"{name}, default", default),
            (f"{name}, 500 steps, d 128", slowest),
        ):
            run_times, forward_times = [], []
            for _ in range(args.repeats):
                run_times.append(seconds(lambda settings=settings: lab.train_one(settings)))
                forward_times.append(seconds(lambda: model.run(SENTENCE)))
            run_s, forward_s = statistics.median(run_times), statistics.median(forward_times)
            print(f"{label:<34} {run_s:>7.2f} {forward_s * 1e3:>11.1f} {run_s / forward_s:>8.0f}×")
    print(f"(forward pass: {n_tokens} word pieces)")


if __name__ == "__main__":
    main()
