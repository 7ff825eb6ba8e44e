"""Whole threads of the LangGraph saver: delete_thread, delete_for_runs, copy_thread and
prune (keep each namespace's latest checkpoint, or delete)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import Q
from langgraph.checkpoint.serde.base import SerializerProtocol

from checkpoints.models import GraphBlob, GraphCheckpoint, GraphWrite

PRUNE_STRATEGIES = ("keep_latest", "delete")


GraphRow = TypeVar("GraphRow", GraphBlob, GraphCheckpoint, GraphWrite)


class ThreadMaintenance:
    """DjangoCheckpointSaver's operations on whole threads, run where the saver's `_call` /
    `_acall` puts them (its database thread). Uses the saver's `serde` and `using`."""

    serde: SerializerProtocol
    using: str

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

    def _copy_rows(
        self,
        model: type[GraphRow],
        source: str,
        target: str,
        **overrides: Any,
    ) -> None:
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


def prune_arguments(thread_ids: Sequence[str], strategy: str) -> list[str]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    return [str(t) for t in thread_ids]
