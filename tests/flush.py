"""The test database emptied by DELETE, not TRUNCATE, after each transactional test.

PostgreSQL's TRUNCATE gives each table (and its indexes and TOAST table) new files and takes
an ACCESS EXCLUSIVE lock: over this project's ~57 tables that is 0.4–1.5 s per test on a
2-core VM, paid by every `transaction=True` and browser test. DELETE FROM the same tables,
a few rows each, takes milliseconds. Django's foreign keys are DEFERRABLE INITIALLY DEFERRED
and `flush` runs its statements in one transaction, so the order of the tables does not
matter. The content types and permissions stay, so the post_migrate signal, which would only
create them again (~50 queries), is not sent after a flush."""

from __future__ import annotations

from typing import Any

from django.core.management.commands import flush
from django.db.backends.postgresql.operations import DatabaseOperations

KEPT = frozenset({"django_content_type", "auth_permission"})
_truncate = DatabaseOperations.sql_flush


def sql_flush_by_delete(
    self: DatabaseOperations,
    style: Any,
    tables: list[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    tables = [table for table in tables if table not in KEPT]
    if reset_sequences:  # asked for by a test: TRUNCATE ... RESTART IDENTITY does that
        return _truncate(self, style, tables, reset_sequences=True, allow_cascade=allow_cascade)
    return [
        f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
        for table in tables
    ]


def flush_by_delete() -> None:
    """From now on in this process (the tests' own: nothing else runs `flush`)."""
    DatabaseOperations.sql_flush = sql_flush_by_delete
    flush.emit_post_migrate_signal = lambda *args, **kwargs: None
