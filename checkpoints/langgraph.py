"""DjangoCheckpointSaver: LangGraph checkpoints, channel blobs and pending writes in this
project's database (GraphCheckpoint, GraphBlob, GraphWrite), on PostgreSQL and on SQLite.

Usable for any graph, not only graphs run as harness tasks:

    from checkpoints.langgraph import DjangoCheckpointSaver
    graph = builder.compile(checkpointer=DjangoCheckpointSaver())
    graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

Threads and connections. Django connections are per thread. LangGraph calls the sync methods
from a thread pool it creates per run (checkpoint saves run in the background) and the async
methods from an event loop, where Django refuses blocking queries. So a call runs inline only on
the thread that created the saver; every other call (all async ones included) runs on the
saver's own database thread, which keeps one connection for the saver's life instead of one per
pool thread left for the garbage collector. `close()` closes that connection.

Transactions are short: every write is one autocommit statement, or one transaction of a few
statements, never held across a graph step or an await. On SQLite (WAL, IMMEDIATE transactions,
busy timeout) writers therefore queue for milliseconds instead of failing "database is locked".
Writes are ordered so a crash between two statements leaves only unreferenced blob rows.

Lease fencing. Bound to a task run (`task_id` and the run's lease `epoch`, as the graph runner
binds it), every put / put_writes first proves the lease — the task row, still running under
this epoch, updated (heartbeat) and so locked until the commit: on PostgreSQL one statement
whose INSERTs are conditional on that UPDATE (as tasks.services.task_fenced_write), on SQLite
one short transaction starting with tasks.services.task_fence. A writer that lost its lease
gets LeaseLost and stores nothing, so a stale worker cannot write a super-step late. Unbound
(users' own graphs, the operator's rollback) writes are not fenced.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from django.db import close_old_connections, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model, Q
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from checkpoints.models import GraphBlob, GraphCheckpoint, GraphWrite
from tasks.models import Task
from tasks.services import task_fence
from tasks.states import LeaseLost, TaskStatus

T = TypeVar("T")

PRUNE_STRATEGIES = ("keep_latest", "delete")
# Channel values stored inside the checkpoint row rather than as a blob: small and immutable.
_INLINE_TYPES = (str, int, float, bool)


class DjangoCheckpointSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on Django's default database. `task_id` links the checkpoints
    it writes to a harness task (the graph runner passes it); leave it None for other graphs.
    `epoch`: the lease epoch of the task run writing (the graph runner passes it): every write
    is then fenced on it (LeaseLost, nothing stored, once the lease is lost)."""

    def __init__(
        self,
        *,
        task_id: Any = None,
        epoch: int | None = None,
        serde: SerializerProtocol | None = None,
        using: str = "default",
    ) -> None:
        super().__init__(serde=serde)
        if epoch is not None and task_id is None:
            raise ValueError("a lease epoch fences a task's writes: task_id is required")
        self.task_id = task_id
        self.epoch = epoch
        self.using = using
        self._home = threading.get_ident()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # --- where a call runs ------------------------------------------------------------------

    def _db_thread(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="langgraph-saver"
                )
            return self._executor

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if threading.get_ident() == self._home:
            return fn(*args, **kwargs)
        return self._db_thread().submit(self._on_db_thread, fn, args, kwargs).result()

    async def _acall(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db_thread(), self._on_db_thread, fn, args, kwargs)

    @staticmethod
    def _on_db_thread(fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
        # A connection broken or past CONN_MAX_AGE since the last call is replaced, as Django
        # does at the start of a request.
        close_old_connections()
        return fn(*args, **kwargs)

    def close(self) -> None:
        """Close the database thread's connection (the caller's own connection is Django's)."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.submit(connections.close_all).result()
            executor.shutdown(wait=True)

    def __enter__(self) -> DjangoCheckpointSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> DjangoCheckpointSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # close() waits for the database thread: off the event loop.
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    # --- the sync API -----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._call(self._get_tuple, config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._call(self._list, config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._call(self._put, config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._call(self._put_writes, config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._call(self._delete_threads, [str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call(self._delete_for_runs, [str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._call(self._copy_thread, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        thread_ids = _prune_arguments(thread_ids, strategy)
        self._call(self._prune, thread_ids, strategy)

    # --- the async API (what LangGraph's async loop and the conformance suite call) ----------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._acall(self._get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await self._acall(
            self._list, config, filter=filter, before=before, limit=limit
        ):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._acall(self._put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._acall(self._put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._acall(self._delete_threads, [str(thread_id)])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._acall(self._delete_for_runs, [str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._acall(self._copy_thread, str(source_thread_id), str(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        thread_ids = _prune_arguments(thread_ids, strategy)
        await self._acall(self._prune, thread_ids, strategy)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """Versions sort as strings: a zero-padded counter plus a random fraction, so two
        writers forking the same version never collide (PostgresSaver's scheme)."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # --- writes -----------------------------------------------------------------------------

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable.get("checkpoint_ns") or ""
        parent_id = configurable.get("checkpoint_id") or ""

        body = dict(checkpoint)
        inline: dict[str, Any] = {}
        blobs: dict[str, Any] = {}
        for channel, value in checkpoint["channel_values"].items():
            if value is None or isinstance(value, _INLINE_TYPES):
                inline[channel] = value
            else:
                blobs[channel] = value
        body["channel_values"] = inline
        blob_rows = [
            (
                thread_id,
                checkpoint_ns,
                channel,
                str(version),
                *self.serde.dumps_typed(blobs[channel]),
            )
            for channel, version in new_versions.items()
            if channel in blobs
        ]
        type_, payload = self.serde.dumps_typed(body)
        metadata_json = get_serializable_checkpoint_metadata(config, metadata)
        metadata_db = _METADATA_FIELD.get_db_prep_save(metadata_json, connections[self.using])

        db = connections[self.using]
        guard = self.epoch is not None and db.vendor == "postgresql"
        checkpoint_sql = _insert_sql(
            db,
            _CHECKPOINT,
            _CHECKPOINT_COLUMNS,
            [
                (
                    # Raw SQL: the task's UUID in the backend's own form (hex text on SQLite).
                    _TASK_FIELD.get_db_prep_save(self.task_id, db),
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    parent_id,
                    type_,
                    payload,
                    metadata_db,
                )
            ],
            _CHECKPOINT_KEY,
            update=("type", "checkpoint", "metadata"),
            guard=guard,
        )
        blob_sql = (
            _insert_sql(db, _BLOB, _BLOB_COLUMNS, blob_rows, _BLOB_KEY, update=(), guard=guard)
            if blob_rows
            else None
        )
        if guard:
            statements = [*([blob_sql] if blob_sql is not None else []), checkpoint_sql]
        elif blob_sql is not None and db.vendor == "postgresql":
            # One statement, so one round trip and one commit (what PostgresSaver gets from
            # pipeline mode): the blobs in a data-modifying CTE, then the checkpoint row.
            statements = [
                (
                    f"WITH blobs AS ({blob_sql[0]}) {checkpoint_sql[0]}",
                    blob_sql[1] + checkpoint_sql[1],
                )
            ]
        else:
            # Blobs first, each statement its own short autocommit transaction: a checkpoint
            # row is never visible before the values it names; a crash in between leaves
            # unreferenced blobs, which prune() collects.
            statements = [*([blob_sql] if blob_sql is not None else []), checkpoint_sql]
        self._write(db, statements)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        if not writes:
            return
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable.get("checkpoint_ns") or ""
        checkpoint_id = configurable["checkpoint_id"]
        rows = [
            (
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                *self.serde.dumps_typed(value),
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        # Regular writes of a task are final once stored (a retried task re-sends the same
        # ones); special writes (error, interrupt, resume) replace the previous one.
        special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        update = ("channel", "type", "blob") if special else ()
        if special:
            # One statement may not update a row twice: the last write of a channel wins.
            rows = list({row[5]: row for row in rows}.values())
        db = connections[self.using]
        guard = self.epoch is not None and db.vendor == "postgresql"
        self._write(
            db,
            [_insert_sql(db, _WRITE, _WRITE_COLUMNS, rows, _WRITE_KEY, update=update, guard=guard)],
        )

    def _write(self, db: BaseDatabaseWrapper, statements: list[tuple[str, list[Any]]]) -> None:
        """Run a write's statements: each in autocommit, or, bound to a task run, in one
        transaction that first proves the lease (LeaseLost rolls it back: nothing stored)."""
        if self.epoch is None:
            for sql, params in statements:
                _execute(db, sql, params)
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
            if _execute(db, sql, params, fetch=True) != 1:
                raise LeaseLost(f"task {self.task_id}: lease epoch {self.epoch} lost")
            return
        with transaction.atomic(using=self.using):
            task_fence(task_id=self.task_id, epoch=self.epoch)
            for sql, params in statements:
                _execute(db, sql, params)

    def _delete_threads(self, thread_ids: list[str]) -> None:
        if not thread_ids:
            return
        with transaction.atomic(using=self.using):
            for model in (GraphCheckpoint, GraphWrite, GraphBlob):
                model.objects.using(self.using).filter(thread_id__in=thread_ids).delete()

    def _delete_for_runs(self, run_ids: list[str]) -> None:
        if not run_ids:
            return
        with transaction.atomic(using=self.using):
            doomed = list(
                GraphCheckpoint.objects.using(self.using)
                .filter(metadata__run_id__in=run_ids)
                .values_list("pk", "thread_id", "checkpoint_ns", "checkpoint_id")
            )
            if not doomed:
                return
            writes = Q()
            for _pk, thread_id, checkpoint_ns, checkpoint_id in doomed:
                writes |= Q(
                    thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
                )
            GraphWrite.objects.using(self.using).filter(writes).delete()
            GraphCheckpoint.objects.using(self.using).filter(
                pk__in=[row[0] for row in doomed]
            ).delete()

    def _copy_thread(self, source: str, target: str) -> None:
        with transaction.atomic(using=self.using):
            # Blobs before the checkpoints that name them; the copies belong to no task.
            self._copy_rows(GraphBlob, source, target)
            self._copy_rows(GraphCheckpoint, source, target, task_id=None)
            self._copy_rows(GraphWrite, source, target)

    def _copy_rows(self, model: type[Model], source: str, target: str, **overrides: Any) -> None:
        """Copy a thread's rows of one table to another thread (rows it has already stay)."""
        columns = [f.attname for f in model._meta.concrete_fields if not f.primary_key]
        changed = {"thread_id": target, **overrides}
        rows = model.objects.using(self.using).filter(thread_id=source)
        model.objects.using(self.using).bulk_create(
            [model(**{c: getattr(row, c) for c in columns} | changed) for row in rows],
            ignore_conflicts=True,
        )

    def _prune(self, thread_ids: list[str], strategy: str) -> None:
        if not thread_ids:
            return
        if strategy == "delete":
            self._delete_threads(thread_ids)
            return
        # keep_latest rebuilds nothing from older checkpoints, which a DeltaChannel needs.
        if (
            GraphCheckpoint.objects.using(self.using)
            .filter(thread_id__in=thread_ids, metadata__has_key="counters_since_delta_snapshot")
            .exists()
        ):
            raise NotImplementedError(
                "prune(strategy='keep_latest') refuses threads that use a DeltaChannel"
            )
        for thread_id in thread_ids:
            # One short transaction per thread, locking its checkpoint rows (PostgreSQL) so a
            # run writing to the thread meanwhile waits instead of losing its blobs.
            with transaction.atomic(using=self.using):
                self._keep_latest(thread_id)

    def _keep_latest(self, thread_id: str) -> None:
        rows = (
            GraphCheckpoint.objects.using(self.using)
            .select_for_update()
            .filter(thread_id=thread_id)
            .order_by("checkpoint_ns", "-checkpoint_id")
        )
        kept: dict[str, GraphCheckpoint] = {}
        doomed: list[int] = []
        for row in rows.only("pk", "checkpoint_ns", "checkpoint_id", "type", "checkpoint"):
            if row.checkpoint_ns in kept:
                doomed.append(row.pk)
            else:
                kept[row.checkpoint_ns] = row
        GraphCheckpoint.objects.using(self.using).filter(pk__in=doomed).delete()
        GraphCheckpoint.objects.using(self.using).filter(
            pk__in=[r.pk for r in kept.values()]
        ).update(parent_checkpoint_id="")
        stale_writes = GraphWrite.objects.using(self.using).filter(thread_id=thread_id)
        stale_blobs = GraphBlob.objects.using(self.using).filter(thread_id=thread_id)
        for checkpoint_ns, row in kept.items():
            stale_writes = stale_writes.exclude(
                checkpoint_ns=checkpoint_ns, checkpoint_id=row.checkpoint_id
            )
            body = self.serde.loads_typed((row.type, bytes(row.checkpoint)))
            for channel, version in body["channel_versions"].items():
                stale_blobs = stale_blobs.exclude(
                    checkpoint_ns=checkpoint_ns, channel=channel, version=str(version)
                )
        stale_writes.delete()
        stale_blobs.delete()

    # --- reads ------------------------------------------------------------------------------

    def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        rows = GraphCheckpoint.objects.using(self.using).filter(
            thread_id=str(configurable["thread_id"]),
            checkpoint_ns=configurable.get("checkpoint_ns") or "",
        )
        if checkpoint_id := get_checkpoint_id(config):
            rows = rows.filter(checkpoint_id=checkpoint_id)
        else:
            rows = rows.order_by("-checkpoint_id")
        row = rows.values(*_ROW_FIELDS).first()
        return self._tuples([row])[0] if row else None

    def _list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        rows = GraphCheckpoint.objects.using(self.using).order_by("-checkpoint_id")
        if config:
            configurable = config["configurable"]
            rows = rows.filter(thread_id=str(configurable["thread_id"]))
            if configurable.get("checkpoint_ns") is not None:
                rows = rows.filter(checkpoint_ns=configurable["checkpoint_ns"])
            if checkpoint_id := get_checkpoint_id(config):
                rows = rows.filter(checkpoint_id=checkpoint_id)
        if before is not None and (before_id := get_checkpoint_id(before)):
            rows = rows.filter(checkpoint_id__lt=before_id)
        post_filter = None
        if filter:
            if connections[self.using].vendor == "postgresql":
                rows = rows.filter(metadata__contains=filter)  # jsonb @>, as PostgresSaver
            else:
                post_filter = filter  # SQLite has no JSON containment: same test, in Python
        found = []
        for row in rows.values(*_ROW_FIELDS).iterator(chunk_size=100):
            if post_filter is not None and not _json_contains(row["metadata"], post_filter):
                continue
            found.append(row)
            if limit is not None and len(found) >= limit:
                break
        return self._tuples(found)

    def _tuples(self, rows: list[dict[str, Any]]) -> list[CheckpointTuple]:
        """CheckpointTuples for rows of one or more threads: two queries whatever the count."""
        if not rows:
            return []
        bodies = [self.serde.loads_typed((row["type"], bytes(row["checkpoint"]))) for row in rows]

        wanted = Q()
        for row, body in zip(rows, bodies, strict=True):
            for channel, version in body["channel_versions"].items():
                wanted |= Q(
                    thread_id=row["thread_id"],
                    checkpoint_ns=row["checkpoint_ns"],
                    channel=channel,
                    version=str(version),
                )
        blobs: dict[tuple[str, str, str, str], Any] = {}
        if wanted:
            for thread_id, ns, channel, version, type_, blob in (
                GraphBlob.objects.using(self.using).filter(wanted).values_list(*_BLOB_COLUMNS)
            ):
                if type_ != "empty" and blob is not None:
                    blobs[(thread_id, ns, channel, version)] = (type_, bytes(blob))

        of_checkpoint = Q()
        for row in rows:
            of_checkpoint |= Q(
                thread_id=row["thread_id"],
                checkpoint_ns=row["checkpoint_ns"],
                checkpoint_id=row["checkpoint_id"],
            )
        writes: dict[tuple[str, str, str], list[tuple]] = {}
        for w in (
            GraphWrite.objects.using(self.using).filter(of_checkpoint).values_list(*_WRITE_COLUMNS)
        ):
            writes.setdefault(w[:3], []).append(w[3:])

        out = []
        for row, body in zip(rows, bodies, strict=True):
            thread_id, ns = row["thread_id"], row["checkpoint_ns"]
            values = dict(body.get("channel_values") or {})
            for channel, version in body["channel_versions"].items():
                if (stored := blobs.get((thread_id, ns, channel, str(version)))) is not None:
                    values[channel] = self.serde.loads_typed(stored)
            pending = sorted(
                writes.get((thread_id, ns, row["checkpoint_id"]), []),
                key=lambda w: writes_sort_key(w[1], w[0], w[2]),
            )
            out.append(
                CheckpointTuple(
                    config={
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": ns,
                            "checkpoint_id": row["checkpoint_id"],
                        }
                    },
                    checkpoint={**body, "channel_values": values},
                    metadata=row["metadata"],
                    parent_config=(
                        {
                            "configurable": {
                                "thread_id": thread_id,
                                "checkpoint_ns": ns,
                                "checkpoint_id": row["parent_checkpoint_id"],
                            }
                        }
                        if row["parent_checkpoint_id"]
                        else None
                    ),
                    pending_writes=[
                        (graph_task_id, channel, self.serde.loads_typed((type_, bytes(blob))))
                        for graph_task_id, _path, _idx, channel, type_, blob in pending
                    ],
                )
            )
        return out


def _prune_arguments(thread_ids: Sequence[str], strategy: str) -> list[str]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    return [str(t) for t in thread_ids]


def _json_contains(document: Any, pattern: Any) -> bool:
    """PostgreSQL's jsonb `@>` for SQLite: objects contain sub-objects, arrays contain
    elements, scalars are equal."""
    if isinstance(pattern, dict):
        return isinstance(document, dict) and all(
            key in document and _json_contains(document[key], value)
            for key, value in pattern.items()
        )
    if isinstance(pattern, list):
        return isinstance(document, list) and all(
            any(_json_contains(item, wanted) for item in document) for wanted in pattern
        )
    if isinstance(document, bool) or isinstance(pattern, bool):
        return type(document) is type(pattern) and document == pattern
    return document == pattern


# --- SQL for the write path -------------------------------------------------------------------
# Raw INSERT ... ON CONFLICT (PostgreSQL and SQLite >= 3.24 spell it the same) instead of the
# ORM: one statement per put, without building model instances on the hottest path of a graph.

_ROW_FIELDS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "metadata",
)
_TASK_FIELD = GraphCheckpoint._meta.get_field("task")
_METADATA_FIELD = GraphCheckpoint._meta.get_field("metadata")
_CHECKPOINT = GraphCheckpoint._meta.db_table
_CHECKPOINT_COLUMNS = (
    "task_id",
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "metadata",
)
_CHECKPOINT_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id")
_BLOB = GraphBlob._meta.db_table
_BLOB_COLUMNS = ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob")
_BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
_WRITE = GraphWrite._meta.db_table
_WRITE_COLUMNS = (
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
_WRITE_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id", "graph_task_id", "idx")


def _insert_sql(
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


def _execute(db: BaseDatabaseWrapper, sql: str, params: list[Any], *, fetch: bool = False) -> Any:
    if db.vendor == "postgresql":
        # Server-side parameter binding: Django's psycopg cursors bind on the client, which
        # escapes every blob into the SQL text (most of a put's time for a 10 KB channel).
        db.ensure_connection()
        with psycopg.Cursor(db.connection) as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()[0] if fetch else None
    else:
        with db.cursor() as cursor:
            cursor.execute(sql, params)
