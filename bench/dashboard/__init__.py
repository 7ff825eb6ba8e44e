"""(5) Dashboard pages on a large database.

Seeds PostgreSQL server-side (INSERT … SELECT over generate_series, no rows through Python):
at full size 100,000 tasks spread over 30 days with ~2,000,000 checkpoints, ~5,000,000
events, ~1,100,000 tool calls and ~22,000 reviews (with their deciders' first page views,
decision receipts and notifications), plus one task of 1,000 steps. Then
measures, through Django's test client as a logged-in operator (middleware, view, SQL and
template rendering; no HTTP socket):

- the task list: unfiltered, filtered by status + tool, by error class + creator + date, a
  selective free-text search (trigram indexes on PostgreSQL) and sorted by title; the nav's
  search for a title — target p95 ≤ 100 ms;
- the page of the 1,000-step task (header, the timeline figure embedded — its last 100 steps in
  full, the earlier steps' failed attempts, waits, recoveries and key checkpoints on an
  overview; "Show all steps" fetches the rest — the compact event tab's first page) — target
  p95 ≤ 300 ms;
- the failure statistics page over the last 24 hours, 7 days and 30 days (tool-call and task
  statistics from the sweep's hourly roll-ups, which the seed builds as the sweep would)
  — target p95 ≤ 500 ms;
- the review SLA page over the last 24 hours and 30 days (the review roll-ups the seed builds
  as the sweep would, and the reviews of the hours not rolled yet) — the same 500 ms;
- the overview (informational).

Seeding is bounded: batches of 5,000 tasks, each its own transaction; the secondary indexes
of the big tables dropped before loading and built once after; the time of each phase is
recorded in the result's details. The seeded rows belong to dedicated `bench-dash-*` users
and are deleted afterwards; use a scratch database.

Expected run time (2 CPUs, quiet): smoke ~10 s; full ~3 min (seeding ~1.5 min, 11 pages ×
33 requests, cleanup a TRUNCATE when the database holds no other task, else ~2 min). The
same at 1,000,000 tasks: bench/dashboard_large.py.
"""

from __future__ import annotations

import gc
import os
import time
from datetime import timedelta
from typing import Any

from bench.common import figure, profile_top, sample_interleaved, stats
from bench.dashboard.removal import cleanup
from bench.dashboard.rows import USER_PREFIX, log
from bench.dashboard.seeding import seed

TITLE = "Dashboard pages on a large database"


# The runner runs this after the others: a multi-GB seed leaves PostgreSQL busy for a while.
RUN_LAST = True


# `batch`: tasks per seeding transaction (~20 checkpoints, ~50 events, ~11 tool calls each).
# BENCH_DASHBOARD_TASKS=1000000 runs the full size with that many tasks instead.
SIZES = {
    "smoke": {"tasks": 300, "big_steps": 40, "n": 2, "warmup": 1, "batch": 100},
    "full": {
        "tasks": int(os.environ.get("BENCH_DASHBOARD_TASKS", 100_000)),
        "big_steps": 1_000,
        "n": 30,
        "warmup": 3,
        "batch": 5_000,
    },
}


TARGETS_MS = {"list": 100, "task": 300, "stats": 500}


def _client() -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(
        username=f"{USER_PREFIX}operator", defaults={"is_superuser": True, "is_staff": True}
    )
    client = Client()
    client.force_login(user)
    return client


def _get(client: Any, url: str) -> Any:
    def fetch() -> None:
        response = client.get(url)
        # The nav's search opens the one match it finds (a redirect to its page, which the
        # browser then loads and the task page's own row measures); several are listed.
        opened = response.status_code == 302 and url.startswith("/search/")
        if response.status_code != 200 and not opened:
            raise RuntimeError(f"GET {url} answered {response.status_code}")

    return fetch


def run(size: str) -> dict[str, Any]:
    return measure(**SIZES[size], title=TITLE)


