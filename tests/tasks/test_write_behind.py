"""A fenced write sent behind (tasks.services.write_behind): the same statement as
task_fenced_write, committed by the writer thread on its own connection while the caller goes
on; collected by `wait()`, which raises what refused it. Synchronous inside a transaction."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from tasks.models import Task, TaskEvent, ToolCall
from tasks.services import event_build, task_acquire, write_behind
from tasks.services.write_behind import task_fenced_write_behind, write_behind_release
from tasks.states import LeaseLost
from tests.factories import queued_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running() -> Task:
    task = queued_task([{"final": "x"}])
    yield task_acquire(task_id=task.id, worker_id="w1")
    write_behind_release()


def test_a_write_sent_behind_commits_its_rows_and_numbers_them_once_collected(running):
    call = ToolCall(task_id=running.id, call_id="0.1.0", tool="noop", arguments={"a": 1})
    event = event_build(task_id=running.id, type="tool_finished", payload={"n": 1})

    sent = task_fenced_write_behind(
        task_id=running.id, epoch=running.lease_epoch, inserts=[call, event], current_step=3
    )

    assert sent.sent
    assert sent.wait() is False
    assert not sent.sent and event.pk is not None and not call._state.adding
    assert Task.objects.get(id=running.id).current_step == 3
    assert ToolCall.objects.get(id=call.id).arguments == {"a": 1}
    assert TaskEvent.objects.get(id=event.id).payload == {"n": 1}
    # Collected once: a second wait returns the same without waiting again.
    assert sent.wait() is False


def test_a_write_sent_behind_with_a_stale_lease_raises_when_collected_and_writes_nothing(running):
    before = TaskEvent.objects.filter(task=running).count()
    sent = task_fenced_write_behind(
        task_id=running.id,
        epoch=running.lease_epoch - 1,
        inserts=[event_build(task_id=running.id, type="x")],
        current_step=9,
    )
    with pytest.raises(LeaseLost):
        sent.wait()
    assert TaskEvent.objects.filter(task=running).count() == before
    assert Task.objects.get(id=running.id).current_step == 0


def test_a_write_sent_behind_reports_a_cancel_request(running):
    Task.objects.filter(id=running.id).update(cancel_requested=True)
    assert task_fenced_write_behind(task_id=running.id, epoch=running.lease_epoch).wait() is True


def test_inside_a_transaction_the_write_is_done_in_place(running):
    with transaction.atomic():
        sent = task_fenced_write_behind(
            task_id=running.id, epoch=running.lease_epoch, current_step=5
        )
        assert not sent.sent
        assert Task.objects.get(id=running.id).current_step == 5
    assert sent.wait() is False


def test_write_behind_off_in_settings_writes_in_place(running, settings):
    settings.HARNESS_WRITE_BEHIND = False
    sent = task_fenced_write_behind(task_id=running.id, epoch=running.lease_epoch, current_step=4)
    assert not sent.sent
    assert Task.objects.get(id=running.id).current_step == 4


def test_a_row_changed_after_it_was_sent_is_written_as_it_was_sent(running):
    """The JSON of a sent row is taken when it is sent, not when the writer thread gets to it."""
    held = threading.Event()
    write_behind._executor().submit(held.wait, 30)  # the writer busy with an earlier write
    payload = {"n": 1}
    event = event_build(task_id=running.id, type="tool_finished", payload=payload)
    sent = task_fenced_write_behind(task_id=running.id, epoch=running.lease_epoch, inserts=[event])
    payload["n"] = 2
    held.set()
    sent.wait()
    assert TaskEvent.objects.get(id=event.id).payload == {"n": 1}
