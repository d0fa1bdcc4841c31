"""Memory tours inside a memory cgroup: does the server survive what Community Cloud allows?

Cloud guarantees 690 MB and caps at 2.7 GB for the one process that serves every visitor, and
past the limit the kernel kills it silently: the visitor's page just hangs (DESIGN.md). This
bench starts `streamlit run app.py` (headless, on a free loopback port) inside a cgroup v1
memory cgroup of that size, created here and removed on exit, and drives chromium against it:

  one   one visitor's tour (every page, every tab and expander opened: browser.tour_pages) at
        the default sentence, then again at 512 word pieces (the sentence as the URL's `text`),
        in 690 MB. A row per tour: the cgroup's peak (memory.max_usage_in_bytes, reset before
        each tour; page cache included, which the kernel reclaims before it kills) and the
        server's RSS after the tour.
  five  five visitors doing that same tour at once, in 2.7 GB: the peak over the whole run.

What the cgroup counts: a page of a shared library (torch's ~0.2 GB) is charged to the cgroup
that first read it. The bench empties the page cache before it starts the server, so the pages
the server reads are charged to its cgroup, as on Cloud. Pages another process keeps mapped (a
second server, a test run with torch loaded) cannot be dropped: the server maps those without
being charged for them, and the peak undercounts. The column "elsewhere" is that part at the
end of the tour (the server's RssFile minus the cgroup's mapped_file); peak + elsewhere is
closer to what Cloud sees.

A tour passes only if the server survived it (its process runs, the cgroup's oom_kill count did
not move) and no page or tab showed an exception or error. When the server dies, every wait
notices within seconds (browser.Liveness: process gone, or /_stcore/health silent) and the tour
stops with the page and tab it was on, instead of waiting on a hung page; every wait is bounded.

Needs root (it writes under /sys/fs/cgroup/memory) and /usr/bin/chromium. Not part of CI: one
visitor's two tours take ~10 minutes on 2 cores, five visitors much longer.

    python bench/memory_tour.py                  # both scenarios
    python bench/memory_tour.py --scenario one   # 690 MB, one visitor
    python bench/memory_tour.py --scenario five --visitors 5 --five-limit-mb 2700
Exit status 1 if any tour failed; 2 if no memory cgroup can be made here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support.browser, the harness the tests share

from tests.support.browser import (  # noqa: E402
    LONG_QUERY,
    chromium,
    served_app,
    tree_rss_bytes,
    visitor_tours,
)

MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
MB = 1_000_000  # decimal, as Cloud states its limits: 690 MB is 690,000,000 bytes here
TOURS = (("default sentence", {}), ("512 word pieces", LONG_QUERY))


class MemoryCgroup:
    """A cgroup v1 memory cgroup with a hard limit (and the same memory+swap limit, if swap
    accounting exists, so nothing escapes to swap); removed by remove()."""

    def __init__(self, name: str, limit_bytes: int) -> None:
        self.path = MEMORY_ROOT / name
        self.path.mkdir()
        self.limit = limit_bytes
        # memory.memsw must stay >= memory.limit: set the plain limit first
        (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
        memsw = self.path / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(limit_bytes))

    def read(self, name: str) -> str:
        return (self.path / name).read_text()

    def join(self) -> None:
        """Move the calling process into the cgroup (run in the server's child before exec)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak(self) -> int:
        return int(self.read("memory.max_usage_in_bytes"))

    def reset_peak(self) -> None:
        (self.path / "memory.max_usage_in_bytes").write_text("0")

    def oom_kills(self) -> int:
        """The kernel's count of processes killed in this cgroup (0 on kernels before 4.13)."""
        for line in self.read("memory.oom_control").splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def stat(self, name: str) -> int:
        """One counter of memory.stat (bytes)."""
        for line in self.read("memory.stat").splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
        return 0

    def failcnt(self) -> int:
        """How often usage hit the limit (reclaim, not necessarily a kill)."""
        return int(self.read("memory.failcnt"))

    def remove(self) -> None:
        """Move any process left to the root cgroup, then remove the directory."""
        with contextlib.suppress(OSError):
            for pid in self.read("cgroup.procs").split():
                with contextlib.suppress(OSError):
                    (MEMORY_ROOT / "cgroup.procs").write_text(pid)
        for _ in range(50):  # rmdir fails while the kernel still uncharges the last pages
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                threading.Event().wait(0.1)
        print(f"warning: could not remove {self.path}", file=sys.stderr)


def drop_page_cache() -> None:
    """Empty the kernel's page cache (root), so the library pages the server reads next are
    charged to its cgroup as on Cloud; pages another process keeps mapped stay where they are."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
    except OSError as error:
        print(f"warning: the page cache stays ({error}); see 'elsewhere'", file=sys.stderr)


@contextlib.contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[MemoryCgroup]:
    cgroup = MemoryCgroup(f"attention-explorer-bench-{os.getpid()}-{limit_bytes}", limit_bytes)
    drop_page_cache()
    try:
        yield cgroup
    finally:
        cgroup.remove()


@dataclass
class Row:
    scenario: str
    limit: int
    tour: str
    survived: bool = True
    peak: int = 0
    rss: int = 0
    elsewhere: int = 0  # the server's mapped file pages charged to another cgroup
    oom_kills: int = 0
    failcnt: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.survived and not self.oom_kills and not self.failures


def rss_file(pid: int) -> int:
    """The process's resident file-backed pages (RssFile, bytes): its mapped libraries."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    return 0


def finish(row: Row, cgroup: MemoryCgroup, server: object, started: float) -> Row:
    code = server.process.poll()
    row.survived = code is None
    if not row.survived:
        row.failures.append(f"server process exited ({code}): the visitor's page would hang")
    row.peak, row.oom_kills, row.failcnt = cgroup.peak(), cgroup.oom_kills(), cgroup.failcnt()
    if row.survived:
        row.rss = tree_rss_bytes(server.process.pid)
        row.elsewhere = max(0, rss_file(server.process.pid) - cgroup.stat("mapped_file"))
    row.seconds = time.monotonic() - started
    return row


def one_visitor(limit: int, timeout_s: float, tours: list[tuple[str, dict]]) -> list[Row]:
    """Scenario "one": one visitor's tour at the default sentence, then at 512 pieces."""
    rows = []
    with memory_cgroup(limit) as cgroup, served_app(preexec=cgroup.join) as server:
        print(f"one visitor, {limit / MB:.0f} MB: server pid {server.process.pid} in {cgroup.path}")
        with chromium() as browser:
            cgroup.reset_peak()
            started = time.monotonic()
            for name, failures in visitor_tours(browser, server, tours, timeout_s):
                row = Row("1 visitor", limit, name, failures=failures)
                rows.append(finish(row, cgroup, server, started))
                print(f"  {name}: {'PASS' if row.passed else 'FAIL'}", flush=True)
                if not row.passed:  # the server's side of it: the door's refusals, tracebacks
                    for line in server.log_text().splitlines():
                        if "refused" in line or "Error" in line:
                            print(f"    server: {line[:300]}", flush=True)
                cgroup.reset_peak()
                started = time.monotonic()
    return rows


def many_visitors(limit: int, visitors: int, timeout_s: float) -> list[Row]:
    """Scenario "five": `visitors` visitors, each in its own thread and chromium (Playwright's
    sync API is one instance per thread), doing the two tours at once."""
    failures: list[str] = []
    done: list[str] = []
    lock = threading.Lock()

    def visit(index: int, server: object, gate: threading.Barrier) -> None:
        try:
            with chromium() as browser:
                gate.wait(timeout=300)  # every browser up before anyone loads a page
                tours = visitor_tours(browser, server, list(TOURS), timeout_s, f"visitor {index}, ")
                for name, found in tours:
                    with lock:
                        failures.extend(f"visitor {index}, {name}: {f}" for f in found)
                        done.append(f"visitor {index}: {name}")
                    print(f"  visitor {index}: {name} done ({len(found)} failures)", flush=True)
                    for failure in found:
                        print(f"    {failure}", flush=True)
        except Exception as err:  # a visitor that crashed is a failure, not a hung bench
            with lock:
                failures.append(f"visitor {index}: {type(err).__name__}: {str(err)[:200]}")
            traceback.print_exc()

    with memory_cgroup(limit) as cgroup, served_app(preexec=cgroup.join) as server:
        print(f"{visitors} visitors, {limit / MB:.0f} MB: server pid {server.process.pid}")
        gate = threading.Barrier(visitors)
        cgroup.reset_peak()
        started = time.monotonic()
        threads = [
            threading.Thread(target=visit, args=(i, server, gate), daemon=True)
            for i in range(visitors)
        ]
        for thread in threads:
            thread.start()
        # every visitor's waits are bounded (timeout_s per step, ServerGone within seconds of a
        # death); this bound only catches a bench bug
        deadline = started + timeout_s * 200
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                failures.append("a visitor did not finish before the bench's own deadline")
                break
        tour = "both tours, concurrently"
        row = Row(f"{visitors} visitors", limit, tour, failures=sorted(failures))
        return [finish(row, cgroup, server, started)]


def print_table(rows: list[Row]) -> None:
    print()
    header = (
        f"{'scenario':12s} {'limit':>8s}  {'tour':26s} {'result':6s} {'peak':>8s} "
        f"{'elsewhere':>9s} {'RSS after':>9s} {'oom_kill':>8s} {'failcnt':>8s} {'time':>7s}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.scenario:12s} {row.limit / MB:>5.0f} MB  {row.tour:26s} "
            f"{'PASS' if row.passed else 'FAIL':6s} {row.peak / MB:>5.0f} MB "
            f"{(f'{row.elsewhere / MB:.0f} MB' if row.survived else '-'):>9s} "
            f"{(f'{row.rss / MB:.0f} MB' if row.survived else 'dead'):>9s} {row.oom_kills:>8d} "
            f"{row.failcnt:>8d} {row.seconds:>6.0f}s"
        )
    for row in rows:
        for failure in row.failures[:30]:
            print(f"  {row.scenario}, {row.tour}: {failure}")
        if len(row.failures) > 30:
            print(f"  ... and {len(row.failures) - 30} more")
    print(
        "peak: memory.max_usage_in_bytes (page cache included); elsewhere: the server's mapped"
        " file pages charged to another cgroup (see --help); RSS: the server's, after the tour."
    )


def interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scenario", choices=("one", "five", "all"), default="all")
    parser.add_argument("--one-limit-mb", type=float, default=690, help="default: 690 (Cloud)")
    parser.add_argument("--five-limit-mb", type=float, default=2700, help="default: 2700")
    parser.add_argument("--visitors", type=int, default=5, help="for 'five'; default: 5")
    parser.add_argument(
        "--step-timeout", type=float, default=300, help="seconds any one page or tab may take"
    )
    parser.add_argument(
        "--tours",
        nargs="+",
        choices=[name for name, _ in TOURS],
        help="for 'one': only these tours (default: both)",
    )
    args = parser.parse_args()
    if not (MEMORY_ROOT / "cgroup.procs").exists() or not os.access(MEMORY_ROOT, os.W_OK):
        print(f"no writable cgroup v1 memory hierarchy at {MEMORY_ROOT} (root needed)")
        return 2
    # SIGTERM unwinds like Ctrl+C, so the server stops and the cgroup is removed
    signal.signal(signal.SIGTERM, interrupted)
    rows: list[Row] = []
    try:
        if args.scenario in ("one", "all"):
            tours = [tour for tour in TOURS if tour[0] in args.tours] if args.tours else list(TOURS)
            rows += one_visitor(int(args.one_limit_mb * MB), args.step_timeout, tours)
        if args.scenario in ("five", "all"):
            limit = int(args.five_limit_mb * MB)
            rows += many_visitors(limit, args.visitors, args.step_timeout)
    finally:
        print_table(rows)
    ok = bool(rows) and all(row.passed for row in rows)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
