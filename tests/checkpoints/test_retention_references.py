"""Retention keeps what a group rollback may still go back to, and garbage collection never
takes a blob something still references: blobs are content-addressed and shared, by other
tasks' checkpoints, by global checkpoints' shared directories, by graph workspaces."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from checkpoints import payload
from checkpoints.models import Blob, BlobRef, Checkpoint
from checkpoints.payload import checkpoint_base_key, checkpoint_same_as
from checkpoints.retention import (
    BLOB_GRACE_S,
    blobs_collect_garbage,
    blobs_count,
    checkpoints_apply_retention,
)
from checkpoints.services import (
    checkpoint_build,
    checkpoint_decode,
    checkpoint_next_seq,
)
from checkpoints.snapshots import capture as snapshot_capture_module
from checkpoints.snapshots import snapshot_blob_keys, snapshot_capture, snapshot_restore
from harness_base import config
from multiagent.models import CheckpointRound, GlobalCheckpoint
from tasks.models import Task, ToolCall, ToolCallStatus
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, files_of, spec_dict

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = 4


def writes(text: str) -> dict:
    """A spec writing f0.txt .. f3.txt, each with `text` and its number."""
    calls = [
        {"call": "write_file", "args": {"path": f"f{i}.txt", "content": f"{text}{i}"}}
        for i in range(WRITES)
    ]
    return spec_dict(*calls, {"final": "done"}, tools=["write_file"])


@pytest.fixture(autouse=True)
def keep_one(settings, tmp_path):
    """Keep the newest checkpoint of each level but `task` (every one of those stays)."""
    path = tmp_path / "retention.yaml"
    path.write_text(NO_REVIEW_CONFIG + "retention: {keep_last_per_task: 1, keep_levels: [task]}\n")
    settings.HARNESS_CONFIG_FILE = path
    config.harness_config.cache_clear()


@pytest.fixture
def finished(make_task, run_inline, operator):
    def make():
        task = make_task(writes("v"), user=operator)
        assert run_inline(task) == "succeeded"
        return task

    return make


def _tool_ids(task) -> list:
    return list(
        Checkpoint.objects.filter(task=task, level="tool")
        .order_by("seq")
        .values_list("id", flat=True)
    )


def _global_checkpoint(root: Task, participants: list[dict], **extra) -> GlobalCheckpoint:
    now = timezone.now()
    round = CheckpointRound.objects.create(
        root=root, trigger="manual", status="committed", participants=[], deadline=now
    )
    return GlobalCheckpoint.objects.create(
        root=root,
        seq=GlobalCheckpoint.objects.filter(root=root).count() + 1,
        round=round,
        trigger="manual",
        participants=participants,
        created_at=now,
        **extra,
    )


def test_global_checkpoint_targets_and_group_rollback_bases_survive_retention(finished):
    control, cut, superseded, forked = (finished() for _ in range(4))
    # A global checkpoint (not superseded) names an old checkpoint: a group rollback target.
    target = _tool_ids(cut)[0]
    _global_checkpoint(cut, [{"task_id": str(cut.id), "checkpoint_id": str(target)}])
    # A superseded one cannot be rolled back to: it protects nothing.
    gone = _tool_ids(superseded)[0]
    _global_checkpoint(
        superseded,
        [{"task_id": str(superseded.id), "checkpoint_id": str(gone)}],
        superseded=True,
    )
    # A group rollback forked from an old checkpoint: its base stays, as a rollback's does.
    base = Checkpoint.objects.get(id=_tool_ids(forked)[1])
    head = Checkpoint.objects.get(id=forked.head_checkpoint_id)
    loaded = checkpoint_decode(head)
    checkpoint_build(
        task_id=forked.id,
        seq=checkpoint_next_seq(task_id=forked.id),
        state=loaded.state,
        level="task",
        trigger="group_rollback",
        snapshot=loaded.snapshot,
        parent_id=base.id,
    ).save(force_insert=True)

    checkpoints_apply_retention()

    assert len(_tool_ids(control)) == 1
    assert target in _tool_ids(cut)
    assert gone not in _tool_ids(superseded)
    assert base.id in _tool_ids(forked)


def _snapshots(task) -> dict:
    return {
        c.id: checkpoint_decode(c).snapshot
        for c in Checkpoint.objects.filter(task=task).order_by("seq")
    }


def test_garbage_collection_keeps_blobs_other_tasks_and_global_checkpoints_reference(
    finished, make_task, run_inline, operator, tmp_path, monkeypatch
):
    # Every write stores its manifest in full (no `delta`): the thinned checkpoints' roots are
    # theirs alone (tests/checkpoints/test_snapshot_delta.py covers the file bodies of deltas).
    monkeypatch.setattr(snapshot_capture_module, "DELTA_MAX", 0)
    thinned, kept = finished(), finished()
    # Files of its own: the snapshots of its thinned checkpoints are referenced nowhere else.
    unique = make_task(writes("u"), user=operator)
    assert run_inline(unique) == "succeeded"
    # The same files as `thinned`, so the same blobs; `kept` is not thinned (a call's outcome
    # is unknown), `thinned` and `unique` lose all but their newest checkpoints.
    ToolCall.objects.filter(id=ToolCall.objects.filter(task=kept).first().id).update(
        status=ToolCallStatus.UNKNOWN_OUTCOME
    )
    kept_snapshots = list(_snapshots(kept).values())
    unique_before = _snapshots(unique)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "only-here.txt").write_text("referenced by a global checkpoint alone")
    shared_snapshot = snapshot_capture(workspace=shared)
    _global_checkpoint(thinned, [], shared_snapshot=shared_snapshot)
    orphan = Blob.objects.create(sha256="0" * 64, size=1, data=b"x")

    assert blobs_count()  # as every retention run does first
    assert checkpoints_apply_retention().checkpoints_deleted > 0
    # Past the grace period: of the blobs stored, and of the counts that fell to 0.
    with time_machine.travel(timezone.now() + timedelta(seconds=BLOB_GRACE_S + 60)):
        collected = blobs_collect_garbage()

    stored = set(Blob.objects.values_list("sha256", flat=True))
    assert orphan.sha256 not in stored
    left = {s["root"] for s in _snapshots(unique).values()}
    gone = {s["root"] for s in unique_before.values()} - left
    # Their counts fell to 0 when thinning deleted the checkpoints naming them.
    assert not BlobRef.objects.filter(key__in=[f"r:{root}" for root in gone], refs__gt=0).exists()
    assert gone and not gone & stored
    assert collected.deleted > len(gone)
    needed = set().union(*(snapshot_blob_keys(s) for s in kept_snapshots))
    assert needed <= stored and snapshot_blob_keys(shared_snapshot) <= stored
    for task in (thinned, kept, unique):
        for index, snapshot in enumerate(_snapshots(task).values()):
            snapshot_restore(workspace=tmp_path / f"{task.id}-{index}", snapshot=snapshot)
    assert files_of(tmp_path / f"{kept.id}-{len(kept_snapshots) - 1}") == {
        f"f{i}.txt": f"v{i}".encode() for i in range(WRITES)
    }
    # Nothing is left to collect, and a second collection takes nothing live.
    assert blobs_collect_garbage(orphans_after=None).deleted == 0


def test_the_collection_reads_no_checkpoint_only_counts_and_candidates(finished):
    """Incremental: with every checkpoint counted, collecting touches the checkpoint table only
    to look for those left uncounted (a partial index), never to read the counted ones."""
    finished()
    assert blobs_count()
    with CaptureQueriesContext(connection) as queries:
        blobs_collect_garbage()
    touching = [q["sql"] for q in queries if "checkpoints_checkpoint" in q["sql"]]
    assert touching and all(
        'WHERE NOT "checkpoints_checkpoint"."blobs_counted"' in sql for sql in touching
    )


def test_a_checkpoint_payloads_base_stays_while_a_checkpoint_needs_it_and_goes_after(
    finished, monkeypatch
):
    """A checkpoint compressed against a base (checkpoints.services) needs that blob to load:
    the collection keeps it while a checkpoint names it, and takes it once none does."""
    monkeypatch.setattr(payload, "REBASE_SHARE", 0)  # a base of its own for each checkpoint
    task = finished()
    # (A checkpoint stored as the one before it, `checkpoint_same_as`, names no base itself.)
    rows = [c for c in Checkpoint.objects.filter(task=task) if not checkpoint_same_as(c.payload)]
    bases = {checkpoint_base_key(c.payload) for c in rows}
    assert None not in bases and len(bases) > 2
    assert blobs_count()
    assert checkpoints_apply_retention().checkpoints_deleted > 0
    with time_machine.travel(timezone.now() + timedelta(seconds=BLOB_GRACE_S + 60)):
        blobs_collect_garbage()

    payload._bases.clear()  # read them from the store, as another process would
    left = list(Checkpoint.objects.filter(task=task))
    assert all(checkpoint_decode(c).state.step_index >= 0 for c in left)
    needed = {checkpoint_base_key(c.payload) for c in left if not checkpoint_same_as(c.payload)}
    stored = set(Blob.objects.values_list("sha256", flat=True))
    assert needed <= stored
    assert bases - needed and not (bases - needed) & stored
