"""Decided work first, on real rqworker processes: a task resuming after a person's decision
runs on the `resume` lane, ahead of a batch waiting on `default` and `low`."""

from __future__ import annotations

import pytest
from django.db import transaction

from tasks.events import EventType
from tasks.models import Task, TaskEvent
from tasks.services import task_enqueue
from tasks.states import TaskStatus
from tests.conftest import approve, wait_for
from tests.durable.conftest import TEST_CONFIG, wait_status
from tests.factories import scripted_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

BATCH = 300


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + "review_rules:\n  - {name: deletes, tool: delete_file, action: review}\n"


def batch_enqueue(count: int) -> list[Task]:
    """`count` cheap queued tasks (one final answer each), half on `default` and half on
    `low`, created in one INSERT and enqueued in one transaction."""
    spec = scripted_spec([{"final": "batch"}])
    tasks = Task.objects.bulk_create(
        Task(
            title=f"batch {n}",
            goal="batch",
            spec=spec,
            status=TaskStatus.QUEUED,
            priority="default" if n % 2 else "low",
        )
        for n in range(count)
    )
    with transaction.atomic():
        for task in tasks:
            task_enqueue(task=task)
    return tasks


def acquired_event_ids(task_ids: list) -> dict[str, int]:
    """task id -> id of its first `acquired` status event (event ids grow with time)."""
    first: dict[str, int] = {}
    rows = TaskEvent.objects.filter(
        task_id__in=task_ids, type=EventType.STATUS, payload__reason="acquired"
    ).values_list("task_id", "id")
    for task_id, event_id in rows:
        first[str(task_id)] = min(event_id, first.get(str(task_id), event_id))
    return first


def test_an_approved_task_runs_before_a_waiting_batch(fleet, paused_review, operator):
    review = paused_review()
    batch = batch_enqueue(BATCH)
    batch_ids = [task.id for task in batch]
    fleet.worker(2)
    # The workers are busy with the batch when the decision comes.
    wait_for(lambda: acquired_event_ids(batch_ids), 60, message="the batch to start")
    approve(review, operator)
    # Counted once the decision is committed and its job enqueued (not before approving: the
    # cheap batch tasks went on starting while the decision was being made).
    at_decision = len(acquired_event_ids(batch_ids))

    done = wait_status(review.task_id, "succeeded", "failed")
    assert done.status == "succeeded"
    resumed_at = (
        TaskEvent.objects.filter(
            task_id=review.task_id, type=EventType.STATUS, payload__reason="acquired"
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    started_before = [i for i in acquired_event_ids(batch_ids).values() if i < resumed_at]
    # After the decision, a worker's next job is the decided one, taken from the `resume` lane
    # while most of the batch still waits. Besides the batch tasks started by then: each of the
    # two workers may have held one taken but not yet started, and the worker that does not
    # take the decided job may start one more while the other starts it. On `default` the
    # decided job would wait behind half the batch.
    assert len(started_before) <= at_decision + 2 + 2
    assert len(started_before) < BATCH
    assert Task.objects.filter(id__in=batch_ids, status=TaskStatus.QUEUED).exists()
