"""The write path of the LangGraph saver: put (a checkpoint and its channel blobs) and
put_writes (a task's pending writes), each fenced on the task run's lease when bound to one.

Transactions are short: every write is one autocommit statement, or one transaction of a few
statements, never held across a graph step or an await. On SQLite (WAL, IMMEDIATE transactions,
busy timeout) writers therefore queue for milliseconds instead of failing "database is locked".
Writes are ordered so a crash between two statements leaves only unreferenced blob rows.

Each write is fenced on the task run's lease by FencedWrites (checkpoints.langgraph.fence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from checkpoints.langgraph.fence import FencedWrites
from checkpoints.langgraph.sql import (
    BLOB_COLUMNS,
    BLOB_KEY,
    BLOB_TABLE,
    CHECKPOINT_COLUMNS,
    CHECKPOINT_KEY,
    CHECKPOINT_TABLE,
    METADATA_FIELD,
    TASK_FIELD,
    VERSIONS_FIELD,
    WRITE_COLUMNS,
    WRITE_KEY,
    WRITE_TABLE,
    insert_sql,
)

# Channel values stored inside the checkpoint row rather than as a blob: small and immutable.
INLINE_TYPES = (str, int, float, bool)


class CheckpointWrites(FencedWrites):
    """DjangoCheckpointSaver's writes, run where the saver's `_call` / `_acall` puts them (its
    database thread). Uses the saver's `serde`, `using`, `task_id` and `epoch`."""

    serde: SerializerProtocol
    using: str
    task_id: Any
    epoch: int | None
    # The code the graph runs with (agent.versions), recorded on each checkpoint it puts.
    versions: dict[str, Any]

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
            if value is None or isinstance(value, INLINE_TYPES):
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
        metadata_db = METADATA_FIELD.get_db_prep_save(metadata_json, connections[self.using])

        db = connections[self.using]
        guard = self.epoch is not None and db.vendor == "postgresql"
        checkpoint_sql = insert_sql(
            db,
            CHECKPOINT_TABLE,
            CHECKPOINT_COLUMNS,
            [
                (
                    # Raw SQL: the task's UUID in the backend's own form (hex text on SQLite).
                    TASK_FIELD.get_db_prep_save(self.task_id, db),
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    parent_id,
                    type_,
                    payload,
                    metadata_db,
                    VERSIONS_FIELD.get_db_prep_save(self.versions, db),
                )
            ],
            CHECKPOINT_KEY,
            update=("type", "checkpoint", "metadata", "versions"),
            guard=guard,
        )
        blob_sql = (
            insert_sql(db, BLOB_TABLE, BLOB_COLUMNS, blob_rows, BLOB_KEY, update=(), guard=guard)
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
            [
                insert_sql(
                    db, WRITE_TABLE, WRITE_COLUMNS, rows, WRITE_KEY, update=update, guard=guard
                )
            ],
        )