def _wait_for_quiet() -> None:
    """BENCH_MEASURE_AFTER names a file: the pages are timed only once it exists, so a long
    seed can overlap other work and the timing still runs on a quiet machine."""
    path = os.environ.get("BENCH_MEASURE_AFTER")
    while path and not os.path.exists(path):
        log.info("dashboard: seeded; waiting for %s before timing the pages", path)
        time.sleep(30)


def measure(
    *, tasks: int, big_steps: int, n: int, warmup: int, batch: int, title: str
) -> dict[str, Any]:
    """Seed `tasks` tasks (plus the big task of `big_steps` steps), time every page, clean up."""
    from django.utils import timezone

    cleanup()
    seeded = seed(tasks=tasks, big_steps=big_steps, batch=batch)
    try:
        _wait_for_quiet()
        client = _client()
        # Serve as the web process does: harness_site/wsgi.py freezes what start-up loaded.
        gc.collect()
        gc.freeze()
        day = (timezone.now() - timedelta(days=3)).date()
        pages = {
            ("list", "task list"): "/tasks/",
            ("list", "task list: status + tool"): "/tasks/?status=failed&tool=http_request",
            (
                "list",
                "task list: error class + creator + dates",
            ): f"/tasks/?error_class=timeout&creator={USER_PREFIX}1&created_from={day}",
            ("list", "task list: free-text search"): "/tasks/?q=task+4242%3A",
            ("list", "task list: sorted by title"): "/tasks/?sort=title",
            ("list", "nav search: a title"): "/search/?q=task+4242%3A",
            ("task", f"task page, {big_steps} steps"): f"/tasks/{seeded['big_task']}/",
            ("stats", "failure statistics, 24 h"): "/stats/failures/?since=24h",
            ("stats", "failure statistics, 7 days"): "/stats/failures/?since=7d",
            ("stats", "failure statistics, 30 days"): "/stats/failures/?since=30d",
            ("stats", "review SLAs, 24 h"): "/stats/reviews/?since=24h",
            ("stats", "review SLAs, 30 days"): "/stats/reviews/?since=30d",
            (None, "overview"): "/",
        }
        samples = sample_interleaved(
            {label: _get(client, url) for (_, label), url in pages.items()}, n=n, warmup=warmup
        )
        figures, profiles = [], {}
        for (kind, label), url in pages.items():
            ours = stats(samples[label], scale=1000)
            target = TARGETS_MS.get(kind)
            met = None if target is None else ours["p95"] <= target
            figures.append(
                figure(
                    figure=f"{label} — {tasks:,} tasks",
                    unit="ms",
                    ours=ours,
                    target=f"p95 ≤ {target} ms" if target else "informational",
                    met=met,
                    note=url,
                )
            )
            if met is False:
                profiles[label] = profile_top(_get(client, url), repeat=3)
    finally:
        cleaned = time.monotonic()
        cleanup()
        seeded["seed_seconds"]["cleanup"] = round(time.monotonic() - cleaned, 1)
    counts = seeded["counts"]
    return {
        "title": title,
        "figures": figures,
        "profiles": profiles,
        "notes": (
            f"{counts['tasks.Task']:,} tasks, {counts['checkpoints.Checkpoint']:,} checkpoints, "
            f"{counts['tasks.TaskEvent']:,} events, {counts['tasks.ToolCall']:,} tool calls "
            f"({seeded['database_bytes'] / 1e9:.1f} GB; seeded in "
            f"{seeded['seed_seconds']['total']:.0f} s). "
            "Server-side time of one GET through Django's test client (middleware, "
            "view, SQL, templates), as a logged-in operator, with the database seeded "
            "as in bench/dashboard/'s docstring; pages interleaved round-robin. The "
            "statistics pages read the sweep's hourly roll-ups (tool calls, finished tasks) "
            "for whole hours and the raw rows only for the partial hours at the window's "
            "edges."
        ),
        "details": {
            "rows": counts,
            "seed_seconds": seeded["seed_seconds"],
            "database_bytes": seeded["database_bytes"],
            "big_task_steps": big_steps,
        },
    }
