"""Group rollback restores the workspaces and the shared directory after its transaction
commits (issue 13 item 4): no file changes while the group's rows are locked, and a group
rollback whose commit fails changes no file. A shared-directory restore that fails after the
commit stays pending until a participant's run or the sweep finishes it; a participant never
works on the directory before. In process, on a group built by hand."""

from __future__ import annotations

import pytest
from django.utils import timezone

import multiagent.recovery.shared_restore
from agent.sweep import sweep_once
from checkpoints.models import Checkpoint
from checkpoints.snapshots import snapshot_capture
from multiagent.models import CheckpointRound, GlobalCheckpoint, SharedRestorePending
from multiagent.recovery import group_rollback
from multiagent.shared import shared_path
from tasks.models import Task
from tests.checkpoints.conftest import (  # noqa: F401
    _isolated,
    app_conf_spec,
    checkpoint_after_step,
    files_of,
)
from tests.checkpoints.row_locks import commit_fails, file_io_checked, row_lock_free  # noqa: F401
from tests.factories import run_in_process, spec_task

pytestmark = pytest.mark.django_db(transaction=True)

V1 = {"app.conf": b"version = 1\n"}
V3 = {"app.conf": b"version = 3\n", "new.txt": b"created after v1\n"}


@pytest.fixture
def group(app_conf_spec, operator):  # noqa: F811
    """A parent and one child, both run to the end (app.conf v3, new.txt), and a global
    checkpoint cut after their step 1 (app.conf v1), with the shared directory as it was
    then (notes.txt) before it changed (notes.txt rewritten, later.txt added)."""
    parent = spec_task(app_conf_spec, user=operator)
    child = spec_task(app_conf_spec, user=operator, parent=parent, agent_name="helper")
    for task in (parent, child):
        assert run_in_process(task) == "succeeded"
        assert files_of(task.workspace_path) == V3
    shared = shared_path(root_id=parent.id)
    shared.mkdir(parents=True)
    (shared / "notes.txt").write_text("at the cut")
    cut = snapshot_capture(workspace=shared)
    (shared / "notes.txt").write_text("after the cut")
    (shared / "later.txt").write_text("later")
    participants = [
        {
            "task_id": str(task.id),
            "checkpoint_id": str(checkpoint_after_step(task, 1).id),
            "status": "running",
        }
        for task in (parent, child)
    ]
    now = timezone.now()
    round = CheckpointRound.objects.create(
        root=parent,
        trigger="manual",
        status="committed",
        participants=[p["task_id"] for p in participants],
        deadline=now,
    )
    global_checkpoint = GlobalCheckpoint.objects.create(
        root=parent,
        seq=1,
        round=round,
        trigger="manual",
        participants=participants,
        shared_snapshot=cut,
        created_at=now,
    )
    return parent, child, global_checkpoint


def _files(parent, child) -> tuple:
    return (
        files_of(parent.workspace_path),
        files_of(child.workspace_path),
        files_of(shared_path(root_id=parent.id)),
    )


def _rollback(group, operator, *, resume: bool) -> dict:
    parent, _child, global_checkpoint = group
    return group_rollback(
        root_id=parent.id,
        global_checkpoint_id=global_checkpoint.id,
        user=operator,
        reason="redo",
        resume=resume,
    )


def test_group_rollback_restores_every_directory_with_the_group_unlocked(
    group,
    operator,
    file_io_checked,  # noqa: F811
):
    parent, child, global_checkpoint = group
    seen = file_io_checked([parent.id, child.id])

    _rollback(group, operator, resume=False)

    assert sorted(seen) == sorted(
        ["notes.txt", "later.txt", "app.conf", "new.txt", "app.conf", "new.txt"]
    )
    assert _files(parent, child) == (V1, V1, {"notes.txt": b"at the cut"})
    for task in Task.objects.filter(id__in=[parent.id, child.id]):
        assert task.status == "held"
        assert Checkpoint.objects.get(id=task.head_checkpoint_id).trigger == "group_rollback"


def test_a_group_rollback_whose_commit_fails_changes_no_file(
    group,
    operator,
    commit_fails,  # noqa: F811
):
    parent, child, global_checkpoint = group
    before = _files(parent, child)
    heads = {t.id: t.head_checkpoint_id for t in Task.objects.filter(id__in=[parent.id, child.id])}
    count = Checkpoint.objects.count()

    with pytest.raises(commit_fails):
        _rollback(group, operator, resume=True)

    assert _files(parent, child) == before
    assert before[:2] == (V3, V3)
    assert Checkpoint.objects.count() == count
    for task in Task.objects.filter(id__in=[parent.id, child.id]):
        assert task.head_checkpoint_id == heads[task.id] and task.status == "succeeded"
    assert not GlobalCheckpoint.objects.filter(superseded=True).exists()


AT_THE_CUT = {"notes.txt": b"at the cut"}
AFTER_THE_CUT = {"notes.txt": b"after the cut", "later.txt": b"later"}


@pytest.fixture
def shared_disk_fails(monkeypatch, group):
    """Restoring the group's shared directory raises (a full disk) until `.heal()`."""
    parent = group[0]
    real = multiagent.recovery.shared_restore.snapshot_restore

    def restore(*, workspace, snapshot):
        if workspace == shared_path(root_id=parent.id):
            raise OSError(28, "No space left on device")
        return real(workspace=workspace, snapshot=snapshot)

    monkeypatch.setattr(multiagent.recovery.shared_restore, "snapshot_restore", restore)

    class Disk:
        @staticmethod
        def heal() -> None:
            monkeypatch.setattr(multiagent.recovery.shared_restore, "snapshot_restore", real)

    return Disk


def test_a_shared_restore_that_fails_after_the_commit_stays_pending_until_the_sweep_does_it(
    group, operator, shared_disk_fails
):
    parent, child, global_checkpoint = group

    _rollback(group, operator, resume=False)

    # Committed and the workspaces restored; the shared directory is not, and that is recorded.
    assert _files(parent, child) == (V1, V1, AFTER_THE_CUT)
    pending = SharedRestorePending.objects.get(root_id=parent.id)
    assert pending.global_checkpoint_id == global_checkpoint.id
    assert sweep_once().shared_restored == 0
    assert SharedRestorePending.objects.filter(root_id=parent.id).exists()

    shared_disk_fails.heal()
    assert sweep_once().shared_restored == 1
    assert _files(parent, child) == (V1, V1, AT_THE_CUT)
    assert not SharedRestorePending.objects.exists()


def test_a_participant_never_works_on_a_shared_directory_whose_restore_is_pending(
    group, operator, shared_disk_fails
):
    parent, child, _global_checkpoint = group
    _rollback(group, operator, resume=False)
    assert _files(parent, child)[2] == AFTER_THE_CUT

    # Still failing: the participant stops before its first step, the directory untouched.
    assert run_in_process(child) == "failed"
    assert child.error_class == "shared_restore_failed"
    assert "No space left on device" in child.error_message
    assert _files(parent, child)[2] == AFTER_THE_CUT

    # Healed: the next participant to run puts the directory back first, then works.
    shared_disk_fails.heal()
    assert run_in_process(parent) == "succeeded"
    assert _files(parent, child)[2] == AT_THE_CUT
    assert not SharedRestorePending.objects.exists()
    restored = parent.events.filter(type="workspace_materialised", payload__shared=True)
    first_turn = parent.events.filter(type="model_decision", id__gt=restored.get().id)
    assert first_turn.exists()
