"""Recovery on the real loop (in-process, PostgreSQL): rollback, resume, retry, forward,
corruption fallback, serialisation, and the context-alignment message the agent receives."""

from __future__ import annotations

import json
import threading
import zlib

import pytest

from agent.tools.testing import ledger_records
from checkpoints.models import Checkpoint
from checkpoints.recovery import (
    RecoveryConflict,
    RecoveryInvalid,
    checkpoint_rollback,
    task_cancel,
    task_forward,
    task_resume,
    task_retry,
)
from checkpoints.selectors import recovery_plan, rollback_preview
from checkpoints.services import checkpoint_decode
from tasks.models import AuditEntry, Task, ToolCall
from tests.checkpoints.conftest import checkpoint_after_step, files_of, spec_dict
from tests.conftest import run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)


def _head_state(task):
    task.refresh_from_db()
    return checkpoint_decode(Checkpoint.objects.get(id=task.head_checkpoint_id)).state


def _tamper(checkpoint: Checkpoint) -> None:
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        payload=zlib.compress(b'{"state":{},"snapshot":null}')
    )


def test_rollback_restores_files_and_state_and_the_resumed_task_completes_again(
    finished, run_inline, operator
):
    task = finished
    workspace = task.workspace_path
    assert files_of(workspace) == {"app.conf": b"version = 3\n", "new.txt": b"created after v1\n"}
    after_v1 = checkpoint_after_step(task, 1)
    later = list(
        Checkpoint.objects.filter(task=task, seq__gt=after_v1.seq).values_list("id", flat=True)
    )

    result = checkpoint_rollback(
        task_id=task.id,
        checkpoint_id=after_v1.id,
        user=operator,
        reason="v2 broke the service",
        resume=False,
    )

    assert files_of(workspace) == {"app.conf": b"version = 1\n"}
    assert result.restored.written == ["app.conf"] and result.restored.deleted == ["new.txt"]
    task.refresh_from_db()
    assert task.status == "held"
    head = Checkpoint.objects.get(id=task.head_checkpoint_id)
    assert head.trigger == "rollback" and head.parent_id == after_v1.id
    assert set(Checkpoint.objects.filter(id__in=later).values_list("superseded", flat=True)) == {
        True
    }
    assert not head.superseded and not Checkpoint.objects.get(id=after_v1.id).superseded
    assert _head_state(task).step_index == 1
    rollback_event = task.events.get(type="rollback")
    assert rollback_event.payload["reason"] == "v2 broke the service"
    assert rollback_event.actor == "operator"
    audit = AuditEntry.objects.get(action="rollback", task=task)
    assert audit.actor == operator and audit.reason == "v2 broke the service"

    # Hold -> the operator resumes later; the agent continues from step 1 on a new branch.
    assert task_resume(task_id=task.id, user=operator, reason="fixed").status == "queued"
    assert run_inline(task) == "succeeded"
    assert files_of(workspace) == {"app.conf": b"version = 3\n", "new.txt": b"created after v1\n"}
    calls = list(ToolCall.objects.filter(task=task).order_by("id").values_list("call_id", "status"))
    assert len(calls) == 4 + 3  # the superseded branch's ledger rows are kept
    assert {c for c, _ in calls[4:]}.isdisjoint({c for c, _ in calls[:4]})

    aligned = task.events.get(type="context_aligned").payload
    assert aligned["kind"] == "rollback"
    assert aligned["undone"]["files_restored"] == ["app.conf"]
    assert aligned["undone"]["files_deleted"] == ["new.txt"]
    assert aligned["continue_at"].startswith("step 2")
    messages = [m.content for m in _head_state(task).messages if m.role == "user"]
    note = next(m for m in messages if m.startswith("[harness]"))
    assert "rolled back by operator" in note and "v2 broke the service" in note
    assert "Do not repeat" in note and "write_file" in note
    assert json.loads(note.split("\n\n", 1)[1])["kind"] == "rollback"


def test_a_rollback_needs_a_reason_and_refuses_while_the_task_is_running(finished, operator):
    task = finished
    target = checkpoint_after_step(task, 1)
    with pytest.raises(RecoveryInvalid):
        checkpoint_rollback(
            task_id=task.id, checkpoint_id=target.id, user=operator, reason="  ", resume=False
        )
    Task.objects.filter(id=task.id).update(status="running")
    with pytest.raises(RecoveryConflict, match="running"):
        checkpoint_rollback(
            task_id=task.id, checkpoint_id=target.id, user=operator, reason="now", resume=False
        )
    assert (task.workspace_path / "app.conf").read_text() == "version = 3\n"


def test_two_recovery_operations_at_once_one_wins_the_other_is_refused(finished, operator):
    task = finished
    target = checkpoint_after_step(task, 1)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def attempt() -> None:
        barrier.wait()
        try:
            checkpoint_rollback(
                task_id=task.id, checkpoint_id=target.id, user=operator, reason="race", resume=True
            )
            outcomes.append("ok")
        except RecoveryConflict:
            outcomes.append("conflict")

    run_in_threads(attempt, attempt)
    assert sorted(outcomes) == ["conflict", "ok"]
    assert Checkpoint.objects.filter(task=task, trigger="rollback").count() == 1


