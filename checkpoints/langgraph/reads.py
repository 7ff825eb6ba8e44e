"""The read path of the LangGraph saver: get_tuple and list, each turning checkpoint rows
into CheckpointTuples with their channel values and pending writes."""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import Q
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointTuple,
    get_checkpoint_id,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from checkpoints.langgraph.sql import BLOB_COLUMNS, ROW_FIELDS, WRITE_COLUMNS
from checkpoints.models import GraphBlob, GraphCheckpoint, GraphWrite


class CheckpointReads:
    """DjangoCheckpointSaver's reads, run where the saver's `_call` / `_acall` puts them (its
    database thread). Uses the saver's `serde` and `using`."""

    serde: SerializerProtocol
    using: str

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
        row = rows.values(*ROW_FIELDS).first()
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
        for row in rows.values(*ROW_FIELDS).iterator(chunk_size=100):
            if post_filter is not None and not json_contains(row["metadata"], post_filter):
                continue
            found.append(row)
            if limit is not None and len(found) >= limit:
                break
        return self._tuples(found)

    def _tuples(self, rows: list[dict[str, Any]]) -> list[CheckpointTuple]:
        """CheckpointTuples for rows of one or more threads: two queries whatever the count."""
        if not rows:
            return []
        bodies: list[Checkpoint] = [
            self.serde.loads_typed((row["type"], bytes(row["checkpoint"]))) for row in rows
        ]

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
                GraphBlob.objects.using(self.using).filter(wanted).values_list(*BLOB_COLUMNS)
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
        writes: dict[tuple[str, str, str], list[tuple[Any, ...]]] = {}
        for w in (
            GraphWrite.objects.using(self.using).filter(of_checkpoint).values_list(*WRITE_COLUMNS)
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


def json_contains(document: Any, pattern: Any) -> bool:
    """PostgreSQL's jsonb `@>` for SQLite: objects contain sub-objects, arrays contain
    elements, scalars are equal."""
    if isinstance(pattern, dict):
        return isinstance(document, dict) and all(
            key in document and json_contains(document[key], value)
            for key, value in pattern.items()
        )
    if isinstance(pattern, list):
        return isinstance(document, list) and all(
            any(json_contains(item, wanted) for item in document) for wanted in pattern
        )
    if isinstance(document, bool) or isinstance(pattern, bool):
        return type(document) is type(pattern) and bool(document == pattern)
    return bool(document == pattern)
