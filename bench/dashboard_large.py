"""(5b) The dashboard pages at ten times the size: 1,000,000 tasks / ~50,000,000 events.

The same seed and the same pages as bench/dashboard/ (read its docstring), with 1,000,000
tasks (~20,000,000 checkpoints, ~50,000,000 events, ~11,000,000 tool calls) or, when the disk
under PostgreSQL's data directory cannot hold that, the largest multiple of 100,000 tasks it
can (about 40 KB of database per task, plus room for the index builds); the size used is in
the result. Same budgets: list ≤ 100 ms, task page ≤ 300 ms, statistics ≤ 500 ms (p95).

Expected run time (2 CPUs, quiet): smoke ~10 s; full ~40 min at 1,000,000 tasks (seeding ~30
min, ~40 GB of disk, then ~9 min of pages; cleanup is a TRUNCATE when the database holds no
other task). BENCH_DASHBOARD_LARGE_TASKS overrides the size; BENCH_MEASURE_AFTER=<file> times
the pages only once that file exists (the seed may overlap other work, the timing not).
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any

from bench.common import BenchError
from bench.dashboard import measure

log = logging.getLogger("bench")

TITLE = "Dashboard pages on a very large database"
RUN_LAST = True
WANTED_TASKS = 1_000_000
# Database bytes per seeded task (3.9 GB at 100,000 tasks), and the headroom the index
# builds, WAL and the statistics need on top.
BYTES_PER_TASK = 40_000
HEADROOM = 1.5
SPARE_BYTES = 5 * 10**9


def _tasks_the_disk_allows() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SHOW data_directory")
        data_directory = cur.fetchone()[0]
    try:
        free = shutil.disk_usage(data_directory).free
    except OSError:
        # Not readable from here (another host, or no permission): the root disk is a guess.
        free = shutil.disk_usage("/").free
    fits = int((free - SPARE_BYTES) / (BYTES_PER_TASK * HEADROOM)) // 100_000 * 100_000
    if fits < 100_000:
        raise BenchError(
            f"{free / 1e9:.0f} GB free under {data_directory}: not enough for 100,000 tasks"
        )
    return min(WANTED_TASKS, fits)


def run(size: str) -> dict[str, Any]:
    if size == "smoke":
        params = {"tasks": 600, "big_steps": 40, "n": 2, "warmup": 1, "batch": 200}
    else:
        tasks = int(os.environ.get("BENCH_DASHBOARD_LARGE_TASKS", 0)) or _tasks_the_disk_allows()
        log.info("dashboard_large: %s tasks", f"{tasks:,}")
        params = {"tasks": tasks, "big_steps": 1_000, "n": 30, "warmup": 3, "batch": 5_000}
    result = measure(**params, title=TITLE)
    result["details"]["wanted_tasks"] = WANTED_TASKS
    return result
