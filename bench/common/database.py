"""Django and PostgreSQL for the benchmarks: set-up, the database's address, the reference
schema comparisons run against, and the scripted tasks they create and delete."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from bench.common.paths import BenchError


def setup_django() -> None:
    """Configure Django for a benchmark process (the test suite has already done this)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
    os.environ.setdefault("HARNESS_ENABLE_TEST_TOOLS", "1")
    import django

    django.setup()
    require_postgresql()


def require_postgresql() -> None:
    from django.db import OperationalError, connection

    if connection.vendor == "postgresql":
        try:
            connection.ensure_connection()
        except OperationalError as exc:
            reason = str(exc).strip().splitlines()[-1]
            raise BenchError(
                f"cannot connect to DATABASE_URL's database ({reason}); create a scratch "
                "database for the benchmarks, e.g. `createdb harness_bench`"
            ) from None
    if connection.vendor != "postgresql":
        raise BenchError(
            "the benchmarks compare against LangGraph's PostgresSaver and raw psycopg on the "
            "same server: set DATABASE_URL to a PostgreSQL database "
            "(e.g. postgres://postgres@127.0.0.1:5432/harness_bench)"
        )


def pg_conninfo(**extra: str) -> str:
    """A libpq connection string for the database Django uses (the test database inside
    pytest), so raw psycopg and LangGraph write to the very same PostgreSQL."""
    from django.db import connection
    from psycopg.conninfo import make_conninfo

    s = connection.settings_dict
    params = {
        "dbname": s["NAME"],
        "user": s.get("USER"),
        "password": s.get("PASSWORD"),
        "host": s.get("HOST"),
        "port": str(s.get("PORT") or ""),
    }
    return make_conninfo(**{k: v for k, v in params.items() if v}, **extra)


def database_url() -> str:
    """DATABASE_URL for subprocesses (workers) that must use the same database."""
    from django.db import connection

    s = connection.settings_dict
    auth = s.get("USER") or ""
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    return f"postgres://{auth}{'@' if auth else ''}{host}:{port}/{s['NAME']}"


def scripted_task(
    *,
    script: list[dict[str, Any]],
    tools: list[str],
    title: str = "bench",
    max_steps: int | None = None,
    queue: bool = True,
) -> Any:
    """A task with a scripted model, created (and queued, without enqueueing a job) through
    the real services."""
    from tasks.services import task_create, task_transition
    from tasks.spec import TaskSpec

    spec = TaskSpec.model_validate(
        {
            "title": title,
            "goal": "benchmark",
            "tools": tools,
            "model": {"kind": "scripted", "script": script},
            "budget": {"max_steps": max_steps or len(script) + 1},
        }
    )
    task = task_create(spec=spec, user=None, enqueue=False)
    if queue:
        task_transition(task_id=task.id, to="queued", reason="bench")
    return task


def tasks_delete(task_ids: Iterable[Any]) -> None:
    """Remove the benchmark's tasks (their checkpoints, events and tool calls cascade)."""
    from tasks.models import Task

    Task.objects.filter(id__in=list(task_ids)).update(head_checkpoint=None)
    Task.objects.filter(id__in=list(task_ids)).delete()


def reference_schema() -> str:
    """The schema holding the reference implementations' tables (LangGraph, the raw-INSERT
    floor) in the same database; created empty for a run and dropped after it."""
    return "bench_reference"


def reference_conninfo() -> str:
    return pg_conninfo(options=f"-c search_path={reference_schema()}")


def reference_schema_reset(*, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {reference_schema()} CASCADE")
        if not drop_only:
            conn.execute(f"CREATE SCHEMA {reference_schema()}")
