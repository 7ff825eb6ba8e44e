"""Shared pieces of the benchmarks: Django set-up, timing, statistics, result files and the
results table. The convention every `bench/<name>.py` follows is in bench/README.md.

The modules: `paths`, `database`, `measure`, `results`, `processes`; every name is exported
here, so a benchmark imports from `bench.common`."""

from __future__ import annotations

from bench.common.database import (
    database_url,
    pg_conninfo,
    reference_conninfo,
    reference_schema,
    reference_schema_reset,
    require_postgresql,
    scripted_task,
    setup_django,
    tasks_delete,
)
from bench.common.measure import (
    figure,
    percentile,
    profile_top,
    rate_stats,
    sample_interleaved,
    stats,
    timed,
)
from bench.common.paths import BENCH_DIR, REPO_ROOT, RESULTS_DIR, RESULTS_MD, SIZES, BenchError
from bench.common.processes import RqWorker, spawn, wait_for, worker_environment
from bench.common.results import environment, git_dirty, result_write, results_load

__all__ = [
    "BENCH_DIR",
    "BenchError",
    "REPO_ROOT",
    "RESULTS_DIR",
    "RESULTS_MD",
    "RqWorker",
    "SIZES",
    "database_url",
    "environment",
    "figure",
    "git_dirty",
    "percentile",
    "pg_conninfo",
    "profile_top",
    "rate_stats",
    "reference_conninfo",
    "reference_schema",
    "reference_schema_reset",
    "require_postgresql",
    "result_write",
    "results_load",
    "sample_interleaved",
    "scripted_task",
    "setup_django",
    "spawn",
    "stats",
    "tasks_delete",
    "timed",
    "wait_for",
    "worker_environment",
]
