"""Discover and run the benchmarks: every bench/<name>.py (or bench/<name>/ package) with a
module-level `run(size)`."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, RESULTS_DIR, SIZES, result_write

log = logging.getLogger("bench")

# Infrastructure modules of bench/ itself, never benchmarks.
_NOT_BENCHMARKS = {"chaos", "common", "hosts", "report", "runner"}


def benchmarks() -> dict[str, Callable[[str], dict[str, Any]]]:
    """{name: run} for every bench/<name>.py or bench/<name>/ that exposes `run(size) -> dict`,
    in running order: by name, those that set `RUN_LAST = True` (heavy seeds) after the others."""
    found = {}
    for module in pkgutil.iter_modules([str(BENCH_DIR)]):
        if module.name.startswith("_") or module.name in _NOT_BENCHMARKS:
            continue
        loaded = importlib.import_module(f"bench.{module.name}")
        run = getattr(loaded, "run", None)
        if callable(run):
            found[(getattr(loaded, "RUN_LAST", False), module.name)] = run
    return {name: found[(last, name)] for last, name in sorted(found)}


def run_all(
    *, size: str, only: list[str] | None = None, results_dir: Path = RESULTS_DIR
) -> dict[str, Path]:
    """Run the selected benchmarks at `size`, writing results_dir/<name>.json for each."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, not {size!r}")
    found = benchmarks()
    unknown = sorted(set(only or ()) - set(found))
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(found)}")
    written = {}
    for name, run in found.items():
        if only and name not in only:
            continue
        started = time.monotonic()
        log.info("bench %s (%s) ...", name, size)
        result = run(size)
        written[name] = result_write(name=name, size=size, result=result, results_dir=results_dir)
        log.info("bench %s done in %.1fs", name, time.monotonic() - started)
    return written
