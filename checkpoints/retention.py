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
directory. Reference counts (BlobRef, below) say so without reading the checkpoints: every
run counts the checkpoints written since the last one and thinning uncounts what it deletes;
the collection (every `retention.gc_every`) deletes, in a bounded batch, the blobs whose count
has been 0 for BLOB_GRACE_S and the blobs stored that long ago that were never counted (an
upload whose checkpoint never committed), walking the store by age from where it stopped.
The grace period covers a capture that uploads blobs before the checkpoint naming them
commits, and a worker that trusts "already stored" for `checkpoints.snapshots.TRUST_STORED_S`,
far less than the grace period.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from checkpoints.blobstore import BlobCorrupted, BlobMissing, batched, blob_store
from checkpoints.models import BlobRef, Checkpoint, GraphWorkspace, Level
from checkpoints.services import CheckpointCorrupted, checkpoint_base_key, checkpoint_decode
from checkpoints.snapshots import snapshot_blob_keys
from harness_base.config import RetentionConfig, harness_config
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.signals import checkpoints_needed_ids
from tasks.states import TERMINAL

BLOB_GRACE_S = 24 * 3600
MAX_TASKS_PER_RUN = 2000
# Checkpoints checkpoints.recovery forks from a base (their parent): the bases stay.
RECOVERY_TRIGGERS = ("rollback", "retry", "forward", "group_rollback")
# Snapshot roots kept by apps above this one, by dotted path (they import this app, not the
# other way round): the shared directories' snapshots of multi-agent global checkpoints.
BLOB_REFERRERS = ("multiagent.selectors.shared_snapshot_roots",)
# The same for checkpoints (called with task_id=): those a group rollback may go back to.
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
        if not doomed:
            return 0
        _relink_children(task_id=task_id, doomed=set(doomed))
        counted_rows = list(Checkpoint.objects.filter(id__in=doomed, blobs_counted=True))
        uncounted = Counter(root for row in counted_rows if (root := _snapshot_root(row)))
        bases = Counter(base for row in counted_rows if (base := _payload_base(row)))
        deleted = Checkpoint.objects.filter(id__in=doomed).delete()[0]
    # After the commit: a crash before this leaves counts too high, which only keeps blobs.
    blob_refs_add("r", {root: -n for root, n in uncounted.items()})
    blob_refs_add("b", {base: -n for base, n in bases.items()})
    return deleted


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
    time); the result is recorded by the sweep and handed to the next run. Every run counts
    the snapshots written since the last one (bounded); `collect_garbage` also collects."""
    cursor = state.get("cursor")
    # Counted first, so that thinning uncounts what it deletes.
    blobs_count()
    result = checkpoints_apply_retention(since=datetime.fromisoformat(cursor) if cursor else None)
    out = asdict(result)
    if collect_garbage:
        after = state.get("orphans_after")
        collected = blobs_collect_garbage(
            orphans_after=datetime.fromisoformat(after) if after else None
        )
        out |= {"blobs_deleted": collected.deleted, "orphans_after": collected.orphans_after}
    elif state.get("orphans_after"):
        out["orphans_after"] = state["orphans_after"]
    return out


# --- blob reference counts --------------------------------------------------------------------
# Blobs form a tree: a checkpoint (or graph workspace) names a snapshot root, a root lists
# manifest chunks, a chunk lists file bodies. BlobRef counts, per blob, the holders one level
# up: a root's count is its checkpoints and graph workspaces, a chunk's the live roots (count
# > 0) listing it, a file body's the live chunks listing it. A checkpoint whose payload is
# compressed against a base (checkpoints.services) also counts that base ("b", a leaf).
# A blob going live or dead moves
# the counts of what it lists, so the collection reads only blobs whose count fell to 0, never
# the checkpoints. Counts are kept by retention alone (the sweep runs it one at a time): every
# run counts the checkpoints written since (`blobs_counted`, a partial index), thinning
# uncounts what it deletes. A task deleted outright leaves its counts: its blobs are kept (the
# safe side). Shared directories' snapshots (BLOB_REFERRERS, few) are not counted: their
# blobs are excluded from each collection.

COUNT_BATCH = 500
# Holders counted per run at most; a backlog (the first run on an existing database) is
# worked off over the following runs, and holds the collection back until it is.
MAX_COUNT_PER_RUN = 5_000
# Blobs deleted per collection at most (candidates, then never-referenced blobs by age).
MAX_COLLECT_PER_RUN = 20_000
_CHILD = {"r": "c", "c": "f"}


@dataclass(frozen=True)
class Collected:
    deleted: int
    # stored_at of the newest blob examined for never having been referenced: the next
    # collection goes on from there.
    orphans_after: str | None


def _snapshot_root(row: Checkpoint | GraphWorkspace) -> str | None:
    if isinstance(row, GraphWorkspace):
        snapshot = row.snapshot
    else:
        try:
            snapshot = checkpoint_decode(row).snapshot
        except CheckpointCorrupted:
            return None
    return snapshot.get("root") if isinstance(snapshot, dict) else None


def _payload_base(row: Checkpoint | GraphWorkspace) -> str | None:
    """The blob a checkpoint's payload is compressed against, if any."""
    return checkpoint_base_key(row.payload) if isinstance(row, Checkpoint) else None


