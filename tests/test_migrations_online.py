"""Migrations run while the workers run: a deploy migrates the database under live tasks. On
PostgreSQL a plain CREATE INDEX holds a SHARE lock on its table for the whole build (and
DROP INDEX an ACCESS EXCLUSIVE one), which stops every status change, heartbeat, lease,
checkpoint and event of every running task: seconds on a table of millions of rows, long
enough for leases to lapse. So a migration that builds or drops an index on a table the workers
write on every step does it concurrently: `AddIndexConcurrently` / `RemoveIndexConcurrently`,
or its own CONCURRENTLY SQL in a non-atomic migration (tasks 0028 and 0029 show how, with the
model state changed apart in SeparateDatabaseAndState).

The migrations written before this rule are frozen history (BEFORE_THE_RULE): already applied
wherever the product runs; 0028 was rewritten to the rule, as the first one after them."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.migrations.loader import MigrationLoader

# (app, model) of the tables every running task writes: the task row (leases, heartbeats,
# status), its events, its ledger, its checkpoints and their blobs.
HOT = {
    ("tasks", "task"),
    ("tasks", "taskevent"),
    ("tasks", "toolcall"),
    ("checkpoints", "checkpoint"),
    ("checkpoints", "blob"),
    ("checkpoints", "blobref"),
    ("checkpoints", "graphcheckpoint"),
    ("checkpoints", "graphwrite"),
    ("checkpoints", "graphblob"),
}
OUR_APPS = {"tasks", "checkpoints", "review", "agent", "multiagent", "cases", "dashboard"}
# Before the rule: the migrations that built or dropped indexes on these tables under lock, each
# applied everywhere long since.
BEFORE_THE_RULE = {
    ("checkpoints", "0002_initial"),
    ("checkpoints", "0003_lean_write_indexes"),
    ("checkpoints", "0006_blob_refs"),
    ("tasks", "0001_initial"),
    ("tasks", "0003_error_fingerprint_list_indexes"),
    ("tasks", "0004_task_status_held"),
    ("tasks", "0006_toolcall_stats_indexes"),
    ("tasks", "0008_hot_worker_updates"),
    ("tasks", "0009_lean_write_indexes"),
    ("tasks", "0011_statistics_indexes"),
    ("tasks", "0012_multiagent_groups"),
    ("tasks", "0015_task_calls_failed"),
    ("tasks", "0016_task_head_without_constraint"),
    ("tasks", "0021_task_title_index"),
    ("tasks", "0024_task_fork_of"),
}


def _locking(operation: Any, app: str) -> str:
    """Why `operation` (of a migration of `app`) builds or drops an index on a hot table under
    lock, or ""."""
    name = getattr(operation, "model_name", None) or getattr(operation, "name", "")
    hot = (app, str(name).lower()) in HOT
    if not hot:
        return ""
    # Exactly these: django.contrib.postgres's concurrent forms are their subclasses.
    if type(operation) in (migrations.AddIndex, migrations.RemoveIndex):
        return f"{type(operation).__name__} on {app}.{name}"
    if isinstance(operation, migrations.AddConstraint) and isinstance(
        operation.constraint, models.UniqueConstraint
    ):
        return f"a unique constraint (an index) on {app}.{name}"
    if isinstance(operation, (migrations.AddField, migrations.AlterField)):
        field = operation.field
        if field.db_index or field.unique or field.is_relation:
            # A foreign key also validates the whole table under lock when its constraint is
            # (re)made, as Django's AlterField of one does.
            kind = "a foreign key" if field.is_relation else "indexed"
            return f"{type(operation).__name__} {app}.{name}.{operation.name} ({kind})"
    return ""


def locking_operations(migration: migrations.Migration) -> list[str]:
    """The operations of `migration` that build or drop an index on a hot table under lock.
    SeparateDatabaseAndState is read on its database side only (its state side runs no SQL);
    the concurrent operations (django.contrib.postgres) and RunPython / RunSQL are the way."""
    found = []
    pending = list(migration.operations)
    while pending:
        operation = pending.pop(0)
        if isinstance(operation, migrations.SeparateDatabaseAndState):
            pending[:0] = operation.database_operations
            continue
        why = _locking(operation, migration.app_label)
        if why:
            found.append(why)
    return found


def test_no_migration_after_the_rule_locks_a_table_the_workers_write() -> None:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    offending = {
        f"{app}.{name}": found
        for (app, name), migration in sorted(loader.disk_migrations.items())
        if app in OUR_APPS and (app, name) not in BEFORE_THE_RULE
        for found in [locking_operations(migration)]
        if found
    }
    assert offending == {}


def test_the_scan_sees_an_index_built_under_lock() -> None:
    """The scan finds what it is meant to (so its pass above means something), and lets the
    online forms through."""
    from django.contrib.postgres.operations import AddIndexConcurrently

    index = models.Index(fields=["status"], name="probe")
    plain = migrations.Migration("0999_probe", "tasks")
    plain.operations = [
        migrations.AddIndex(model_name="task", index=index),
        migrations.AlterField(
            model_name="toolcall", name="tool", field=models.CharField(max_length=9, db_index=True)
        ),
        migrations.AddIndex(model_name="apitoken", index=index),  # not a hot table
    ]
    assert locking_operations(plain) == [
        "AddIndex on tasks.task",
        "AlterField tasks.toolcall.tool (indexed)",
    ]
    online = migrations.Migration("0999_probe", "tasks")
    online.operations = [
        AddIndexConcurrently(model_name="task", index=index),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="task", index=index)],
            database_operations=[migrations.RunSQL("SELECT 1")],
        ),
    ]
    assert locking_operations(online) == []
