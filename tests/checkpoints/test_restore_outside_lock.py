"""Recovery restores files outside the locked transaction (issue 13 item 4): no file is written
or deleted while the task row is locked, a fork whose commit fails changes no file, and a
restore that never happened (a crash after the commit) is made good by the run."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.recovery import checkpoint_rollback, task_forward
from checkpoints.services import checkpoint_decode
from tests.checkpoints.conftest import checkpoint_after_step, files_of
from tests.checkpoints.row_locks import (  # noqa: F401
    commit_fails,
    file_io_checked,
    row_lock_free,
    snapshot_files,
)

pytestmark = pytest.mark.django_db(transaction=True)

V3 = {"app.conf": b"version = 3\n", "new.txt": b"created after v1\n"}


def _head_files(task) -> dict[str, bytes]:
    task.refresh_from_db()
    head = checkpoint_decode(Checkpoint.objects.get(id=task.head_checkpoint_id))
    return snapshot_files(head.snapshot)


def _rollback_to_step_1(task, operator, *, resume: bool = False):
    return checkpoint_rollback(
        task_id=task.id,
        checkpoint_id=checkpoint_after_step(task, 1).id,
        user=operator,
        reason="v2 broke it",
        resume=resume,
    )


def test_rollback_restores_the_files_with_the_task_row_unlocked(
    finished,
    operator,
    file_io_checked,  # noqa: F811
):
    task = finished
    seen = file_io_checked([task.id])

    result = _rollback_to_step_1(task, operator)

    assert sorted(seen) == ["app.conf", "new.txt"]
    assert files_of(task.workspace_path) == {"app.conf": b"version = 1\n"}
    assert result.restored.written == ["app.conf"] and result.restored.deleted == ["new.txt"]
    assert _head_files(task) == {"app.conf": b"version = 1\n"}


def test_a_rollback_whose_commit_fails_changes_no_file_and_writes_no_checkpoint(
    finished,
    operator,
    commit_fails,  # noqa: F811
):
    task = finished
    head_before = task.head_checkpoint_id
    count = Checkpoint.objects.filter(task=task).count()

    with pytest.raises(commit_fails):
        _rollback_to_step_1(task, operator, resume=True)

    task.refresh_from_db()
    assert task.head_checkpoint_id == head_before and task.status == "succeeded"
    assert Checkpoint.objects.filter(task=task).count() == count
    assert files_of(task.workspace_path) == _head_files(task) == V3


def test_a_restore_lost_after_the_commit_is_made_good_by_forward_and_the_run(
    finished, operator, run_inline, monkeypatch
):
    """A crash between the commit and the restore: the head is the rollback's fork, the files
    are still the old ones. Forward takes the fork's snapshot (not the stale files), and the
    run syncs the workspace to it before anything else."""
    task = finished

    def crashed(**_kwargs):
        raise OSError("the process died here")

    monkeypatch.setattr("checkpoints.recovery.forking.snapshot_restore", crashed)
    _rollback_to_step_1(task, operator)
    monkeypatch.undo()
    assert files_of(task.workspace_path) == V3
    assert _head_files(task) == {"app.conf": b"version = 1\n"}

    task_forward(task_id=task.id, user=operator, reason="go on", resume=False)
    assert _head_files(task) == {"app.conf": b"version = 1\n"}
    assert Checkpoint.objects.get(id=task.head_checkpoint_id).trigger == "forward"

    # The run rewrites app.conf v2 and v3 from step 1 on, on the restored tree.
    assert run_inline(task) == "succeeded"
    assert files_of(task.workspace_path) == V3
    assert task.events.filter(type="workspace_materialised").exists()
