"""Helpers the tests share with the benchmarks: tests/support/browser.py starts the app and
drives Debian's chromium. bench/ scripts import it from here (with the repository root on their
path), so there is one copy and the benchmarks hold benchmarks only."""