def _listed(digests: set[str], kind: str) -> dict[str, list[str]]:
    """What each root lists (its chunks) or each chunk lists (its file bodies). A blob the
    store cannot produce lists nothing, the same when it is counted and when uncounted."""
    store = blob_store()
    bodies: dict[str, bytes] = {}
    for batch in batched(sorted(digests)):
        try:
            bodies |= store.get_many(batch)
        except (BlobMissing, BlobCorrupted):
            for digest in batch:
                try:
                    bodies[digest] = store.get(digest)
                except (BlobMissing, BlobCorrupted):
                    continue
    out: dict[str, list[str]] = {}
    for digest in digests:
        try:
            body = json.loads(bodies[digest])
            out[digest] = body["chunks"] if kind == "r" else [entry[1] for entry in body]
        except (KeyError, TypeError, IndexError, ValueError):
            out[digest] = []
    return out


def blob_refs_add(kind: str, deltas: Counter[str] | dict[str, int]) -> None:
    """Add to the counts of these blobs of one kind ("r", "c", "f", "b"); a blob going live (0 ->
    more) or dead (more -> 0) adds to or takes from the counts of what it lists."""
    deltas = {digest: delta for digest, delta in deltas.items() if delta}
    if not deltas:
        return
    now = timezone.now()
    born: set[str] = set()
    died: set[str] = set()
    for batch in batched(sorted(deltas)):
        keys = {f"{kind}:{digest}": digest for digest in batch}
        rows = {row.key: row for row in BlobRef.objects.filter(key__in=list(keys))}
        new, changed = [], []
        for key, digest in keys.items():
            row = rows.get(key)
            before = row.refs if row else 0
            after = max(before + deltas[digest], 0)
            if before <= 0 < after:
                born.add(digest)
            elif after <= 0 < before:
                died.add(digest)
            if after > 0:
                zero_since = None
            elif before > 0 or row is None:
                zero_since = now  # dead from now on
            else:
                zero_since = row.zero_since  # dead since then
            if row is None:
                new.append(BlobRef(key=key, refs=after, zero_since=zero_since))
            else:
                row.refs, row.zero_since = after, zero_since
                changed.append(row)
        BlobRef.objects.bulk_create(new)
        BlobRef.objects.bulk_update(changed, ["refs", "zero_since"])
    child = _CHILD.get(kind)
    if child and (born or died):
        listed = _listed(born | died, kind)
        moves: Counter[str] = Counter()
        for digest in born:
            moves.update(listed[digest])
        for digest in died:
            moves.subtract(listed[digest])
        blob_refs_add(child, moves)


