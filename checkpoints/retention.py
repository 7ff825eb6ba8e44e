"""Retention (`retention` in harness.yaml): thin out the checkpoints of finished tasks, then
collect the blobs no remaining checkpoint references. The sweep runs `retention_run` every
`retention.every` (agent.sweep, by the dotted path in settings.HARNESS_RETENTION_JOB).

Once a task has finished (succeeded, failed, canceled), of each checkpoint level it keeps the
newest `keep_last_per_task`, and every checkpoint of a level in `keep_levels` (by default
`task` and `step`: what rollback and retry start from). Whatever the rule says, a checkpoint
stays when something may still need it:

- the task's head;
- a checkpoint an open (pending) review refers to;
- the base a rollback, retry or forward recovery forked from (the parent of a checkpoint
  with one of those triggers).

A kept checkpoint whose parent goes is linked to the nearest ancestor that stays, so the
parent chain still leads back to the task's start.
- every checkpoint of a task that is not finished — running, queued, waiting for a review,
  held after a rollback, stalled — and of a task with a call whose outcome is unknown.

Each run looks only at the tasks that finished since the previous run (`finished_at`, an
index), at most MAX_TASKS_PER_RUN of them, oldest first; it never scans the checkpoint table.

Blobs are content-addressed and shared across tasks, so a blob is garbage only when no
checkpoint of any task references it, and only once it is older than BLOB_GRACE_S: a capture
uploads blobs before the checkpoint that references them commits, and a worker trusts "already
stored" for `checkpoints.snapshots.TRUST_STORED_S`, far less than the grace period. Proving a
blob unreferenced reads every checkpoint's snapshot root, so the collection runs on its own,
much longer schedule (`retention.gc_every`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint, GraphWorkspace, Level
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from checkpoints.snapshots import snapshot_blob_keys
from harness_site.config import RetentionConfig, harness_config
from review.models import ReviewRequest, ReviewStatus
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.states import TERMINAL

BLOB_GRACE_S = 24 * 3600
MAX_TASKS_PER_RUN = 2000
# Checkpoints checkpoints.recovery forks from a base (their parent): the bases stay.
RECOVERY_TRIGGERS = ("rollback", "retry", "forward")
# Snapshot roots kept by apps above this one, by dotted path (they import this app, not the
# other way round): the shared directories' snapshots of multi-agent global checkpoints.
BLOB_REFERRERS = ("multiagent.selectors.shared_snapshot_roots",)


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
    reviewed = ReviewRequest.objects.filter(
        task_id=task_id, status=ReviewStatus.PENDING, checkpoint__isnull=False
    ).values_list("checkpoint_id", flat=True)
    forked_from = Checkpoint.objects.filter(
        task_id=task_id, trigger__in=RECOVERY_TRIGGERS, parent__isnull=False
    ).values_list("parent_id", flat=True)
    return {*head, *reviewed, *forked_from} - {None}


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
        if not doomed:
            return 0
        _relink_children(task_id=task_id, doomed=set(doomed))
        return Checkpoint.objects.filter(id__in=doomed).delete()[0]


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


def retention_run(*, state: dict[str, Any], collect_garbage: bool) -> dict[str, Any]:
    """The sweep's periodic job: `state` is what the previous run returned ({} the first
    time); the result is recorded by the sweep and handed to the next run."""
    cursor = state.get("cursor")
    result = checkpoints_apply_retention(since=datetime.fromisoformat(cursor) if cursor else None)
    if collect_garbage:
        result = RetentionResult(**{**asdict(result), "blobs_deleted": blobs_collect_garbage()})
    return asdict(result)


def _referenced_blobs() -> set[str]:
    """Every blob a checkpoint of any task references (root, chunks and file bodies), the
    workspace snapshots of graph checkpoints included, and the snapshot roots other apps keep
    (BLOB_REFERRERS)."""
    roots: set[str] = {
        snapshot["root"]
        for snapshot in GraphWorkspace.objects.values_list("snapshot", flat=True).iterator(
            chunk_size=2000
        )
        if snapshot
    }
    for referrer in BLOB_REFERRERS:
        roots |= set(import_string(referrer)())
    for checkpoint in Checkpoint.objects.only("id", "seq", "payload", "checksum").iterator(
        chunk_size=500
    ):
        try:
            snapshot = checkpoint_decode(checkpoint).snapshot
        except CheckpointCorrupted:
            continue
        if snapshot:
            roots.add(snapshot["root"])
    referenced = set(roots)
    for root in roots:
        try:
            referenced |= snapshot_blob_keys({"root": root})
        except (BlobMissing, BlobCorrupted):
            continue  # a broken snapshot keeps whatever of it is left
    return referenced


def blobs_collect_garbage() -> int:
    store = blob_store()
    candidates = set(store.keys_older_than(timezone.now() - timedelta(seconds=BLOB_GRACE_S)))
    if not candidates:
        return 0
    return store.delete_many(candidates - _referenced_blobs())
