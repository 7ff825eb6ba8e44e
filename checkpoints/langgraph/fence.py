"""Lease fencing of the LangGraph saver's writes (checkpoints.langgraph.writes).

Bound to a task run (`task_id` and the run's lease `epoch`, as the graph runner
binds it), every put / put_writes first proves the lease — the task row, still running under
this epoch, updated (heartbeat) and so locked until the commit: on PostgreSQL one statement
whose INSERTs are conditional on that UPDATE (as tasks.services.task_fenced_write), on SQLite
one short transaction starting with tasks.services.task_fence. A writer that lost its lease
gets LeaseLost and stores nothing, so a stale worker cannot write a super-step late. Unbound
(users' own graphs, the operator's rollback) writes are not fenced.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from checkpoints.langgraph.sql import execute
from tasks.models import Task
from tasks.services import task_fence
from tasks.states import LeaseLost, TaskStatus


class FencedWrites:
    """Runs a write's statements for CheckpointWrites, fenced on the task run's lease when the
    saver is bound to one. Uses the saver's `using`, `task_id` and `epoch`."""

    using: str
    task_id: Any
    epoch: int | None

    def _write(self, db: BaseDatabaseWrapper, statements: list[tuple[str, list[Any]]]) -> None:
        """Run a write's statements: each in autocommit, or, bound to a task run, in one
        transaction that first proves the lease (LeaseLost rolls it back: nothing stored)."""
        if self.epoch is None:
            for sql, params in statements:
                execute(db, sql, params)
            return
        if db.vendor == "postgresql":
            # One statement (one round trip, one commit), as tasks.services.task_fenced_write:
            # the fenced UPDATE of the task row is a data-modifying CTE and every INSERT (built
            # with `guard`) is conditional on it.
            meta = Task._meta
            quote = db.ops.quote_name
            sql = (
                f"WITH fence AS (UPDATE {quote(meta.db_table)} "
                f"SET {quote('heartbeat_at')} = STATEMENT_TIMESTAMP() "
                f"WHERE {quote(meta.pk.column)} = %s AND {quote('lease_epoch')} = %s "
                f"AND {quote('status')} = %s RETURNING 1), "
                + ", ".join(f"w{i} AS ({stmt})" for i, (stmt, _p) in enumerate(statements))
                + " SELECT count(*) FROM fence"
            )
            params = [
                meta.pk.get_db_prep_value(self.task_id, db),
                self.epoch,
                TaskStatus.RUNNING,
                *(value for _s, stmt_params in statements for value in stmt_params),
            ]
            if execute(db, sql, params, fetch=True) != 1:
                raise LeaseLost(f"task {self.task_id}: lease epoch {self.epoch} lost")
            return
        with transaction.atomic(using=self.using):
            task_fence(task_id=self.task_id, epoch=self.epoch)
            for sql, params in statements:
                execute(db, sql, params)
