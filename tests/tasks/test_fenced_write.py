"""The worker's durable write: lease-fenced, all or nothing, one statement on PostgreSQL."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tasks.models import Task, TaskEvent, ToolCall
from tasks.services import (
    event_build,
    task_acquire,
    task_fenced_write,
)
from tasks.states import LeaseLost
from tests.factories import queued_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running() -> Task:
    task = queued_task([{"final": "x"}])
    return task_acquire(task_id=task.id, worker_id="w1")


def checkpoint(task: Task, seq: int) -> Checkpoint:
    from django.utils import timezone

    return Checkpoint(
        task_id=task.id,
        seq=seq,
        level="step",
        trigger="after_step",
        payload=b"x",
        checksum="0" * 64,
        created_at=timezone.now(),
    )


def test_write_updates_the_task_and_inserts_rows_with_their_ids(running):
    call = ToolCall(task_id=running.id, call_id="0.1.0", tool="noop", arguments={"a": 1})
    event = event_build(task_id=running.id, type="tool_finished", payload={"n": 1})
    cp = checkpoint(running, 1)

    canceled = task_fenced_write(
        task_id=running.id,
        epoch=running.lease_epoch,
        inserts=[cp, call, event],
        current_step=3,
        head_checkpoint_id=cp.id,
    )

    assert canceled is False
    task = Task.objects.get(id=running.id)
    assert task.current_step == 3 and task.head_checkpoint_id == cp.id
    assert ToolCall.objects.get(id=call.id).arguments == {"a": 1}
    assert TaskEvent.objects.get(id=event.id).payload == {"n": 1}
    call.status = "succeeded"
    call.result = {"ok": True}
    task_fenced_write(
        task_id=running.id, epoch=running.lease_epoch, updates=[(call, ["status", "result"])]
    )
    stored = ToolCall.objects.get(task=running)
    assert (stored.status, stored.result) == ("succeeded", {"ok": True})


def test_a_stale_lease_writes_nothing(running):
    before = TaskEvent.objects.filter(task=running).count()
    with pytest.raises(LeaseLost):
        task_fenced_write(
            task_id=running.id,
            epoch=running.lease_epoch - 1,
            inserts=[checkpoint(running, 1), event_build(task_id=running.id, type="x")],
            current_step=9,
        )
    assert not Checkpoint.objects.filter(task=running).exists()
    assert TaskEvent.objects.filter(task=running).count() == before
    assert Task.objects.get(id=running.id).current_step == 0


def test_the_write_reports_a_cancel_request(running):
    Task.objects.filter(id=running.id).update(cancel_requested=True)
    assert task_fenced_write(task_id=running.id, epoch=running.lease_epoch) is True
