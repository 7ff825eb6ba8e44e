"""The whole seed: the users, the batches (secondary indexes dropped before, built after),
VACUUM ANALYZE, and the roll-ups the sweep would have built."""

from __future__ import annotations

import time
from typing import Any

from bench.dashboard.rows import (
    CREATORS,
    FAILURES,
    REVIEWERS,
    USER_PREFIX,
    _checkpoint_payload,
    _one,
    _one_plain,
    log,
)
from bench.dashboard.seed_batch import _seed_batch


def seed(*, tasks: int, big_steps: int, batch: int) -> dict[str, Any]:
    """Seed the tables; returns the big task's id, the row counts and the seeding times.

    Bounded by construction: tasks are loaded `batch` at a time, each batch its own
    transaction (a single multi-million-row transaction left PostgreSQL one COMMIT that ran
    for over 40 minutes, firing every deferred foreign-key check at once); the secondary
    indexes of the big tables are dropped before loading and built once after it."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from checkpoints.models import Checkpoint
    from review.rollups import review_rollups_advance
    from tasks.errors import error_fingerprint
    from tasks.models import (
        Task,
    )
    from tasks.rollups import rollups_advance

    User = get_user_model()
    creators = [
        User.objects.get_or_create(username=f"{USER_PREFIX}{i}")[0].id for i in range(CREATORS)
    ]
    reviewers = [
        User.objects.get_or_create(username=f"{USER_PREFIX}reviewer-{i}")[0].id
        for i in range(REVIEWERS)
    ]
    classes = ", ".join(f"'{c}'" for c, _ in FAILURES)
    templates = ", ".join("'" + t.replace("'", "''") + "'" for _, t in FAILURES)
    prints = ", ".join(f"'{error_fingerprint(c, t % 7)}'" for c, t in FAILURES)
    payload, checksum, size = _checkpoint_payload()
    superuser = _one_plain("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    big_tables = _big_tables()
    started = time.monotonic()
    indexes = _secondary_indexes(big_tables)
    big = None
    try:
        with connection.cursor() as cur:
            for sql in indexes:
                cur.execute(f"DROP INDEX IF EXISTS {sql.split()[2]}")
        for lo in range(0, tasks + 1, batch):
            hi = min(lo + batch, tasks + 1)
            with transaction.atomic(), connection.cursor() as cur:
                _seed_batch(
                    cur,
                    lo=lo,
                    hi=hi,
                    tasks=tasks,
                    big_steps=big_steps,
                    creators=creators,
                    reviewers=reviewers,
                    superuser=superuser,
                    classes=classes,
                    templates=templates,
                    prints=prints,
                    checkpoint=(payload, checksum, size),
                )
                if lo == 0:
                    big = _one(cur, "SELECT id FROM bd_task WHERE n = 0")
            log.info("dashboard seed: %s of %s tasks", hi, tasks + 1)
    finally:
        loaded = time.monotonic()
        with connection.cursor() as cur:
            cur.execute("SET maintenance_work_mem = '512MB'")
            for sql in indexes:
                cur.execute(sql.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
    indexed = time.monotonic()
    with connection.cursor() as cur:
        cur.execute(
            f"""UPDATE {Task._meta.db_table} t SET head_checkpoint_id = (
                SELECT c.id FROM {Checkpoint._meta.db_table} c WHERE c.task_id = t.id
                ORDER BY c.seq DESC LIMIT 1) WHERE t.id = %s""",
            [big],
        )
        for model in (Task, *big_tables):
            # As autovacuum would leave them: statistics, and the visibility map that lets
            # index-only scans skip the heap.
            cur.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    vacuumed = time.monotonic()
    # What the sweep does on its own over time: roll up the finished hours for the statistics.
    while rollups_advance(now=timezone.now()):
        pass
    while review_rollups_advance(now=timezone.now()):
        pass
    rollup_models = _rollup_models()
    with connection.cursor() as cur:
        for model in rollup_models:
            cur.execute(f"VACUUM ANALYZE {model._meta.db_table}")
        counts = {
            model._meta.label: _one(cur, f"SELECT count(*) FROM {model._meta.db_table}")
            for model in (Task, *big_tables, *rollup_models)
        }
        database_bytes = _one(cur, "SELECT pg_database_size(current_database())")
    done = time.monotonic()
    return {
        "big_task": big,
        "counts": counts,
        "database_bytes": database_bytes,
        "seed_seconds": {
            "load": round(loaded - started, 1),
            "indexes": round(indexed - loaded, 1),
            "vacuum_analyze": round(vacuumed - indexed, 1),
            "rollups": round(done - vacuumed, 1),
            "total": round(done - started, 1),
        },
    }


def _rollup_models() -> tuple[Any, ...]:
    from review.models import ReviewRolledHour
    from review.rollups import DAILY
    from tasks.rollups import DAILY as TASK_DAILY
    from tasks.rollups import ROLLUP_MODELS

    review = [model for pair in DAILY for model in pair]
    return (*ROLLUP_MODELS, *(table.daily for table in TASK_DAILY), *review, ReviewRolledHour)


def _big_tables() -> tuple[Any, ...]:
    from checkpoints.models import Checkpoint
    from review.models import DecisionReceipt, Notification, ReviewRequest, ReviewView
    from tasks.models import TaskEvent, ToolCall

    return (
        TaskEvent,
        ToolCall,
        Checkpoint,
        ReviewRequest,
        ReviewView,
        DecisionReceipt,
        Notification,
    )


def _secondary_indexes(models: tuple[Any, ...]) -> list[str]:
    """CREATE INDEX statements of the tables' indexes that back no constraint (primary key,
    unique): the ones a bulk load can drop and build once afterwards."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            """SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x
               JOIN pg_class t ON t.oid = x.indrelid
               WHERE t.relname = ANY(%s) AND NOT x.indisunique AND NOT x.indisprimary
               ORDER BY 1""",
            [[model._meta.db_table for model in models]],
        )
        return [row[0] for row in cur.fetchall()]
