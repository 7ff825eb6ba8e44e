"""Retention (`retention` in harness.yaml): thin out old checkpoints, then collect the blobs no
remaining checkpoint references. Called by the sweeper (`manage.py harness_sweep`).

A task keeps its newest `keep_last_per_task` checkpoints, every checkpoint whose level is in
`keep_levels` (by default `task` and `step`: what rollback and retry start from) and its head;
older checkpoints of other levels (the `tool` ones taken before each side effect) go.

Blobs are content-addressed and shared, so a blob is garbage only when no checkpoint of any
task references it, and only once it is older than BLOB_GRACE_S: a capture uploads blobs
before the checkpoint that references them commits, and a worker trusts "already stored" for
`checkpoints.snapshots.TRUST_STORED_S`, far less than the grace period.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count
from django.utils import timezone

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from checkpoints.snapshots import snapshot_blob_keys
from harness_site.config import harness_config
from tasks.models import Task

BLOB_GRACE_S = 24 * 3600


@dataclass(frozen=True)
class RetentionResult:
    checkpoints_deleted: int
    blobs_deleted: int


def checkpoints_apply_retention() -> RetentionResult:
    policy = harness_config().retention
    deleted = 0
    crowded = (
        Checkpoint.objects.values("task_id")
        .annotate(n=Count("id"))
        .filter(n__gt=policy.keep_last_per_task)
        .values_list("task_id", flat=True)
    )
    for task_id in crowded:
        seqs = (
            Checkpoint.objects.filter(task_id=task_id)
            .order_by("-seq")
            .values_list("seq", flat=True)
        )
        oldest_kept = seqs[policy.keep_last_per_task - 1]
        head = Task.objects.filter(id=task_id).values_list("head_checkpoint_id", flat=True)
        deleted += (
            Checkpoint.objects.filter(task_id=task_id, seq__lt=oldest_kept)
            .exclude(level__in=policy.keep_levels)
            .exclude(id__in=head)
            .delete()[0]
        )
    return RetentionResult(checkpoints_deleted=deleted, blobs_deleted=blobs_collect_garbage())


def _referenced_blobs() -> set[str]:
    """Every blob a checkpoint of any task references (root, chunks and file bodies)."""
    roots: set[str] = set()
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
