"""Storage lifecycle: what a finished task keeps once retention has thinned it and garbage
collection has taken the blobs nothing references any more.

A `write` task of N steps (bench/loop/'s: each step writes a new 300-character file) runs
to the end in-process; then, as the sweep does (`checkpoints.retention.retention_run`): its
checkpoints are counted in the blob reference counts, thinned under a keep rule
(harness.yaml's, and a lean one keeping only task-level checkpoints whole), and the blobs
collected, with the grace period (BLOB_GRACE_S) taken as passed for this run's blobs and
counts. Stored bytes = the task's rows (pg_column_size of its checkpoints, events and tool
calls) + the blobs its run stored, before and after. The floor is what the keep rule needs:
the remaining rows + the blobs the remaining checkpoints' snapshots reference. Also timed:
counting, thinning and collecting (the collection reads only the blobs whose count fell to 0
and the blobs stored since its last run, never the checkpoints).

Expected run time (quiet 2-CPU machine): smoke ~10 s; full ~1 min (3 tasks of 200 steps under
each of two keep rules).
"""

from __future__ import annotations

import time
from datetime import timedelta
from statistics import median
from typing import Any

from bench.common import figure, stats
from bench.loop import ours_cleanup, ours_prepare, ours_run, ours_stored_bytes

TITLE = "Storage lifecycle (retention and blob collection)"
SIZES = {"smoke": {"steps": 6, "repeat": 1}, "full": {"steps": 200, "repeat": 3}}


def _blob_bytes(keys: set[str]) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM checkpoints_blob b"
            " WHERE b.sha256 = ANY(%s)",
            [list(keys)],
        )
        return int(cursor.fetchone()[0])


def _needed(task_id: Any) -> set[str]:
    """Every blob the task's remaining checkpoints reference (snapshots and payload bases)."""
    from checkpoints.models import Checkpoint
    from checkpoints.payload import checkpoint_base_key
    from checkpoints.services import checkpoint_decode
    from checkpoints.snapshots import snapshot_blob_keys

    rows = list(Checkpoint.objects.filter(task_id=task_id))
    return set().union(
        *(snapshot_blob_keys(checkpoint_decode(c).snapshot) for c in rows),
        {key for c in rows if (key := checkpoint_base_key(c.payload))},
    )


def one_task(steps: int, policy: Any) -> dict[str, Any]:
    from django.utils import timezone

    from checkpoints.blobstore import blob_store
    from checkpoints.models import Blob, BlobRef, Checkpoint
    from checkpoints.retention import (
        BLOB_GRACE_S,
        blobs_collect_garbage,
        blobs_count,
        checkpoints_thin_task,
    )

    task = ours_prepare(steps, "write")
    started = timezone.now()
    ours_run(task)
    ours_keys = set(Blob.objects.filter(created_at__gte=started).values_list("sha256", flat=True))
    rows_before = ours_stored_bytes(task.id)
    blobs_before = _blob_bytes(ours_keys)
    checkpoints_before = Checkpoint.objects.filter(task_id=task.id).count()

    clock = time.perf_counter()
    blobs_count()
    counted_s = time.perf_counter() - clock
    clock = time.perf_counter()
    deleted = checkpoints_thin_task(task_id=task.id, policy=policy)
    thinned_s = time.perf_counter() - clock
    # The grace period passes for this run's blobs and counts (and only for those).
    old = timezone.now() - timedelta(seconds=BLOB_GRACE_S + 60)
    Blob.objects.filter(sha256__in=ours_keys).update(created_at=old)
    dead = [f"{kind}:{key}" for key in ours_keys for kind in "rcfb"]
    BlobRef.objects.filter(key__in=dead, refs__lte=0).update(zero_since=old)
    clock = time.perf_counter()
    collected = blobs_collect_garbage(orphans_after=old - timedelta(seconds=1))
    collected_s = time.perf_counter() - clock

    left = set(Blob.objects.filter(sha256__in=ours_keys).values_list("sha256", flat=True))
    needed = _needed(task.id) & ours_keys
    rows_after = ours_stored_bytes(task.id)
    result = {
        "steps": steps,
        "bytes_before": rows_before + blobs_before,
        "bytes_after": rows_after + _blob_bytes(left),
        "bytes_floor": rows_after + _blob_bytes(needed),
        "blobs_before": len(ours_keys),
        "blobs_after": len(left),
        "blobs_needed": len(needed),
        "blobs_deleted": collected.deleted,
        "checkpoints_before": checkpoints_before,
        "checkpoints_deleted": deleted,
        "count_s": counted_s,
        "thin_s": thinned_s,
        "collect_s": collected_s,
    }
    ours_cleanup(task)
    blob_store().delete_many(left)
    BlobRef.objects.filter(key__in=dead).delete()
    return result


def _figure(steps: int, label: str, runs: list[dict[str, Any]], policy: Any) -> dict[str, Any]:
    def kb(key: str) -> dict[str, float]:
        return stats([r[key] for r in runs], scale=1 / 1000)

    def mid(key: str) -> float:
        return median(r[key] for r in runs)

    return figure(
        figure=f"stored bytes of a finished {steps}-step write_file task, after retention "
        f"({label})",
        unit="KB",
        ours=kb("bytes_after"),
        reference=kb("bytes_before"),
        reference_label="the same task before retention",
        target="after = what the keep rule needs (the floor)",
        met=all(r["blobs_after"] == r["blobs_needed"] for r in runs),
        note=f"floor {mid('bytes_floor') / 1000:.1f} KB; {mid('checkpoints_deleted'):.0f} of "
        f"{mid('checkpoints_before'):.0f} checkpoints and {mid('blobs_deleted'):.0f} of "
        f"{mid('blobs_before'):.0f} blobs removed under {policy.model_dump(include=KEEP)}",
    )


KEEP = {"keep_last_per_task", "keep_levels"}


def run(size: str) -> dict[str, Any]:
    from harness_base.config import RetentionConfig, harness_config

    config = SIZES[size]
    steps = config["steps"]
    policies = {
        "harness.yaml's keep rule": harness_config().retention,
        # Only task-level checkpoints kept whole: the step checkpoints' snapshots go too.
        "a lean rule": RetentionConfig(keep_last_per_task=10, keep_levels=["task"]),
    }
    runs = {
        label: [one_task(steps, policy) for _ in range(config["repeat"])]
        for label, policy in policies.items()
    }
    every = [r for label_runs in runs.values() for r in label_runs]
    return {
        "title": TITLE,
        "figures": [
            *(_figure(steps, label, runs[label], policy) for label, policy in policies.items()),
            figure(
                figure="count + thin + collect, one finished task",
                unit="ms",
                ours=stats([r["count_s"] + r["thin_s"] + r["collect_s"] for r in every], scale=1e3),
                target="(info)",
                note=(
                    f"count {median(r['count_s'] for r in every) * 1000:.0f} ms, "
                    f"thin {median(r['thin_s'] for r in every) * 1000:.0f} ms, "
                    f"collect {median(r['collect_s'] for r in every) * 1000:.0f} ms"
                ),
            ),
        ],
        "notes": (
            "Retention as the sweep runs it on one finished `write_file` task: blob reference "
            "counts brought up to date, checkpoints thinned under a keep rule (harness.yaml's, "
            "and a lean one keeping only task-level checkpoints whole), then the incremental "
            "blob collection (the grace period taken as passed for this run's blobs). Stored "
            "bytes: the task's rows plus the blobs its run stored."
        ),
        "details": {
            "runs": runs,
            "policies": {label: p.model_dump() for label, p in policies.items()},
        },
    }
