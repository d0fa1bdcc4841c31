#!/usr/bin/env bash
# Install what the tests need and run all of them: lint, unit, parity, AppTest, real browser.
# The README's second command; .ci/run runs exactly this.
#
# Every run starts from a new, empty virtual environment (.venv-test, rebuilt each time) that
# holds only what requirements-test.txt names (which includes requirements.txt): a package this
# machine happens to have but the requirement files lack makes the run fail here, as it would on
# a newcomer's laptop or on Community Cloud. pip's download cache keeps a rebuild to a minute or two.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
VENV=".venv-test"
"$PYTHON" -m venv --clear "$VENV"
# shellcheck disable=SC1091
source "$VENV/bin/activate"
# requirements.txt names torch's CPU wheel by its URL on download.pytorch.org. Where pip's
# find-links folder holds a file of exactly that name (the CI machine, which cannot reach that
# host), tools/local_wheels.py swaps the URL for that file in a copy of the requirement files,
# and says so; elsewhere the copy is the same as the files and pip downloads the wheel.
REQUIREMENTS_COPY="$(mktemp -d)"
trap 'rm -rf "$REQUIREMENTS_COPY"' EXIT
REQUIREMENTS="$(python tools/local_wheels.py "$REQUIREMENTS_COPY" requirements-test.txt)"
# uv installs as Community Cloud does (DEPLOY.md), downloads in parallel and compiles no module
# ahead of time: a fresh venv in a fraction of pip's time (bench/RESULTS.md, Test suite). Where
# uv cannot be had, pip does the same install; --no-compile because pip would byte-compile every
# module of every package, where Python compiles the few thousand the tests import.
if python -m pip install --quiet --disable-pip-version-check "uv>=0.8,<1"; then
  uv pip install --quiet --python "$VENV/bin/python" -r "$REQUIREMENTS"
else
  echo "uv could not be installed: pip installs the requirements instead"
  python -m pip install --quiet --disable-pip-version-check --no-compile -r "$REQUIREMENTS"
fi
python -c "import torch; print('torch', torch.__version__)"

# The browser tests drive Debian's chromium (Playwright's own browser download cannot work here).
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

ruff check .
ruff format --check .

# exit code 5 means "no tests collected": that must fail here, never pass silently.
# Three workers: a browser test alternates between waiting for chromium or the server and
# working, so three share two cores well (a fourth saved nothing; one worker had not passed a
# quarter of the tests after 20 min on a busy machine). Each worker starts its own app server on
# a free port (conftest.py; a few tests start one with other settings). conftest.py puts the
# browser tests (10-60 s each, up to 130 s on a slow machine) first and the unit tests
# after; --maxschedchunk 2 hands them out two at a time in that order (xdist's default first
# hand is a quarter of a worker's share in one consecutive block, which would give one worker
# most of the browser tests).
# The suite's wall time, and what regrouping the browser tests saved: bench/RESULTS.md, Test
# suite. A page load costs chromium seconds of CPU, so the browser tests' CPU time is what the
# wall time follows; --durations lists the slowest tests, where to trim first.
python -m pytest -q -n 3 --dist load --maxschedchunk 2 --durations=15 "$@"

# A short version of the many-visitors load test (4 browser sessions x 3 rounds): exits non-zero
# on any failed session or when the server passes 2.2 GB. The full runs are in bench/ (README).
python bench/load_test.py --quick
