"""Operators and infrastructure acting on running tasks, with real workers: cancel, a global
concurrency limit, and Redis losing every job."""

from __future__ import annotations

import pytest
import redis
from django.utils import timezone

from checkpoints.recovery import task_cancel
from tasks.models import Task, TaskEvent, ToolCall
from tests.conftest import processes_running, wait_for
from tests.factories import enqueued_task

from .conftest import TEST_CONFIG, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_cancel_during_a_long_run_command_stops_the_subprocess(fleet, operator, commands_allowed):
    fleet.worker()
    task = enqueued_task(
        [{"call": "run_command", "args": {"command": "exec sleep 60.25"}}, {"final": "never"}],
        ["run_command"],
    )
    wait_for(lambda: processes_running("sleep 60.25"), 60, message="the command to start")

    task_cancel(task_id=task.id, user=operator, reason="wrong target")
    task = wait_status(task.id, "canceled")
    assert processes_running("sleep 60.25") == []
    call = ToolCall.objects.get(task=task)
    assert call.status == "failed" and call.error_class == "canceled"
    assert task.error_class == "canceled"


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + "max_concurrent_tasks: 1\n"


def running_intervals(tasks: list[Task]) -> list[tuple]:
    """(acquired at, left running at) for every run of the tasks, in order."""
    intervals = []
    for task in tasks:
        start = None
        for event in TaskEvent.objects.filter(task=task, type="status").order_by("id"):
            if event.payload["to"] == "running":
                start = event.created_at
            elif event.payload["from"] == "running":
                intervals.append((start, event.created_at))
    return sorted(intervals)


def test_the_global_concurrency_limit_holds_across_workers(fleet):
    fleet.worker(2)
    tasks = [
        enqueued_task(
            [{"call": "sleep", "args": {"seconds": 0.5}}, {"final": "ok"}], ["sleep"], title=f"t{i}"
        )
        for i in range(3)
    ]
    for task in tasks:
        wait_status(task.id, "succeeded")
    intervals = running_intervals(tasks)
    assert len(intervals) == 3
    # One at a time: each run began after the previous one ended.
    for (_, end), (start, _) in zip(intervals, intervals[1:], strict=False):
        assert start > end


def test_redis_losing_every_job_loses_no_task(private_redis, fleet):
    fleet.worker(2)
    fleet.sweeper()
    tasks = [
        enqueued_task(
            [
                {"call": "sleep", "args": {"seconds": 0.5}},
                {"call": "flaky", "args": {"key": f"k{i}", "fail_times": 1}},
                {"call": "sleep", "args": {"seconds": 0.5}},
                {"final": "done"},
            ],
            ["sleep", "flaky"],
            title=f"t{i}",
            retry={"initial_s": 1, "jitter": "none"},
        )
        for i in range(5)
    ]
    # Two workers, five tasks: some run, some wait in the queue or for a retry.
    wait_for(lambda: Task.objects.filter(status="running").exists(), 60, message="a task to start")
    flushed_at = timezone.now()
    redis.Redis.from_url(private_redis).flushall()

    for task in tasks:
        wait_status(task.id, "succeeded", timeout=90)
    requeued = TaskEvent.objects.filter(type="requeued", created_at__gt=flushed_at)
    assert requeued.exists()
