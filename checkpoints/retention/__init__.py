"""Retention (`retention` in harness.yaml): thin out the checkpoints of finished tasks, then
collect the blobs no remaining checkpoint references. The sweep runs `retention_run` every
`retention.every` (agent.sweep, by the dotted path in settings.HARNESS_RETENTION_JOB).

Once a task has finished (succeeded, failed, canceled), of each checkpoint level it keeps the
newest `keep_last_per_task`, and every checkpoint of a level in `keep_levels` (by default
`task` and `step`: what rollback and retry start from). Whatever the rule says, a checkpoint
stays when something may still need it:

- the task's head;
- a checkpoint an open (pending) review refers to;
- the base a rollback, retry, forward or group rollback forked from (the parent of a
  checkpoint with one of those triggers);
- a checkpoint a global checkpoint not yet superseded names (a group rollback may go back to
  it; CHECKPOINT_REFERRERS);
- every checkpoint of a task that is not finished — running, queued, waiting for a review,
  held after a rollback, stalled — and of a task with a call whose outcome is unknown.

A kept checkpoint whose parent goes is linked to the nearest ancestor that stays, so the
parent chain still leads back to the task's start.

Each run looks only at the tasks that finished since the previous run (`finished_at`, an
index), at most MAX_TASKS_PER_RUN of them, oldest first; it never scans the checkpoint table.

Blobs are content-addressed and shared across tasks, so a blob is garbage only when nothing
references it: no checkpoint of any task, no graph workspace, no global checkpoint's shared
directory. Reference counts (BlobRef, `refcounts`) say so without reading the checkpoints: every
run counts the checkpoints written since the last one and thinning uncounts what it deletes;
the collection (every `retention.gc_every`) deletes, in a bounded batch, the blobs whose count
has been 0 for BLOB_GRACE_S and the blobs stored that long ago that were never counted (an
upload whose checkpoint never committed), walking the store by age from where it stopped.
The grace period covers a capture that uploads blobs before the checkpoint naming them
commits, and a worker that trusts "already stored" for `checkpoints.snapshots.TRUST_STORED_S`,
far less than the grace period.

The modules, from the bottom: `refcounts` (BlobRef: blob_refs_add, blobs_count), `thinning`
(checkpoints_protected, checkpoints_thin_task, checkpoints_apply_retention), `collection`
(blobs_collect_garbage) and `run` (retention_run, the sweep's job). Callers import from this
package (settings.HARNESS_RETENTION_JOB names `checkpoints.retention.retention_run`).
"""

from __future__ import annotations

from checkpoints.retention.collection import (
    BLOB_GRACE_S,
    BLOB_REFERRERS,
    MAX_COLLECT_PER_RUN,
    Collected,
    blobs_collect_garbage,
)
from checkpoints.retention.refcounts import (
    COUNT_BATCH,
    MAX_COUNT_PER_RUN,
    blob_refs_add,
    blobs_count,
)
from checkpoints.retention.run import retention_run
from checkpoints.retention.thinning import (
    CHECKPOINT_REFERRERS,
    MAX_TASKS_PER_RUN,
    RECOVERY_TRIGGERS,
    RetentionResult,
    checkpoints_apply_retention,
    checkpoints_protected,
    checkpoints_thin_task,
)

__all__ = [
    "BLOB_GRACE_S",
    "BLOB_REFERRERS",
    "CHECKPOINT_REFERRERS",
    "COUNT_BATCH",
    "MAX_COLLECT_PER_RUN",
    "MAX_COUNT_PER_RUN",
    "MAX_TASKS_PER_RUN",
    "RECOVERY_TRIGGERS",
    "Collected",
    "RetentionResult",
    "blob_refs_add",
    "blobs_collect_garbage",
    "blobs_count",
    "checkpoints_apply_retention",
    "checkpoints_protected",
    "checkpoints_thin_task",
    "retention_run",
]
