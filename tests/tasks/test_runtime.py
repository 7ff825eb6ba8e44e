"""The loop run in-process (no worker): one step at a time, fast, on the real database."""

from __future__ import annotations

import pytest

from agent.runtime import task_run
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_verify
from tasks.models import ToolCall
from tests.factories import queued_task, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs) -> None:
    pass


def test_scripted_task_writes_files_and_checkpoints_every_level():
    task = queued_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "hello"}},
            {"call": "read_file", "args": {"path": "a.txt"}},
            {"final": "wrote a.txt"},
        ],
        ["write_file", "read_file"],
    )
    assert task_run(task_id=task.id) == "succeeded"
    task.refresh_from_db()
    assert task.status == "succeeded"
    assert task.result == "wrote a.txt"
    assert (task.workspace_path / "a.txt").read_text() == "hello"
    cps = list(Checkpoint.objects.filter(task=task).order_by("seq"))
    assert {c.level for c in cps} == {"task", "step", "tool"}
    assert [c.seq for c in cps] == list(range(1, len(cps) + 1))
    assert all(checkpoint_verify(c) for c in cps)
    assert task.head_checkpoint_id == cps[-1].id
    calls = list(ToolCall.objects.filter(task=task).order_by("id"))
    assert [(c.tool, c.status) for c in calls] == [
        ("write_file", "succeeded"),
        ("read_file", "succeeded"),
    ]
    assert calls[1].result["content"] == "hello"


def test_invalid_arguments_are_not_executed_and_the_model_gets_three_lines():
    task = queued_task(
        [{"call": "write_file", "args": {"path": "a.txt"}}, {"final": "gave up"}],
        ["write_file"],
    )
    task_run(task_id=task.id)
    task.refresh_from_db()
    assert task.status == "succeeded"
    assert not (task.workspace_path / "a.txt").exists()
    call = ToolCall.objects.get(task=task)
    assert call.status == "failed" and call.error_class == "invalid_arguments"
    feedback = call.result["observation"]
    assert len(feedback.splitlines()) <= 3 and "content" in feedback


def test_step_budget_fails_the_task_with_budget_exceeded():
    task = queued_task(
        [{"call": "list_files", "args": {}}] * 5 + [{"final": "x"}],
        ["list_files"],
        budget={"max_steps": 2},
    )
    task_run(task_id=task.id)
    task.refresh_from_db()
    assert task.status == "failed" and task.error_class == "budget_exceeded"
    assert task.steps_used == 2


def test_a_duplicate_job_for_a_running_task_exits_untouched():
    task = scripted_task([{"final": "x"}], [])
    # Not queued: acquisition refuses, nothing changes.
    assert task_run(task_id=task.id) == "skipped"
    task.refresh_from_db()
    assert task.status == "pending" and task.lease_epoch == 0


def test_tampered_checkpoint_is_detected_on_load_and_recorded():
    task = queued_task([{"call": "list_files", "args": {}}, {"final": "done"}], ["list_files"])
    task_run(task_id=task.id)
    head = Checkpoint.objects.filter(task=task).order_by("-seq").first()
    import zlib

    Checkpoint.objects.filter(pk=head.pk).update(
        payload=zlib.compress(b'{"state":{},"snapshot":null}')
    )
    from checkpoints.services import checkpoint_load_latest_valid

    loaded = checkpoint_load_latest_valid(task_id=task.id, head_id=head.id)
    assert loaded.checkpoint.seq == head.seq - 1
    assert task.events.filter(type="checkpoint_corrupted").count() == 1
