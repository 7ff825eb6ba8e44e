"""Deleting what the seed made: a TRUNCATE when the database holds no other task."""

from __future__ import annotations

from bench.dashboard.rows import RECEIPT_SEQ, USER_PREFIX, _has_task_id
from bench.dashboard.seeding import _big_tables, _rollup_models


def cleanup() -> None:
    """Delete everything the seed created: TRUNCATE when the database holds no other task,
    else SQL deletes (the ORM's cascade would load rows) and VACUUM."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from review.models import DecisionReceipt, ReviewRequest
    from tasks.models import (
        AuditEntry,
        Task,
    )

    User = get_user_model()
    ids = list(User.objects.filter(username__startswith=USER_PREFIX).values_list("id", flat=True))
    if not ids:
        return
    owned = f"SELECT id FROM {Task._meta.db_table} WHERE created_by_id = ANY(%s)"
    rollups = _rollup_models()
    # The rows hanging off the seed's tasks (or off their reviews), deleted before them; the
    # seeded receipts hang off nothing and are told by their numbers.
    # (Those hanging off reviews first: they are found through their reviews.)
    owned_by_tasks = sorted(
        (model for model in (*_big_tables(), AuditEntry) if model is not DecisionReceipt),
        key=_has_task_id,
    )
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {DecisionReceipt._meta.db_table} WHERE seq > %s", [RECEIPT_SEQ])
    if not Task.objects.exclude(created_by_id__in=ids).exists():
        # Every task (and so every row hanging off one) is the seed's: emptying the tables
        # takes seconds where deleting tens of millions of rows takes many minutes and
        # leaves them for autovacuum, which then loads the machine under the next
        # benchmark. (The audit entries of tasks other benchmarks deleted go too.)
        tables = ", ".join(model._meta.db_table for model in (Task, *rollups))
        with connection.cursor() as cur:
            cur.execute(f"TRUNCATE {tables} CASCADE")
        User.objects.filter(id__in=ids).delete()
        return
    reviews = f"SELECT id FROM {ReviewRequest._meta.db_table} WHERE task_id IN ({owned})"
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Task._meta.db_table} SET head_checkpoint_id = NULL "
            "WHERE created_by_id = ANY(%s)",
            [ids],
        )
        for model in owned_by_tasks:
            rows = f"task_id IN ({owned})" if _has_task_id(model) else f"review_id IN ({reviews})"
            cur.execute(f"DELETE FROM {model._meta.db_table} WHERE {rows}", [ids])
        cur.execute(f"DELETE FROM {Task._meta.db_table} WHERE created_by_id = ANY(%s)", [ids])
        # The roll-ups now count deleted calls: drop them all; the sweep rebuilds them from
        # the calls that remain (rolling is idempotent).
        for model in rollups:
            cur.execute(f"DELETE FROM {model._meta.db_table}")
    with connection.cursor() as cur:
        # The dead rows now, not by autovacuum while the next benchmark measures.
        for model in (*owned_by_tasks, Task):
            cur.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    User.objects.filter(id__in=ids).delete()