def blobs_count(*, limit: int = MAX_COUNT_PER_RUN) -> bool:
    """Count the snapshots of the checkpoints and graph workspaces written since the last
    count, at most `limit`; -> True when none is left uncounted."""
    counted = 0
    for model in (Checkpoint, GraphWorkspace):
        while counted < limit:
            with transaction.atomic():
                rows = list(
                    model.objects.select_for_update(skip_locked=True)
                    .filter(blobs_counted=False)
                    .order_by("created_at")[:COUNT_BATCH]
                )
                if not rows:
                    break
                model.objects.filter(pk__in=[row.pk for row in rows]).update(blobs_counted=True)
                blob_refs_add("r", Counter(r for r in map(_snapshot_root, rows) if r))
                blob_refs_add("b", Counter(b for b in map(_payload_base, rows) if b))
                counted += len(rows)
    return not (
        Checkpoint.objects.filter(blobs_counted=False).exists()
        or GraphWorkspace.objects.filter(blobs_counted=False).exists()
    )


def _referred_blobs() -> set[str]:
    """Every blob of the snapshots other apps keep (BLOB_REFERRERS), which are not counted."""
    keys: set[str] = set()
    for referrer in BLOB_REFERRERS:
        for root in import_string(referrer)():
            try:
                keys |= snapshot_blob_keys({"root": root})
            except (BlobMissing, BlobCorrupted):
                keys.add(root)  # a broken snapshot keeps whatever of it is left
    return keys


def blobs_collect_garbage(
    *, orphans_after: datetime | None = None, limit: int = MAX_COLLECT_PER_RUN
) -> Collected:
    """Delete the blobs nothing references, at most `limit`: those whose every count has been
    0 for BLOB_GRACE_S, then those stored before that and never counted at all (an upload
    whose checkpoint never committed), walking the store by age from `orphans_after`.

    Only once every checkpoint is counted (else nothing is deleted this time). The grace
    covers a capture that found a blob stored and names it in a checkpoint not counted yet
    (a worker trusts "already stored" for `checkpoints.snapshots.TRUST_STORED_S`, far less);
    the counts are brought up to date again right before deleting."""
    cursor = orphans_after.isoformat() if orphans_after else None
    if not blobs_count():
        return Collected(0, cursor)
    cutoff = timezone.now() - timedelta(seconds=BLOB_GRACE_S)
    dead = list(
        BlobRef.objects.filter(refs__lte=0, zero_since__lt=cutoff)
        .order_by("zero_since")
        .values_list("key", flat=True)[:limit]
    )
    dead_digests = {key.split(":", 1)[1] for key in dead}
    stored = blob_store().stored_between(orphans_after, cutoff, limit)
    walked = {key for key, _at in stored}
    if stored:
        cursor = max(at for _key, at in stored).isoformat()
    candidates = dead_digests | walked
    if not candidates or not blobs_count():
        return Collected(0, cursor)
    kinds = [f"{kind}:{digest}" for digest in candidates for kind in "rcfb"]
    counted: set[str] = set()
    live: set[str] = set()
    for batch in batched(kinds):
        for key, refs in BlobRef.objects.filter(key__in=batch).values_list("key", "refs"):
            counted.add(key.split(":", 1)[1])
            if refs > 0:
                live.add(key.split(":", 1)[1])
    # A blob whose count fell to 0 goes unless it is live as another kind; a blob from the
    # walk by age only when it was never counted (a counted one goes by its count).
    doomed = {d for d in dead_digests if d not in live} | (walked - counted)
    doomed -= _referred_blobs()
    deleted = blob_store().delete_many(doomed)
    BlobRef.objects.filter(key__in=[k for k in kinds if k.split(":", 1)[1] in doomed]).filter(
        refs__lte=0
    ).delete()
    return Collected(deleted, cursor)