def test_the_preview_lists_files_calls_and_side_effects_that_cannot_be_undone(
    make_task, run_inline, operator
):
    task = make_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            {"call": "ledger_append", "args": {"key": "invoice-7", "value": "sent"}},
            {"call": "write_file", "args": {"path": "b.txt", "content": "2"}},
            {"final": "done"},
            tools=["write_file", "ledger_append"],
        ),
        user=operator,
    )
    assert run_inline(task) == "succeeded"
    preview = rollback_preview(task=task, checkpoint=checkpoint_after_step(task, 1))
    assert preview.allowed
    assert preview.files_delete == ["b.txt"] and preview.files_restore == []
    assert [c["tool"] for c in preview.calls_undone] == ["ledger_append", "write_file"]
    assert [s["step_index"] for s in preview.steps_undone] == [1, 2]
    assert [c["tool"] for c in preview.irreversible] == ["ledger_append"]
    assert (task.workspace_path / "b.txt").exists()  # a preview changes nothing


def test_retry_reruns_the_failed_call_and_replays_the_finished_one(
    make_task, run_inline, operator, wait_for
):
    task = make_task(
        spec_dict(
            {
                "calls": [
                    {"call": "ledger_append", "args": {"key": "batch-1", "value": "x"}},
                    {"call": "sleep", "args": {"seconds": 1.5}},
                ]
            },
            {"final": "done"},
            tools=["ledger_append", "sleep"],
        ),
        user=operator,
    )
    runner = threading.Thread(target=run_inline, args=(task,))
    runner.start()
    # The sleep starts right after the ledger call's outcome is committed.
    wait_for(
        lambda: ToolCall.objects.filter(
            task=task, tool="ledger_append", status="succeeded"
        ).exists(),
        message="the first call of the batch to finish",
    )
    task_cancel(task_id=task.id, user=operator, reason="wrong moment")
    runner.join()
    task.refresh_from_db()
    assert task.status == "canceled"
    assert recovery_plan(task=task).strategy == "forward"  # a batch already partly done

    result = task_retry(task_id=task.id, user=operator, reason="try again", resume=True)
    assert result.checkpoint.trigger == "retry"
    assert run_inline(task) == "succeeded"
    sleeps = list(ToolCall.objects.filter(task=task, tool="sleep").order_by("id"))
    assert [s.status for s in sleeps] == ["failed", "succeeded"]
    assert len(ledger_records(key="batch-1")) == 1  # the finished side effect is not repeated
    aligned = task.events.get(type="context_aligned").payload
    assert aligned["kind"] == "retry" and aligned["undone"]["retried_calls"]


def test_forward_skips_a_corrupted_head_and_records_it(make_task, run_inline, operator):
    task = make_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            {"call": "write_file", "args": {"path": "b.txt", "content": "2"}},
            tools=["write_file"],
        ),
        user=operator,
    )  # no final turn: the script runs out -> failed
    assert run_inline(task) == "failed"
    head = Checkpoint.objects.get(id=task.head_checkpoint_id)
    previous = Checkpoint.objects.filter(task=task, seq__lt=head.seq).order_by("-seq").first()
    _tamper(head)

    result = task_forward(task_id=task.id, user=operator, reason="continue", resume=False)

    assert result.base.id == previous.id
    assert result.checkpoint.parent_id == previous.id
    assert task.events.filter(
        type="checkpoint_corrupted", payload__checkpoint_id=str(head.id)
    ).exists()
    head.refresh_from_db()
    assert head.superseded
    preview = rollback_preview(task=task, checkpoint=head)
    assert not preview.allowed and "corrupted" in preview.blocked
    with pytest.raises(RecoveryInvalid):
        checkpoint_rollback(
            task_id=task.id, checkpoint_id=head.id, user=operator, reason="x", resume=False
        )


def test_a_task_whose_checkpoints_are_all_corrupted_fails_with_a_clear_error(
    make_task, run_inline, operator
):
    task = make_task(
        spec_dict({"call": "list_files", "args": {}}, tools=["list_files"]), user=operator
    )
    assert run_inline(task) == "failed"
    for checkpoint in Checkpoint.objects.filter(task=task):
        _tamper(checkpoint)
    with pytest.raises(RecoveryConflict, match="checksum"):
        task_forward(task_id=task.id, user=operator, reason="continue")
    from tasks.services import task_transition

    task_transition(task_id=task.id, to="queued")
    assert run_inline(task) == "failed"
    assert task.error_class == "checkpoint_corrupted"
    assert "no checkpoint passes checksum verification" in task.error_message


def test_a_worker_rebuilds_a_missing_workspace_from_the_head_checkpoint(
    make_task, run_inline, operator
):
    import shutil

    task = make_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "dir/a.txt", "content": "kept"}},
            tools=["write_file"],
        ),
        user=operator,
    )
    assert run_inline(task) == "failed"  # the script ran out
    shutil.rmtree(task.workspace_path)  # another machine, or a wiped disk

    task_resume(task_id=task.id, user=operator)  # failed -> forward from the newest checkpoint
    run_inline(task)
    assert (task.workspace_path / "dir" / "a.txt").read_text() == "kept"
    assert task.events.filter(type="workspace_materialised").exists()
