"""Fixtures asserting that a recovery does its file I/O with no task row locked (issue 13 item
4): from a second PostgreSQL connection, `SELECT ... FOR UPDATE NOWAIT` the rows each time a
restore writes or deletes a file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

import checkpoints.snapshots as snapshots
from checkpoints.blobstore import blob_store
from checkpoints.snapshots import restore as snapshot_restoring
from tasks import services
from tasks.models import Task


@pytest.fixture
def row_lock_free() -> Iterator[Callable[[list[Any]], None]]:
    """Asserts, from a second connection, that no transaction holds a lock on these task rows
    (SELECT ... FOR UPDATE NOWAIT succeeds)."""
    other = psycopg.connect(**connection.get_connection_params())
    table = Task._meta.db_table

    def check(task_ids: list[Any]) -> None:
        try:
            with other.cursor() as cursor:
                cursor.execute(
                    f"SELECT id FROM {table} WHERE id = ANY(%s) FOR UPDATE NOWAIT",
                    [list(task_ids)],
                )
                assert len(cursor.fetchall()) == len(task_ids)
        finally:
            other.rollback()

    yield check
    other.close()


@pytest.fixture
def file_io_checked(monkeypatch, row_lock_free) -> Callable[[list[Any]], list[str]]:
    """Arm with task ids: every file a restore writes or deletes first checks that their rows
    are not locked. -> the relative paths written or deleted, in order."""
    seen: list[str] = []

    def arm(task_ids: list[Any]) -> list[str]:
        for name in ("file_write_in_place", "file_delete"):
            original = getattr(snapshot_restoring, name)

            def checked(root, rel, *args, _original=original, **kwargs):
                row_lock_free(task_ids)
                seen.append(rel)
                return _original(root, rel, *args, **kwargs)

            monkeypatch.setattr(snapshot_restoring, name, checked)
        return seen

    return arm


def snapshot_files(snapshot: dict | None) -> dict[str, bytes]:
    """The files a workspace snapshot holds, read from the blob store."""
    manifest = snapshots.snapshot_manifest(snapshot)
    bodies = blob_store().get_many({e.hash for e in manifest.values()})
    return {rel: bodies[e.hash] for rel, e in manifest.items()}


class CommitFailed(RuntimeError):
    pass


@pytest.fixture
def commit_fails(monkeypatch) -> type[CommitFailed]:
    """The recovery's last write (its audit entry, after every checkpoint row) raises, so its
    transaction rolls back. -> the exception raised."""

    def fail(**_kwargs: Any) -> None:
        raise CommitFailed("the database went away")

    # The recoveries call it as `services.audit_record` on the package (tasks.services), which
    # is where they look it up; nothing inside the package calls it.
    monkeypatch.setattr(services, "audit_record", fail)
    return CommitFailed
