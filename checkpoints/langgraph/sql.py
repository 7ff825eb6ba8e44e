"""The tables of the LangGraph saver as raw SQL sees them: their names, columns and conflict
keys, the INSERT ... ON CONFLICT the write path runs, and how a statement is executed.

Raw INSERT ... ON CONFLICT (PostgreSQL and SQLite >= 3.24 spell it the same) instead of the
ORM: one statement per put, without building model instances on the hottest path of a graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper

from checkpoints.models import GraphBlob, GraphCheckpoint, GraphWrite

# The fields of a checkpoint row that the reads load.
ROW_FIELDS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "metadata",
)
TASK_FIELD = GraphCheckpoint._meta.get_field("task")
METADATA_FIELD = GraphCheckpoint._meta.get_field("metadata")
VERSIONS_FIELD = GraphCheckpoint._meta.get_field("versions")
CHECKPOINT_TABLE = GraphCheckpoint._meta.db_table
CHECKPOINT_COLUMNS = (
    "task_id",
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "metadata",
    "versions",
)
CHECKPOINT_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id")
BLOB_TABLE = GraphBlob._meta.db_table
BLOB_COLUMNS = ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob")
BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
WRITE_TABLE = GraphWrite._meta.db_table
WRITE_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "graph_task_id",
    "task_path",
    "idx",
    "channel",
    "type",
    "blob",
)
WRITE_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id", "graph_task_id", "idx")


def insert_sql(
    db: BaseDatabaseWrapper,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    key: Sequence[str],
    *,
    update: Sequence[str],
    guard: bool = False,
) -> tuple[str, list[Any]]:
    """INSERT ... ON CONFLICT of `rows`; with `guard`, only if the CTE `fence` (the lease
    proof of a fenced write) returned a row."""
    quote = db.ops.quote_name
    row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
    if update:
        on_conflict = "DO UPDATE SET " + ", ".join(
            f"{quote(c)} = excluded.{quote(c)}" for c in update
        )
    else:
        on_conflict = "DO NOTHING"
    values = f"VALUES {', '.join([row_sql] * len(rows))}"
    if guard:
        values = f"SELECT * FROM ({values}) AS v WHERE EXISTS (SELECT 1 FROM fence)"
    sql = (
        f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) {values} "
        f"ON CONFLICT ({', '.join(quote(c) for c in key)}) {on_conflict}"
    )
    return sql, [value for row in rows for value in row]


def _first(row: tuple[Any, ...] | None) -> Any:
    """The first column of a RETURNING row (an INSERT ... RETURNING always returns one)."""
    if row is None:
        raise TypeError("the statement returned no row")
    return row[0]


def execute(db: BaseDatabaseWrapper, sql: str, params: list[Any], *, fetch: bool = False) -> Any:
    if db.vendor == "postgresql":
        # Server-side parameter binding: Django's psycopg cursors bind on the client, which
        # escapes every blob into the SQL text (most of a put's time for a 10 KB channel).
        db.ensure_connection()
        with psycopg.Cursor(db.connection) as cursor:
            cursor.execute(sql, params)
            return _first(cursor.fetchone()) if fetch else None
    else:
        with db.cursor() as cursor:
            cursor.execute(sql, params)
