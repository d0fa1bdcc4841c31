#!/usr/bin/env bash
# Install what the tests need and run all of them: lint, unit, parity, AppTest, real browser.
# The README's second command; .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")"

python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt

# The browser tests drive Debian's chromium (Playwright's own browser download cannot work here).
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

ruff check .
ruff format --check .

# exit code 5 means "no tests collected": that must fail here, never pass silently.
python -m pytest -q "$@"

# A short version of the many-visitors load test (4 browser sessions x 3 rounds): exits non-zero
# on any failed session or when the server passes 2.2 GB. The full runs are in bench/ (README).
python bench/load_test.py --quick
