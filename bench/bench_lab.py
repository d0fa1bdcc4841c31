"""The training lab's runs against one MiniLM forward pass, timed side by side in one process.

The lab promises a run in well under ~5 s on this machine. Each task's default run (300 Adam
steps) and its slowest offered run (500 steps, d_head 128) are alternated with a forward pass
of the bundled model on a 32-piece sentence, so machine noise hits all alike. Prints the median
times and the ratio run / forward pass; never asserts.

With --scaling it instead repeats the measurement the lab page quotes: for every task, d_head 8
and 128, scaled and unscaled, seeds 0-9, 300 steps, it prints how many runs were solved
(held-out accuracy ≥ 99 %) and the mean final weight on the target key, for both losses.

    python bench/bench_lab.py [--repeats 3] [--scaling]
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


def scaling_table(seeds: range) -> None:
    """Solved runs and mean final weight on the target, scaled against unscaled."""
    print(f"{'loss':<14} {'task':<9} {'d_head':>6} {'scaled':>8} {'solved':>7} {'weight':>7}")
    for loss, widths in (("squared", (8, 128)), ("cross_entropy", (128,))):
        for name in lab.TASKS:
            for d_head in widths:
                for scale in (True, False):
                    runs = [
                        lab.train(lab.Settings(name, d_head, scale, seed=seed, loss=loss))
                        for seed in seeds
                    ]
                    solved = sum(run.eval_accuracy[-1] >= 0.99 for run in runs)
                    weight = statistics.mean(float(run.eval_mass[-1]) for run in runs)
                    print(
                        f"{loss:<14} {name:<9} {d_head:>6} {str(scale):>8} "
                        f"{solved:>4}/{len(runs)} {weight:>7.3f}",
                        flush=True,
                    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling", action="store_true", help="the page's scaling table")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per cell of that table")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the app
    if args.scaling:
        scaling_table(range(args.seeds))
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
                run_times.append(seconds(lambda settings=settings: lab.train(settings)))
                forward_times.append(seconds(lambda: model.run(SENTENCE)))
            run_s, forward_s = statistics.median(run_times), statistics.median(forward_times)
            print(f"{label:<34} {run_s:>7.2f} {forward_s * 1e3:>11.1f} {run_s / forward_s:>8.0f}×")
    print(f"(forward pass: {n_tokens} word pieces)")


if __name__ == "__main__":
    main()
