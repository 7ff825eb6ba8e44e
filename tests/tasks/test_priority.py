"""An operator changes a queued task's priority (API and task page): the job moves to the new
queue at once, never on two queues or none; the task page says how many jobs wait ahead."""

from __future__ import annotations

import django_rq
import pytest

from tasks.models import AuditEntry, Task
from tasks.services import job_move, task_defer
from tests.conftest import BROWSER, wait_for
from tests.factories import enqueued_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queues():
    """The harness queues on this test process's Redis database, emptied before and after."""
    connection = django_rq.get_connection("default")
    connection.flushdb()
    yield {name: django_rq.get_queue(name) for name in ("resume", "high", "default", "low")}
    connection.flushdb()


def queued(priority: str = "low") -> Task:
    task = enqueued_task([{"final": "x"}], priority=priority)
    task.refresh_from_db()
    return task


def lanes_of(queues: dict, job_id: str) -> list[str]:
    return [name for name, queue in queues.items() if job_id in queue.job_ids]


def test_a_priority_change_moves_the_queued_job_and_is_audited(queues, api_client, operator):
    waiting = [queued() for _ in range(2)]
    task = queued()
    assert lanes_of(queues, task.rq_job_id) == ["low"]

    response = api_client(operator).post(f"/api/v1/tasks/{task.id}/priority", {"priority": "high"})

    assert response.status_code == 200, response.content
    assert response.json()["priority"] == "high"
    assert lanes_of(queues, task.rq_job_id) == ["high"]
    assert queues["low"].job_ids == [t.rq_job_id for t in waiting]
    entry = AuditEntry.objects.get(action="task_priority", task_id=task.id)
    assert (entry.actor, entry.before, entry.after) == (
        operator,
        {"priority": "low"},
        {"priority": "high"},
    )


def test_priority_refusals_name_why(queues, api_client, operator, viewer):
    task = queued()
    path = f"/api/v1/tasks/{task.id}/priority"
    assert api_client(viewer).post(path, {"priority": "high"}).status_code == 403
    bad = api_client(operator).post(path, {"priority": "urgent"})
    assert bad.status_code == 422
    assert [e["field"] for e in bad.json()["errors"]] == ["priority"]
    Task.objects.filter(id=task.id).update(status="succeeded")
    done = api_client(operator).post(path, {"priority": "high"})
    assert done.status_code == 409 and "succeeded" in done.json()["detail"]
    assert lanes_of(queues, task.rq_job_id) == ["low"]
    assert not AuditEntry.objects.filter(action="task_priority").exists()


def test_a_job_a_worker_took_is_not_moved(queues):
    task = queued()
    popped = queues["low"].connection.lpop(queues["low"].key)  # a worker's dequeue
    assert popped.decode() == task.rq_job_id
    assert job_move(job_id=task.rq_job_id, to="high") is False
    assert lanes_of(queues, task.rq_job_id) == []


def test_a_decided_task_waiting_for_capacity_keeps_its_lane(queues):
    task = queued()
    task_defer(task_id=task.id, decided=True)  # its run found every slot taken
    task.refresh_from_db()
    assert task.rq_job_id in queues["resume"].scheduled_job_registry.get_job_ids()


@pytest.mark.browser
@BROWSER[-1]
def test_the_task_page_moves_a_task_and_says_how_many_wait_ahead(queues, open_page, operator):
    for _ in range(2):
        queued()
    task = queued()
    page = open_page(operator, f"/tasks/{task.id}/")
    lane = page.get_by_test_id("task-lane")
    assert lane.inner_text() == "low: 2 jobs ahead of it"

    page.get_by_test_id("priority-select").select_option("high")
    page.get_by_test_id("priority-button").click()

    wait_for(lambda: lane.inner_text() == "high: 0 jobs ahead of it", 20, message="the move")
    assert page.get_by_test_id("task-priority").inner_text() == "high"
    assert lanes_of(queues, task.rq_job_id) == ["high"]
