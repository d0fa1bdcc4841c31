"""Do the fast tests notice wrong math? Mutate core/ by operators over its syntax tree and see.

Each mutant changes one thing inside one function of core/: a + becomes -, a comparison is
negated, a transpose or a minus sign is dropped, a scale (the right side of * or /) is dropped,
the operands of @ swap, a reduction reads another axis or becomes another reduction (sum/mean,
max/min, log/log2, tril/triu), a slice bound moves by one, `and` becomes `or`. The operators
live in OPERATORS below; the mutants are generated from the code as it is, so they follow every
refactor instead of going stale as hand-written text replacements did.

The script copies core/, ui/, views/ and tests/ to a temporary directory, writes one mutant at a
time into the copy and runs, in this process (torch is imported once), tests with `pytest -x`:
the files that import the mutated module, then, for a mutant they leave alive, every other test
file that imports core/. Each group first runs once on the unmutated copy; a test failing there
is left out of every mutant's run, and named. Browser tests and tests that drive a page through
AppTest are deselected (they check what a page shows, and cost seconds each). A test taking longer than --test-timeout counts as a kill (a mutant that
makes a loop endless). The working tree is never touched. It prints which mutants survived: a
survivor is either a gap in the tests or a change that cannot alter any result (equivalent);
the line and the change are printed for a person to judge.

Why its own operators and not mutmut or cosmic-ray (both maintained, both on PyPI, neither tried
here): they mutate every operator, number and string constant of a file, messages and labels
included. For core/ that is more than twice as many starting points as the operators below make
(`--count` prints both), most of them in text no test should pin, and every survivor asks a person
to judge it. The question here is narrower: would the fast tests notice wrong math? So the
operators are the mistakes math code makes. Whichever tool, a whole run of core/ takes hours on
two cores (a mutant costs up to minutes of tests: bench/RESULTS.md, Mutation check), so this
stays a bench run by hand, never a CI step; `--only` and `--sample` keep a run short. It
prints, never asserts.

    python bench/mutation_check.py --only attention.py          # one module
    python bench/mutation_check.py --only rollout --sample 40   # 40 of rollout.py's, seeded
    python bench/mutation_check.py --list --only attention.py   # the mutants, no tests run
    python bench/mutation_check.py --count                      # mutants per module and operator
    python bench/mutation_check.py                              # every mutant (hours)
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"


@dataclass(frozen=True)
class Mutant:
    file: str  # under core/
    line: int
    function: str  # the enclosing function's qualified name
    operator: str
    old: str  # the source segment replaced
    new: str  # its replacement
    start: int  # byte offsets of the segment in the file
    end: int

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.new.encode() + source[self.end :]

    def describe(self) -> str:
        old, new = (" ".join(text.split()) for text in (self.old, self.new))
        short = lambda text: text if len(text) <= 60 else text[:57] + "..."  # noqa: E731
        return f"{self.file}:{self.line} {self.function} [{self.operator}] {short(old)} -> {short(new)}"


# ---- operators: each takes a node and its source text, and returns replacements for it ---------

SWAP_BINOP = {ast.Add: "-", ast.Sub: "+", ast.Mult: "/", ast.Div: "*"}
NEGATED = {
    ast.Lt: ">=",
    ast.GtE: "<",
    ast.Gt: "<=",
    ast.LtE: ">",
    ast.Eq: "!=",
    ast.NotEq: "==",
    ast.Is: "is not",
    ast.IsNot: "is",
    ast.In: "not in",
    ast.NotIn: "in",
}
OTHER_REDUCTION = {
    "sum": "mean",
    "mean": "sum",
    "max": "min",
    "min": "max",
    "amax": "amin",
    "amin": "amax",
    "argmax": "argmin",
    "argmin": "argmax",
    "log": "log2",
    "log2": "log",
    "tril": "triu",
    "triu": "tril",
    "softmax": "log_softmax",
}
# Calls whose first positional argument, or `axis=` / `dim=`, names an axis.
AXIS_CALLS = {
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "softmax", "log_softmax",
    "cumsum", "prod", "std", "var", "logsumexp", "norm", "unsqueeze", "squeeze", "expand_dims",
    "flip", "roll", "concatenate", "cat", "stack", "take_along_dim", "gather", "split",
}  # fmt: skip
TRANSPOSES = {"transpose", "swapaxes", "permute", "moveaxis"}

Replacement = tuple[ast.AST, str]  # the node whose source is replaced, and the new source


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _other_axis(node: ast.expr) -> str | None:
    """-1 -> -2, -2 -> -1, 0 -> 1, k -> k - 1: the neighbouring axis of an int constant."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = getattr(node.operand, "value", None)
        value = -inner if isinstance(inner, int) else None
    else:
        value = getattr(node, "value", None) if isinstance(node, ast.Constant) else None
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return str(-2 if value == -1 else -1 if value < 0 else 1 if value == 0 else value - 1)


