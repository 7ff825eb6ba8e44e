"""Thinning the checkpoints of finished tasks: what always stays (`checkpoints_protected`), one
task (`checkpoints_thin_task`, relinking the survivors), and the tasks finished since the last
run (`checkpoints_apply_retention`)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string

from checkpoints.models import Checkpoint, Level
from checkpoints.payload import checkpoint_same_as
from checkpoints.retention.refcounts import blob_refs_add, blobs_held, payload_base
from harness_base.config import RetentionConfig, harness_config
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.signals import checkpoints_needed_ids
from tasks.states import TERMINAL

MAX_TASKS_PER_RUN = 2000
# Checkpoints checkpoints.recovery forks from a base (their parent): the bases stay.
RECOVERY_TRIGGERS = ("rollback", "retry", "forward", "group_rollback")
# Checkpoints kept by apps above this one, by dotted path (called with task_id=): those a group
# rollback may go back to.
CHECKPOINT_REFERRERS = ("multiagent.selectors.global_checkpoint_targets",)


@dataclass(frozen=True)
class RetentionResult:
    checkpoints_deleted: int
    blobs_deleted: int
    tasks: int = 0
    # finished_at of the newest task looked at: the next run starts after it.
    cursor: str | None = None


def checkpoints_protected(*, task_id: Any) -> set[Any]:
    """Ids of the task's checkpoints that must stay whatever the keep rule says."""
    head = Task.objects.filter(id=task_id).values_list("head_checkpoint_id", flat=True)
    # Those an open review refers to (review answers; tasks.signals).
    reviewed = checkpoints_needed_ids(task_id=task_id)
    forked_from = Checkpoint.objects.filter(
        task_id=task_id, trigger__in=RECOVERY_TRIGGERS, parent__isnull=False
    ).values_list("parent_id", flat=True)
    referred = {
        uuid.UUID(str(checkpoint_id))
        for referrer in CHECKPOINT_REFERRERS
        for checkpoint_id in import_string(referrer)(task_id=task_id)
    }
    return {*head, *reviewed, *forked_from, *referred} - {None}


def checkpoints_thin_task(*, task_id: Any, policy: RetentionConfig) -> int:
    """Delete the finished task's checkpoints the keep rule lets go; returns how many.
    Lock contract: the task row (select_for_update), so a retry or rollback that would make
    the task unfinished waits until the thinning committed, and vice versa."""
    with transaction.atomic():
        task = (
            Task.objects.select_for_update()
            .filter(id=task_id, status__in=TERMINAL)
            .only("id", "status")
            .first()
        )
        if task is None:
            return 0
        if ToolCall.objects.filter(task_id=task_id, status=ToolCallStatus.UNKNOWN_OUTCOME).exists():
            return 0
        protected = checkpoints_protected(task_id=task_id)
        doomed: list[Any] = []
        for level in Level.values:
            if level in policy.keep_levels:
                continue
            ids = list(
                Checkpoint.objects.filter(task_id=task_id, level=level)
                .order_by("-seq")
                .values_list("id", flat=True)[policy.keep_last_per_task :]
            )
            doomed.extend(i for i in ids if i not in protected)
        doomed = _sources_kept(task_id=task_id, doomed=doomed)
        if not doomed:
            return 0
        _relink_children(task_id=task_id, doomed=set(doomed))
        counted_rows = list(Checkpoint.objects.filter(id__in=doomed, blobs_counted=True))
        held = [blobs_held(row) for row in counted_rows]
        uncounted = Counter(root for root, _heads, _files in held if root)
        files = Counter(f for _root, _heads, row_files in held for f in row_files)
        heads = Counter(head for _root, row_heads, _files in held for head in row_heads)
        bases = Counter(base for row in counted_rows if (base := payload_base(row)))
        deleted = Checkpoint.objects.filter(id__in=doomed).delete()[0]
    # After the commit: a crash before this leaves counts too high, which only keeps blobs.
    blob_refs_add("r", {root: -n for root, n in uncounted.items()})
    blob_refs_add("f", {f: -n for f, n in files.items()})
    blob_refs_add("b", {base: -n for base, n in bases.items()})
    blob_refs_add("h", {head: -n for head, n in heads.items()})
    return deleted


def _sources_kept(*, task_id: Any, doomed: list[Any]) -> list[Any]:
    """`doomed` less the checkpoints whose payload a surviving one is stored as
    (checkpoints.payload.checkpoint_same_as): they stay while it does."""
    gone = set(doomed)
    survivors = Checkpoint.objects.filter(task_id=task_id).exclude(id__in=gone)
    sources = {
        source
        for payload in survivors.values_list("payload", flat=True).iterator(chunk_size=500)
        if (source := checkpoint_same_as(payload)) is not None
    }
    return [i for i in doomed if i not in sources]


def _relink_children(*, task_id: Any, doomed: set[Any]) -> None:
    parents = dict(Checkpoint.objects.filter(task_id=task_id).values_list("id", "parent_id"))

    def surviving(ancestor: Any) -> Any:
        while ancestor in doomed:
            ancestor = parents.get(ancestor)
        return ancestor

    for child, parent in parents.items():
        if child not in doomed and parent in doomed:
            Checkpoint.objects.filter(id=child).update(parent_id=surviving(parent))


def checkpoints_apply_retention(*, since: datetime | None = None) -> RetentionResult:
    """Thin the tasks that finished after `since` (every finished task if None), oldest first,
    at most MAX_TASKS_PER_RUN."""
    policy = harness_config().retention
    finished = Task.objects.filter(status__in=TERMINAL, finished_at__isnull=False)
    if since is not None:
        finished = finished.filter(finished_at__gt=since)
    rows = list(finished.order_by("finished_at").values_list("id", "finished_at"))[
        :MAX_TASKS_PER_RUN
    ]
    deleted = sum(checkpoints_thin_task(task_id=task_id, policy=policy) for task_id, _ in rows)
    cursor = rows[-1][1] if rows else since
    return RetentionResult(
        checkpoints_deleted=deleted,
        blobs_deleted=0,
        tasks=len(rows),
        cursor=cursor.isoformat() if cursor else None,
    )
