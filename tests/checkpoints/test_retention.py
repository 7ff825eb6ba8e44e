"""Retention: once a task finished, old checkpoints beyond the keep rule go, whatever an open
review, a rollback, a held task or an unknown outcome still needs stays, it runs from the
sweep on its schedule, and blobs nothing references any more are collected."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import transaction
from django.utils import timezone

from agent.sweep import sweep_once, sweep_retention
from checkpoints.models import Blob, Checkpoint
from checkpoints.payload import checkpoint_same_as
from checkpoints.recovery import checkpoint_rollback
from checkpoints.retention import BLOB_GRACE_S, checkpoints_apply_retention, retention_run
from checkpoints.services import checkpoint_decode
from checkpoints.snapshots import snapshot_blob_keys, snapshot_restore
from review.models import ReviewRequest
from tasks.models import ToolCall, ToolCallStatus
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, spec_dict

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = 5


@pytest.fixture
def policy(harness_yaml):
    def use(retention: str) -> None:
        harness_yaml(NO_REVIEW_CONFIG + f"retention: {retention}\n")

    return use


@pytest.fixture
def finished_task(make_task, run_inline, operator):
    """A succeeded task that wrote WRITES files (one tool-level checkpoint before each)."""

    def make():
        task = make_task(
            spec_dict(
                *[
                    {"call": "write_file", "args": {"path": f"f{i}.txt", "content": f"v{i}"}}
                    for i in range(WRITES)
                ],
                {"final": "done"},
                tools=["write_file"],
            ),
            user=operator,
        )
        assert run_inline(task) == "succeeded"
        return task

    return make


def ids(task, **filters) -> list:
    return list(
        Checkpoint.objects.filter(task=task, **filters).order_by("seq").values_list("id", flat=True)
    )


def test_retention_keeps_the_newest_per_level_and_the_head_and_collects_orphan_blobs(
    policy, finished_task, tmp_path
):
    policy("{keep_last_per_task: 3, keep_levels: [task, step]}")
    task = finished_task()
    before = list(Checkpoint.objects.filter(task=task).order_by("seq"))
    tool_level = [c.id for c in before if c.level == "tool"]
    assert len(tool_level) == WRITES
    orphan = Blob.objects.create(sha256="0" * 64, size=1, data=b"x")

    with time_machine.travel(timezone.now() + timedelta(seconds=BLOB_GRACE_S + 60)):
        result = retention_run(state={}, collect_garbage=True)

    after = list(Checkpoint.objects.filter(task=task).order_by("seq"))
    assert result["checkpoints_deleted"] == len(before) - len(after) == WRITES - 3
    assert ids(task, level="tool") == tool_level[-3:]
    assert {c.id for c in before if c.level in ("task", "step")} <= {c.id for c in after}
    task.refresh_from_db()
    assert task.head_checkpoint_id in {c.id for c in after}
    assert not Blob.objects.filter(sha256=orphan.sha256).exists()
    assert result["blobs_deleted"] >= 1
    # Every remaining checkpoint still restores.
    for checkpoint in after:
        snapshot = checkpoint_decode(checkpoint).snapshot
        assert snapshot_blob_keys(snapshot) <= set(Blob.objects.values_list("sha256", flat=True))
    snapshot_restore(workspace=tmp_path / "check", snapshot=checkpoint_decode(after[0]).snapshot)


def test_retention_never_removes_what_reviews_rollbacks_held_tasks_and_unknown_outcomes_need(
    policy, finished_task, operator, run_inline
):
    policy("{keep_last_per_task: 1, keep_levels: [task]}")
    control, reviewed, forked, held, unknown = (finished_task() for _ in range(5))
    # An open review of an old checkpoint.
    review_target = ids(reviewed, level="tool")[0]
    ReviewRequest.objects.create(
        task=reviewed,
        tool_call=ToolCall.objects.filter(task=reviewed).first(),
        tool="write_file",
        checkpoint_id=review_target,
        requested_at=timezone.now(),
    )
    # A branch forked from an old checkpoint: rolled back, resumed, finished again.
    fork_target = ids(forked, level="step")[1]
    checkpoint_rollback(
        task_id=forked.id, checkpoint_id=fork_target, user=operator, reason="redo", resume=True
    )
    assert run_inline(forked) == "succeeded"
    # A task rolled back and held: every one of its checkpoints may be the next target.
    checkpoint_rollback(
        task_id=held.id,
        checkpoint_id=ids(held, level="step")[2],
        user=operator,
        reason="inspect",
        resume=False,
    )
    held_before = ids(held)
    # A finished task with a call whose outcome nobody knows yet.
    ToolCall.objects.filter(id=ToolCall.objects.filter(task=unknown).first().id).update(
        status=ToolCallStatus.UNKNOWN_OUTCOME
    )
    unknown_before = ids(unknown)

    result = checkpoints_apply_retention()

    assert result.checkpoints_deleted > 0
    # The rule deletes old tool and step checkpoints where nothing protects them (the kept
    # tool checkpoint is stored as its step's model turn, which stays with it)...
    (kept_tool,) = ids(control, level="tool")
    source = checkpoint_same_as(Checkpoint.objects.get(id=kept_tool).payload)
    assert source is not None and len(set(ids(control, level="step")) - {source}) == 1
    # ...but not these.
    assert review_target in ids(reviewed)
    assert fork_target in ids(forked)
    assert ids(held) == held_before
    assert ids(unknown) == unknown_before


def test_the_sweep_runs_retention_on_its_schedule_for_newly_finished_tasks(policy, finished_task):
    policy("{keep_last_per_task: 1, keep_levels: [task, step], every: 10m}")
    first = finished_task()
    now = timezone.now()
    assert sweep_retention(now=now)["checkpoints_deleted"] == WRITES - 1
    assert len(ids(first, level="tool")) == 1

    second = finished_task()
    assert sweep_retention(now=now + timedelta(minutes=5)) == {}  # not due yet
    assert len(ids(second, level="tool")) == WRITES
    later = sweep_retention(now=now + timedelta(minutes=11))
    assert (later["tasks"], later["checkpoints_deleted"]) == (1, WRITES - 1)
    assert len(ids(second, level="tool")) == 1


def test_sweep_once_reports_what_retention_deleted(policy, finished_task):
    policy("{keep_last_per_task: 2, keep_levels: [task, step]}")
    finished_task()
    assert sweep_once().checkpoints_deleted == WRITES - 2


def test_garbage_collection_keeps_the_blobs_of_graph_workspace_snapshots(tmp_path):
    from checkpoints.models import GraphWorkspace
    from checkpoints.retention import blobs_collect_garbage
    from checkpoints.snapshots import snapshot_capture
    from tasks.services import task_create
    from tasks.spec import TaskSpec

    spec = {"title": "g", "goal": "g", "model": {"kind": "scripted", "script": [{"final": "x"}]}}
    task = task_create(spec=TaskSpec.model_validate(spec), user=None, enqueue=False)
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "a.txt").write_text("kept by a graph checkpoint")
    snapshot = snapshot_capture(workspace=workspace)
    GraphWorkspace.objects.create(
        task=task, checkpoint_id="1f0-graph", snapshot=snapshot, created_at=timezone.now()
    )
    with time_machine.travel(timezone.now() + timedelta(seconds=BLOB_GRACE_S + 60)):
        blobs_collect_garbage()

    assert snapshot_blob_keys(snapshot) <= set(Blob.objects.values_list("sha256", flat=True))
    snapshot_restore(workspace=tmp_path / "back", snapshot=snapshot)
    assert (tmp_path / "back" / "notes" / "a.txt").read_text() == "kept by a graph checkpoint"


SEEN_BY_THE_JOB: list[dict] = []


def recording_job(*, state: dict, collect_garbage: bool) -> dict:
    """A retention job that records what it ran inside, then runs the real one."""
    SEEN_BY_THE_JOB.append(
        {
            "in_transaction": transaction.get_connection().in_atomic_block,
            # Another sweeper asking meanwhile (the row is not locked: it is claimed).
            "another_sweeper": sweep_retention(now=timezone.now()),
        }
    )
    return retention_run(state=state, collect_garbage=collect_garbage)


def test_the_retention_job_runs_outside_the_claim_s_transaction_and_alone(
    policy, finished_task, settings
):
    """Each step of the job commits on its own: held in one transaction with the job's row,
    the blob count's checkpoint locks stayed until the thinning locked a task row, the
    reverse of a rollback's order, and the two deadlocked (a 500 on the rollback)."""
    policy("{keep_last_per_task: 1, keep_levels: [task, step], every: 10m}")
    settings.HARNESS_RETENTION_JOB = f"{__name__}.recording_job"
    finished_task()
    SEEN_BY_THE_JOB.clear()

    result = sweep_retention(now=timezone.now())

    assert SEEN_BY_THE_JOB == [{"in_transaction": False, "another_sweeper": {}}]
    assert result["checkpoints_deleted"] == WRITES - 1
    assert sweep_retention(now=timezone.now()) == {}  # ran now: not due again yet
