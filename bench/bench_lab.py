"""The training lab's runs against one MiniLM forward pass, timed side by side in one process.

The lab promises a run in well under ~5 s on this machine. Each task's default run (300 Adam
steps) and its slowest offered run (500 steps, d_head 128) are alternated with a forward pass
of the bundled model on a 32-piece sentence, so machine noise hits all alike. Prints the median
times and the ratio run / forward pass; never asserts.

With --scaling it instead trains the lab page's comparison (core.lab.compare: every start ×
seed × task, as the page does, timed) and prints how many runs of each cell were solved
(held-out accuracy ≥ SOLVED_ACCURACY), the mean final weight on the target key, and the story
the page tells for each task.

With --defaults it trains the run the page opens on (ui.lab_runs.PAGE_DEFAULTS) and the same
run unscaled, for seeds 0 … 9, and prints each one's held-out accuracy and time: the defaults
are chosen so that flipping √d_k changes what is learned.

With --imports it measures, each in a fresh process, what the libraries the lab could use cost
on first use: torch.optim.Adam against torch's functional adam(), and scipy.stats.

    python bench/bench_lab.py [--repeats 3] [--scaling [--seeds 12 --d-head 128 --steps 300]]
    python bench/bench_lab.py --defaults | --imports
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


def page_run(settings: lab.Settings) -> lab.TrainingRun:
    """A run as the lab page trains it (ui/lab_runs.trained_run): its snapshots crowd where
    the probe map moves."""
    return lab.train_one(settings, snapshot_moves=lab.SNAPSHOT_MOVES)


def defaults_table(seeds: int = 10) -> None:
    """The page's opening run, scaled and unscaled, seed by seed."""
    from ui.lab_runs import PAGE_DEFAULTS

    print(f"{PAGE_DEFAULTS}")
    for scale in (True, False):
        accuracies, times = [], []
        for seed in range(seeds):
            settings = dataclasses.replace(PAGE_DEFAULTS, scale=scale, seed=seed)
            started = time.perf_counter()
            run = page_run(settings)
            times.append(time.perf_counter() - started)
            accuracies.append(float(run.eval_accuracy[-1]))
        shown = " ".join(f"{accuracy:.2f}" for accuracy in accuracies)
        print(
            f"{'scaled' if scale else 'unscaled':<9} accuracy per seed {shown}; "
            f"median {statistics.median(times):.2f} s a run"
        )


# Each snippet runs in a fresh interpreter after the lab's own imports; it prints the modules
# and resident memory its first use added, and the seconds it took.
FIRST_USE = {
    "torch.optim.Adam": "p = torch.zeros(3, requires_grad=True); "
    "o = torch.optim.Adam([p], lr=0.1); p.grad = torch.ones(3); o.step()",
    "torch.optim.adam.adam": "from torch.optim.adam import adam; "
    "adam([torch.zeros(3)], [torch.ones(3)], [torch.zeros(3)], [torch.zeros(3)], [], "
    "[torch.tensor(0.0)], foreach=False, capturable=False, differentiable=False, fused=None, "
    "grad_scale=None, found_inf=None, has_complex=False, amsgrad=False, beta1=0.9, "
    "beta2=0.999, lr=0.1, weight_decay=0.0, eps=1e-8, maximize=False)",
    "scipy.stats": "from scipy.stats import fisher_exact, rankdata; "
    "fisher_exact([[3, 7], [9, 1]], alternative='greater'); rankdata([1, 2, 2])",
}
MEASURE_FIRST_USE = """
import sys, time
sys.path.insert(0, {root!r})
import torch
import core.lab
def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmRSS")) / 1024
before_mb, before_modules, started = rss_mb(), len(sys.modules), time.perf_counter()
{snippet}
print(f"{{time.perf_counter() - started:.2f}} s, +{{len(sys.modules) - before_modules}} modules, "
      f"+{{rss_mb() - before_mb:.0f}} MB resident; torch._dynamo loaded: "
      f"{{'torch._dynamo' in sys.modules}}")
"""


def imports_table() -> None:
    """What each library call costs the first time a server process makes it."""
    import subprocess

    root = str(Path(__file__).resolve().parent.parent)
    for name, snippet in FIRST_USE.items():
        code = MEASURE_FIRST_USE.format(root=root, snippet=snippet)
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        print(f"{name:<24} {result.stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling", action="store_true", help="the page's scaling table")
    parser.add_argument("--defaults", action="store_true", help="the page's opening run")
    parser.add_argument("--imports", action="store_true", help="libraries' first-use cost")
    parser.add_argument("--seeds", type=int, default=12, help="seeds per cell of that table")
    parser.add_argument("--d-head", type=int, default=128)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--loss", default="squared", choices=["squared", "cross_entropy"])
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the app
    if args.scaling:
        scaling_table(args.seeds, args.d_head, args.steps, args.loss)
        return
    if args.defaults:
        defaults_table()
        return
    if args.imports:
        imports_table()
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
                run_times.append(seconds(lambda settings=settings: page_run(settings)))
                forward_times.append(seconds(lambda: model.run(SENTENCE)))
            run_s, forward_s = statistics.median(run_times), statistics.median(forward_times)
            print(f"{label:<34} {run_s:>7.2f} {forward_s * 1e3:>11.1f} {run_s / forward_s:>8.0f}×")
    print(f"(forward pass: {n_tokens} word pieces)")


if __name__ == "__main__":
    main()