def arith(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """+ <-> -, * <-> / (also in +=, -=, *=, /=)."""
    if isinstance(node, ast.BinOp) and type(node.op) in SWAP_BINOP:
        yield node, f"({seg(node.left)} {SWAP_BINOP[type(node.op)]} ({seg(node.right)}))"


def drop_scale(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """a * s -> a and a / s -> a: a scale or a normaliser forgotten."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Mult | ast.Div):
        return
    if not isinstance(node.right, ast.Constant) or node.right.value not in (1, 1.0):
        yield node, f"({seg(node.left)})"


def matmul_swap(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """a @ b -> b @ a."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        yield node, f"(({seg(node.right)}) @ ({seg(node.left)}))"


def power(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """a ** c -> a ** (c + 1): a wrong exponent."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        yield node, f"({seg(node.left)} ** (({seg(node.right)}) + 1))"


def negate_sign(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """-x -> x, not x -> x."""
    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.Not)
    if negated and not isinstance(node.operand, ast.Constant):  # -1 as an axis is axis's job
        yield node, f"({seg(node.operand)})"


def compare(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """a < b -> a >= b and the like: a comparison negated."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in NEGATED:
        left, right = seg(node.left), seg(node.comparators[0])
        yield node, f"({left} {NEGATED[type(node.ops[0])]} {right})"


def boolean(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """and <-> or."""
    if isinstance(node, ast.BoolOp):
        joiner = " or " if isinstance(node.op, ast.And) else " and "
        yield node, "(" + joiner.join(f"({seg(value)})" for value in node.values) + ")"


def transpose(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """x.T -> x, x.transpose(a, b) -> x, x.permute(..., a, b) -> x.permute(..., b, a)."""
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        yield node, f"({seg(node.value)})"
    if not isinstance(node, ast.Call) or _call_name(node) not in TRANSPOSES:
        return
    func = node.func
    if _call_name(node) == "permute" and isinstance(func, ast.Attribute) and len(node.args) >= 2:
        axes = [seg(arg) for arg in node.args]
        axes[-2], axes[-1] = axes[-1], axes[-2]
        yield node, f"{seg(func.value)}.permute({', '.join(axes)})"
    elif isinstance(func, ast.Attribute) and not _is_module(func.value):
        yield node, f"({seg(func.value)})"  # the method's receiver, untransposed
    elif node.args:
        yield node, f"({seg(node.args[0])})"  # np.swapaxes(x, ...), torch.transpose(x, ...)


def _is_module(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("np", "torch", "F", "math", "scipy")


def axis(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """A reduction, softmax or reshaping call reads the neighbouring axis."""
    if not isinstance(node, ast.Call) or _call_name(node) not in AXIS_CALLS:
        return
    for keyword in node.keywords:
        if keyword.arg in ("axis", "dim") and (other := _other_axis(keyword.value)) is not None:
            yield keyword.value, other
    receiver_is_array = isinstance(node.func, ast.Attribute) and not _is_module(node.func.value)
    if receiver_is_array and node.args and (other := _other_axis(node.args[0])) is not None:
        yield node.args[0], other


def reduction(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """sum <-> mean, max <-> min, argmax <-> argmin, log <-> log2, tril <-> triu, softmax ->
    log_softmax: the name of the call replaced, its arguments kept."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        other = OTHER_REDUCTION.get(node.func.attr)
        if other is not None:
            yield node.func, f"{seg(node.func.value)}.{other}"


def off_by_one(node: ast.AST, seg: Callable[[ast.AST], str]) -> Iterator[Replacement]:
    """x[a:b] -> x[a + 1:b] or x[a:b + 1]: a slice bound moved by one."""
    if isinstance(node, ast.Slice):
        for bound in (node.lower, node.upper):
            if bound is not None:
                yield bound, f"(({seg(bound)}) + 1)"


OPERATORS: dict[str, Callable[[ast.AST, Callable[[ast.AST], str]], Iterator[Replacement]]] = {
    "arith": arith,
    "drop_scale": drop_scale,
    "matmul_swap": matmul_swap,
    "power": power,
    "negate": negate_sign,
    "compare": compare,
    "boolean": boolean,
    "transpose": transpose,
    "axis": axis,
    "reduction": reduction,
    "off_by_one": off_by_one,
}


# ---- where mutants are made: inside functions, never in messages, annotations or decorators ---


def _skipped_subtrees(function: ast.AST) -> set[int]:
    """ids of nodes never mutated: f-strings, raise and assert statements (messages), annotations,
    decorators and nested definitions (they are visited as functions of their own)."""
    skipped: set[int] = set()
    for node in ast.walk(function):
        parts: list[ast.AST] = []
        if isinstance(node, ast.JoinedStr | ast.Raise | ast.Assert):
            parts = [node]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if node is not function and not isinstance(node, ast.Lambda):
                parts = [node]
            elif not isinstance(node, ast.Lambda):
                parts = [*node.decorator_list, *([node.returns] if node.returns else [])]
                parts += [
                    arg.annotation
                    for arg in ast.walk(node.args)
                    if getattr(arg, "annotation", None)
                ]
                parts += [d for d in node.args.defaults + node.args.kw_defaults if d is not None]
        elif isinstance(node, ast.AnnAssign):
            parts = [node.annotation]
        for part in parts:
            skipped.update(id(child) for child in ast.walk(part))
    return skipped


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of every function and method, nested ones too."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield prefix + child.name, child
                yield from visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")

    return visit(tree, "")


def mutants_of(path: Path, operators: list[str]) -> list[Mutant]:
    """Every mutant the operators make of one core/ file, each compiling, each a real change."""
    source = path.read_bytes()
    tree = ast.parse(source)
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def span(node: ast.AST) -> tuple[int, int]:  # ast's columns are UTF-8 byte offsets
        return (
            line_starts[node.lineno - 1] + node.col_offset,
            line_starts[node.end_lineno - 1] + node.end_col_offset,
        )

    def seg(node: ast.AST) -> str:
        start, end = span(node)
        return source[start:end].decode()

    found: dict[tuple[int, int, str], Mutant] = {}
    for qualname, function in _functions(tree):
        skipped = _skipped_subtrees(function)
        for node in ast.walk(function):
            if id(node) in skipped or node is function:
                continue
            for name in operators:
                for target, new in OPERATORS[name](node, seg):
                    start, end = span(target)
                    old = source[start:end].decode()
                    key = (start, end, new)
                    if new == old or key in found:
                        continue
                    mutant = Mutant(path.name, target.lineno, qualname, name, old, new, start, end)
                    try:
                        compile(mutant.apply(source), str(path), "exec")
                    except SyntaxError:
                        continue
                    found[key] = mutant
    return sorted(found.values(), key=lambda m: (m.start, m.operator, m.new))


def every_literal_and_operator(path: Path) -> int:
    """What a tool that mutates every operator, comparison, number, string and keyword constant
    would start from: their count in the file (one mutant each at least)."""
    kinds = (ast.BinOp, ast.AugAssign, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Constant)
    return sum(isinstance(node, kinds) for node in ast.walk(ast.parse(path.read_text())))


# ---- running the tests against a mutant ---------------------------------------------------------

# The copy's own conftest: no shrinking of a failing property (the failure is all we need), a
# test that hangs counts as failed, and the page and browser tests are left out.
COPY_CONFTEST = """
import signal

import pytest
from hypothesis import Phase, settings

settings.register_profile("mutants", phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("mutants")
TEST_TIMEOUT = {timeout}
PAGE_NAMES = {{"run_page", "AppTest", "open_tab", "each_tab", "chromium"}}


class MutantHung(Exception):
    pass


def _hung(signum, frame):
    raise MutantHung(f"no result in {{TEST_TIMEOUT}} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _names(code) -> set:
    return set(code.co_names + code.co_varnames) if code is not None else set()


# A browser test, or one that runs a page: by its own names or those of a helper in its module.
def _drives_a_page(item) -> bool:
    if item.get_closest_marker("browser") or {{"server", "browser"}} & set(item.fixturenames):
        return True
    names = _names(getattr(getattr(item, "function", None), "__code__", None))
    helpers = [getattr(getattr(item.module, name, None), "__code__", None) for name in names]
    return bool(PAGE_NAMES & names) or any(PAGE_NAMES & _names(code) for code in helpers)


def pytest_collection_modifyitems(config, items):
    pages = [item for item in items if _drives_a_page(item)]
    if pages:
        config.hook.pytest_deselected(items=pages)
        items[:] = [item for item in items if not _drives_a_page(item)]
"""


def tests_of(module: str, test_files: list[Path]) -> list[Path]:
    """The test files that import core/<module> (by name), the ones to run first."""
    stem = re.escape(module.removesuffix(".py"))
    pattern = re.compile(
        rf"from core(\.{stem})? import[^\n]*\b{stem}\b|core\.{stem}\b|from core\.{stem} import"
    )
    return [path for path in test_files if pattern.search(path.read_text())]


def test_stages(module_tests: list[Path], test_files: list[Path]) -> list[list[Path]]:
    """The files that import the mutated module first; a mutant they leave alive then meets every
    other test file that imports core/ (the forward path reaches most modules indirectly)."""
    rest = [path for path in test_files if path not in module_tests]
    return [stage for stage in (module_tests, rest) if stage]


class Failures:
    """A pytest plugin that keeps the ids of the tests that failed."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed:
            self.ids.append(report.nodeid)


def run_tests(
    workdir: Path, tests: list[Path], left_out: list[str], stop_first: bool = True
) -> tuple[list[str], float]:
    """The ids of the tests that failed ([] when the mutant survived), and the seconds it took.

    pytest runs in this process, so torch and transformers are imported once, not once per
    mutant; everything loaded from the copy is dropped first, so each run imports the mutated
    core/ afresh. left_out: test ids that fail without any mutant, deselected.
    """
    import pytest

    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(workdir)):
            del sys.modules[name]
    failures = Failures()
    start = time.perf_counter()
    with open(os.devnull, "w") as sink, redirect_stdout(sink), redirect_stderr(sink):
        args = ["-q", "-p", "no:cacheprovider", "-m", "not browser", *(["-x"] * stop_first)]
        args += [arg for test_id in left_out for arg in ("--deselect", test_id)]
        code = pytest.main([*args, *(str(path) for path in tests)], plugins=[failures])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not failures.ids:
        failures.ids.append(f"pytest exit code {int(code)}")  # a collection error, say
    return failures.ids, time.perf_counter() - start


def copy_of_the_repository(workdir: Path, timeout: int) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("core", "ui", "views", "tests"):
        shutil.copytree(ROOT / folder, workdir / folder, ignore=ignore)
    for name in ("app.py", "pyproject.toml"):
        shutil.copy(ROOT / name, workdir / name)
    (workdir / "conftest.py").write_text(COPY_CONFTEST.format(timeout=timeout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated texts: core/ files whose name has one")
    parser.add_argument("--operators", help=f"comma-separated, of: {', '.join(OPERATORS)}")
    parser.add_argument("--sample", type=int, help="run this many mutants, drawn with --seed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--count", action="store_true", help="mutants per file and operator")
    args = parser.parse_args()

    wanted = [text for text in (args.only or "").split(",") if text]
    files = [p for p in sorted(CORE.glob("*.py")) if not wanted or any(t in p.name for t in wanted)]
    operators = [o for o in (args.operators or ",".join(OPERATORS)).split(",") if o]
    unknown = set(operators) - set(OPERATORS)
    if unknown or not files:
        print(f"unknown operators {sorted(unknown)}" if unknown else "no core/ file matches")
        return 2
    chosen = [m for path in files for m in mutants_of(path, operators)]
    if args.count:
        per_file = Counter(m.file for m in chosen)
        print(f"{'file':22} {'mutants':>7} {'every operator and literal':>27}")
        for path in files:
            print(f"{path.name:22} {per_file[path.name]:7} {every_literal_and_operator(path):27}")
        total = sum(every_literal_and_operator(p) for p in files)
        print(f"{'all':22} {len(chosen):7} {total:27}")
        print(
            "per operator: "
            + ", ".join(f"{k} {v}" for k, v in Counter(m.operator for m in chosen).most_common())
        )
        return 0
    if args.sample is not None and args.sample < len(chosen):
        chosen = sorted(
            random.Random(args.seed).sample(chosen, args.sample), key=lambda m: (m.file, m.start)
        )
    if args.list:
        print("\n".join(m.describe() for m in chosen) + f"\n{len(chosen)} mutants")
        return 0

    # no HF_HUB_OFFLINE: tests/conftest.py points the hub at a closed port, and the fake-hub
    # tests of tests/test_models.py need it online
    os.environ.update(PYTHONDONTWRITEBYTECODE="1")
    sys.dont_write_bytecode = True  # a mutant of the same size and second must not reuse a .pyc
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        workdir = Path(tmp)
        copy_of_the_repository(workdir, args.test_timeout)
        test_files = [
            path
            for path in sorted((workdir / "tests").glob("test_*.py"))
            if re.search(r"^\s*(import core|from core)", path.read_text(), re.MULTILINE)
        ]
        os.chdir(workdir)
        sys.path.insert(0, str(workdir))
        stages_of = {
            path.name: test_stages(tests_of(path.name, test_files), test_files) for path in files
        }
        passing: set[tuple[Path, ...]] = set()  # test groups run on the unmutated core/
        left_out: list[str] = []  # tests that fail without any mutant

        def run_unmutated(stage: list[Path]) -> None:
            """Run a group once on the unmutated copy; what fails there is left out of every
            mutant's run, and said."""
            if tuple(stage) in passing:
                return
            failed, seconds = run_tests(workdir, stage, left_out, stop_first=False)
            print(
                f"unmutated core/: {len(stage)} test files, {len(failed)} failing ({seconds:.0f} s)"
            )
            for test_id in failed:
                print(f"  fails without a mutant, left out: {test_id}", flush=True)
            left_out.extend(failed)
            passing.add(tuple(stage))

        survived = []
        for number, m in enumerate(chosen, 1):
            path = workdir / "core" / m.file
            original = path.read_bytes()
            alive, seconds = True, 0.0
            for stage in stages_of[m.file]:
                run_unmutated(stage)
                path.write_bytes(m.apply(original))
                try:
                    failed, spent = run_tests(workdir, stage, left_out)
                finally:
                    path.write_bytes(original)
                seconds += spent
                alive = not failed
                if not alive:
                    break
            verdict = "SURVIVED" if alive else "killed"
            print(
                f"[{number:4}/{len(chosen)}] {verdict:8} {seconds:5.0f} s  {m.describe()}",
                flush=True,
            )
            if alive:
                survived.append(m)
        # The copy is back to the real core/: if a mutant's leftovers broke this process, every
        # later "kill" would be false, so the unmutated tests must still pass at the end.
        every = sorted({test for stage in passing for test in stage})
        failed, seconds = run_tests(workdir, every, left_out)
        print(f"unmutated core/ again: {'FAIL' if failed else 'pass'} ({seconds:.0f} s)")
        for test_id in failed:  # a mutant left something behind, or the tests depend on order
            print(f"  fails on the unmutated copy now: {test_id}")
        os.chdir(ROOT)
        if failed:
            return 1
    print(f"\nkilled {len(chosen) - len(survived)} of {len(chosen)} mutants")
    for m in survived:
        print(f"  SURVIVED  {m.describe()}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
