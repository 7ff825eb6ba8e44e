"""Where the benchmarks' files are, their sizes, and the error a benchmark that cannot run
here raises."""

from __future__ import annotations

from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]


RESULTS_DIR = BENCH_DIR / "results"


RESULTS_MD = BENCH_DIR / "results.md"


SIZES = ("smoke", "full")


class BenchError(RuntimeError):
    """A benchmark cannot run here (wrong database, missing service): the message says why."""


REPO_ROOT = BENCH_DIR.parent
