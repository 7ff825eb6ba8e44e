"""A fenced write sent without waiting for its commit (`task_fenced_write_behind`): the
statement is built in the caller's thread, exactly as task_fenced_write builds it, and executed
on a writer thread's own connection while the caller goes on; `PendingWrite.wait()` collects its
outcome (raises LeaseLost, or the write's error) and finishes the rows as task_fenced_write
does. A run sends the outcome of a step this way and waits for it before its next write and
before anything that reads what it wrote, so the step's fsync overlaps the next model turn and
nothing that depends on the outcome is acknowledged before it is durable.

Synchronous (the write done before it returns) when write-behind cannot keep that promise or is
off: not PostgreSQL, inside a transaction (the writer's connection would not see its rows,
and the caller's transaction must hold them), or settings.HARNESS_WRITE_BEHIND False.

One writer thread per process (made in the process that first sends: a forked work horse has
none of its parent's threads), one connection, closed by `write_behind_release` (a run segment's
end: a worker holds no second connection between tasks)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from psycopg.types.json import Json, Jsonb

from tasks.services import fenced_write
from tasks.services.prepared import prepare_due, raw_cursor

_writer: ThreadPoolExecutor | None = None
_writer_pid = 0
_writer_lock = threading.Lock()


def _forget_writer_after_fork() -> None:
    global _writer, _writer_pid, _writer_lock
    _writer, _writer_pid, _writer_lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_writer_after_fork)


def _executor() -> ThreadPoolExecutor:
    global _writer, _writer_pid
    with _writer_lock:
        if _writer is None or _writer_pid != os.getpid():
            _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="write-behind")
            _writer_pid = os.getpid()
        return _writer


def write_behind_possible() -> bool:
    """Whether a write sent now may be committed by the writer thread (see the module)."""
    return (
        bool(getattr(settings, "HARNESS_WRITE_BEHIND", True))
        and connection.vendor == "postgresql"
        and not connection.in_atomic_block
    )


class PendingWrite:
    """A fenced write sent (or done): `wait()` -> the task's cancel_requested as of it."""

    def __init__(
        self,
        *,
        task_id: Any = None,
        epoch: int = 0,
        future: Future[tuple[Any, ...]] | None = None,
        inserts: Sequence[models.Model] = (),
        inserted: list[list[models.Model]] | None = None,
        done: bool = False,
    ) -> None:
        self.task_id = task_id
        self.epoch = epoch
        self.future = future
        self.inserts = inserts
        self.inserted = inserted or []
        self.cancel_requested = done

    @property
    def sent(self) -> bool:
        """Whether it is still to be collected."""
        return self.future is not None

    def wait(self) -> bool:
        """Its commit collected (once; later calls return the same): raises LeaseLost when the
        fence refused it (nothing written), or the error the statement raised."""
        future, self.future = self.future, None
        if future is None:
            return self.cancel_requested
        self.cancel_requested = fenced_write.fenced_result_apply(
            future.result(),
            task_id=self.task_id,
            epoch=self.epoch,
            inserts=self.inserts,
            inserted=self.inserted,
        )
        return self.cancel_requested


def _as_dumped(text: str) -> str:
    return text


def _frozen(params: Sequence[Any]) -> list[Any]:
    """The statement's JSON parameters dumped now, in the caller's thread: psycopg dumps a
    Json wrapper when the statement executes, on the writer thread, by which time the caller
    may have changed the dict it wraps (a row's payload, a checkpoint's state)."""
    frozen: list[Any] = []
    for param in params:
        if isinstance(param, Json | Jsonb):
            dumps = param.dumps or json.dumps
            param = type(param)(dumps(param.obj), dumps=_as_dumped)
        elif isinstance(param, list | tuple):
            param = type(param)(_frozen(param))
        frozen.append(param)
    return frozen


def _execute(sql: str, params: list[Any], prepare: bool) -> tuple[Any, ...]:
    """In the writer thread, on its own connection (autocommit: one implicit transaction)."""
    db = connections[DEFAULT_DB_ALIAS]
    try:
        with raw_cursor(db, prepare=prepare) as cursor:
            cursor.execute(sql, params)
            row: tuple[Any, ...] = cursor.fetchone()
            return row
    except BaseException:
        db.close()  # a broken connection is not reused: the next write connects again
        raise


def task_fenced_write_behind(
    *,
    task_id: Any,
    epoch: int,
    inserts: Sequence[models.Model] = (),
    updates: Sequence[tuple[models.Model, Sequence[str]]] = (),
    inserts_if_absent: Sequence[models.Model] = (),
    **fields: Any,
) -> PendingWrite:
    """task_fenced_write (the same arguments, the same statement), sent to the writer thread:
    the caller must `wait()` before its next write and before it reads what this writes."""
    if not write_behind_possible():
        cancel = fenced_write.task_fenced_write(
            task_id=task_id,
            epoch=epoch,
            inserts=inserts,
            updates=updates,
            inserts_if_absent=inserts_if_absent,
            **fields,
        )
        return PendingWrite(done=cancel)
    db = connections[DEFAULT_DB_ALIAS]
    sql, params, inserted = fenced_write.fenced_statement_for(
        db=db,
        task_id=task_id,
        epoch=epoch,
        fields=fields,
        inserts=inserts,
        updates=updates,
        inserts_if_absent=inserts_if_absent,
    )
    prepare = prepare_due(sql)
    future = _executor().submit(_execute, sql, _frozen(params), prepare)
    return PendingWrite(
        task_id=task_id, epoch=epoch, future=future, inserts=inserts, inserted=inserted
    )


def write_behind_release() -> None:
    """Close the writer thread's connection (it connects again on its next write)."""
    with _writer_lock:
        writer = _writer if _writer_pid == os.getpid() else None
    if writer is not None:
        writer.submit(connections.close_all).result()
