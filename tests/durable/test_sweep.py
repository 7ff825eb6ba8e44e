"""The sweep's decisions, one pass at a time, on the real database and Redis (no workers: the
jobs it enqueues stay in Redis for the test to see)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.utils import timezone
from rq.registry import ScheduledJobRegistry

from agent.sweep import sweep_once
from tasks.models import Task, ToolCall
from tasks.selectors import sweep_last_run
from tasks.services import task_acquire, task_enqueue, task_transition
from tests.factories import enqueued_task, queued_task

pytestmark = pytest.mark.django_db(transaction=True)


def running_task(*, silent_s: float, **fields) -> Task:
    task = enqueued_task([{"final": "x"}], [])
    task_acquire(task_id=task.id, worker_id="lost-host:1")
    Task.objects.filter(id=task.id).update(
        heartbeat_at=timezone.now() - timedelta(seconds=silent_s), **fields
    )
    return task


def statuses(task: Task) -> list[tuple[str, str]]:
    return [
        (e.payload["from"], e.payload["to"])
        for e in task.events.filter(type="status").order_by("id")
    ]


def test_a_silent_running_task_is_stalled_and_redispatched(queue):
    task = running_task(silent_s=30)
    queue.empty()
    counts = sweep_once()
    task.refresh_from_db()
    assert (counts.stalled, counts.redispatched) == (1, 1)
    assert task.status == "queued" and task.redispatch_count == 1 and task.worker_id == ""
    assert statuses(task)[-2:] == [("running", "stalled"), ("stalled", "queued")]
    assert task.rq_job_id in queue.job_ids


def test_a_task_with_a_fresh_heartbeat_is_left_alone(queue):
    task = running_task(silent_s=0)
    assert sweep_once().stalled == 0
    task.refresh_from_db()
    assert task.status == "running"


def test_a_task_past_its_redispatch_limit_fails_and_its_running_calls_become_unknown(
    queue, settings
):
    task = running_task(silent_s=30, redispatch_count=settings.HARNESS_MAX_REDISPATCHES)
    ToolCall.objects.create(task=task, call_id="0.0.0", tool="ledger_append", status="running")
    assert sweep_once().failed == 1
    task.refresh_from_db()
    assert task.status == "failed" and task.error_class == "stalled"
    assert ToolCall.objects.get(task=task).status == "unknown_outcome"


def test_a_cancel_requested_before_the_worker_died_is_honoured(queue):
    task = running_task(silent_s=30, cancel_requested=True)
    assert sweep_once().canceled == 1
    task.refresh_from_db()
    assert task.status == "canceled"


def test_a_queued_task_whose_job_vanished_is_enqueued_again(queue, settings):
    task = enqueued_task([{"final": "x"}], [])
    queue.connection.flushdb()  # Redis restarted empty
    with time_machine.travel(
        timezone.now() + timedelta(seconds=settings.HARNESS_REQUEUE_GRACE_S + 1)
    ):
        assert sweep_once().requeued == 1
    task.refresh_from_db()
    assert task.rq_job_id in queue.job_ids
    assert task.events.filter(type="requeued", payload__job_state="missing").exists()
    # Its job is there now: the next pass leaves it alone.
    assert sweep_once().requeued == 0


def test_a_task_queued_moments_ago_is_not_enqueued_twice(queue):
    enqueued_task([{"final": "x"}], [])
    queue.connection.flushdb()
    assert sweep_once().requeued == 0


def test_a_retry_whose_scheduled_job_is_overdue_is_enqueued_directly(queue, settings):
    task = queued_task([{"final": "x"}])
    task_acquire(task_id=task.id, worker_id="w:1")
    overdue = timezone.now() - timedelta(seconds=settings.HARNESS_REQUEUE_GRACE_S + 5)
    task = task_transition(task_id=task.id, to="retry_wait", fields={"retry_at": overdue})
    task_enqueue(task=task, delay_s=0.5)  # no scheduler runs: the job would wait forever
    registry = ScheduledJobRegistry(queue=queue)
    stuck = Task.objects.get(id=task.id).rq_job_id
    queue.connection.zadd(registry.key, {stuck: overdue.timestamp()})

    assert sweep_once().requeued == 1
    task.refresh_from_db()
    assert stuck not in registry.get_job_ids()
    assert task.rq_job_id in queue.job_ids


def test_the_sweep_records_its_last_run_for_the_ops_page(queue):
    assert sweep_last_run() is None
    call_command("harness_sweep")
    call_command("harness_sweep")
    last = sweep_last_run()
    assert last.runs == 2 and last.counts["stalled"] == 0
    assert timezone.now() - last.finished_at < timedelta(minutes=1)


def test_a_job_popped_by_a_worker_that_never_started_it_is_enqueued_again(queue, settings):
    """A worker blocked in BLPOP on a host that was then cut off (or froze, or lost power) gets
    the job written to its dead connection: Redis takes it as delivered, it is in no queue any
    more and its status still says `queued`. Seen so on two sweeps, its task is enqueued again
    (without this it waited for that host to come back, if it ever did)."""
    settings.HARNESS_REQUEUE_GRACE_S = 0
    task = enqueued_task([{"final": "x"}], [])
    lost = Task.objects.get(id=task.id).rq_job_id
    assert queue.connection.lrem(queue.key, 1, lost) == 1  # popped by the vanished worker

    assert sweep_once().requeued == 0  # first sighting: a live worker may be starting it
    assert sweep_once().requeued == 1
    task.refresh_from_db()
    assert task.rq_job_id != lost and task.rq_job_id in queue.job_ids
    assert task.events.filter(type="requeued", payload__job_state="undelivered").exists()
    assert sweep_once().requeued == 0  # its new job is in the queue


def test_a_job_a_worker_has_started_is_not_taken_for_undelivered(queue, settings):
    settings.HARNESS_REQUEUE_GRACE_S = 0
    task = enqueued_task([{"final": "x"}], [])
    job = queue.fetch_job(Task.objects.get(id=task.id).rq_job_id)
    queue.connection.lrem(queue.key, 1, job.id)
    job.set_status("started")  # a live worker took it

    assert sweep_once().requeued == 0
    assert sweep_once().requeued == 0


def test_a_decided_tasks_job_is_looked_for_and_put_back_on_the_resume_lane(queue, settings):
    import django_rq

    settings.HARNESS_REQUEUE_GRACE_S = 0
    resume = django_rq.get_queue("resume")
    task = queued_task([{"final": "x"}], [])
    task_enqueue(task=task, decided=True)  # after a decision: on the resume lane
    waiting = Task.objects.get(id=task.id).rq_job_id
    assert resume.job_ids == [waiting]
    # Waiting on `resume`, not on its priority's queue: not taken for undelivered.
    assert sweep_once().requeued == 0
    assert sweep_once().requeued == 0

    assert resume.connection.lrem(resume.key, 1, waiting) == 1  # popped by a vanished worker
    sweep_once()
    assert sweep_once().requeued == 1
    task.refresh_from_db()
    assert resume.job_ids == [task.rq_job_id] and task.rq_job_id != waiting
