"""Graceful drain: SIGTERM to a busy worker (a rolling restart, `systemctl stop`, `harness up`'s
Ctrl-C) takes no new job, lets the running step reach its checkpoint, and gives the task back
at once: another worker continues it right after the release (not after the stale-heartbeat
window: no sweeper runs here, and that window is long), and its side effect happens once."""

from __future__ import annotations

import signal

import pytest

from agent.tools.testing import ledger_records
from tasks.models import Task
from tests.conftest import parent_pid, wait_for
from tests.factories import enqueued_task

from .conftest import wait_status
from .test_crash_recovery import in_call

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCRIPT = [
    {"call": "sleep", "args": {"seconds": 1.5}},
    {"call": "ledger_append", "args": {"key": "drained", "value": "paid"}},
    {"final": "done"},
]


@pytest.fixture
def slow_sweep(fleet, settings):
    """A stale-heartbeat window far longer than the test: only a release continues a task."""
    fleet.pool.env["HARNESS_STALE_AFTER_S"] = "600"
    settings.HARNESS_STALE_AFTER_S = 600
    return fleet


def _worker_running(fleet, task_id):
    worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task_id)
    horse = int(worker_id.rsplit(":", 1)[1])
    return next(p for p in fleet.pool.processes if parent_pid(horse) == p.pid)


def test_sigterm_to_a_busy_worker_hands_its_task_to_another_at_the_next_checkpoint(slow_sweep):
    fleet = slow_sweep
    fleet.worker(2)
    task = enqueued_task(SCRIPT, ["sleep", "ledger_append"])
    wait_for(lambda: in_call(task, "sleep"), message="the sleep to start")
    draining = _worker_running(fleet, task.id)
    first_worker = Task.objects.values_list("worker_id", flat=True).get(id=task.id)

    fleet.pool.kill(draining, signal.SIGTERM)  # its process group, as `harness up` stops it

    task = wait_status(task.id, "succeeded", timeout=60)
    # The draining worker finished its step, gave the task back and exited by itself.
    assert draining.wait(timeout=30) == 0, fleet.pool.logs()
    events = list(task.events.order_by("id"))
    (drained,) = [e for e in events if e.type == "drained"]
    assert drained.payload == {"worker": first_worker, "killed": False}
    # Released at the checkpoint after the sleep's step, queued again, and taken at once by
    # the other worker, which went on from there: the sleep ran once, the payment once.
    changes = [e for e in events if e.type == "status"]
    assert [(e.payload["from"], e.payload["to"]) for e in changes[-4:]] == [
        ("queued", "running"),
        ("running", "queued"),
        ("queued", "running"),
        ("running", "succeeded"),
    ]
    released, resumed = changes[-3], changes[-2]
    assert released.id < drained.id < resumed.id
    assert (resumed.created_at - released.created_at).total_seconds() < 2.0
    assert task.redispatch_count == 0 and task.lease_epoch == 2
    assert [e.payload["tool"] for e in events if e.type == "tool_started"] == [
        "sleep",
        "ledger_append",
    ]
    assert len(ledger_records(key="drained")) == 1


def test_a_step_that_outlasts_harness_drain_s_is_killed_and_redispatched_at_once(slow_sweep):
    fleet = slow_sweep
    fleet.pool.env["HARNESS_DRAIN_S"] = "0.5"
    fleet.worker(2)
    task = enqueued_task([{"call": "sleep", "args": {"seconds": 3}}, {"final": "done"}], ["sleep"])
    wait_for(lambda: in_call(task, "sleep"), message="the sleep to start")
    draining = _worker_running(fleet, task.id)
    first_worker = Task.objects.values_list("worker_id", flat=True).get(id=task.id)

    fleet.pool.kill(draining, signal.SIGTERM)

    task = wait_status(task.id, "succeeded", timeout=60)
    assert draining.wait(timeout=30) == 0, fleet.pool.logs()
    drained = task.events.get(type="drained")
    assert drained.payload == {"worker": first_worker, "killed": True}
    # Redispatched by the worker that killed its horse (the sweep's window is 600 s); the
    # read-only sleep ran again on the other worker.
    assert task.redispatch_count == 1
    assert task.events.filter(type="redispatched").count() == 1
