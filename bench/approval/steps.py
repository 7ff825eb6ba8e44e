"""One approval, step by step: the operator, a task that pauses for review, its decision over
the API, and the times read back from its events."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from bench.common import RqWorker, tasks_delete, wait_for

CONF = "".join(f"setting_{i} = {'x' * 40}\n" for i in range(80))  # ~4 KB


def _operator() -> tuple[Any, str]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from tasks.services import api_token_create

    user = get_user_model().objects.create_user(username=f"bench-operator-{uuid.uuid4().hex[:8]}")
    user.groups.add(Group.objects.get_or_create(name="operators")[0])
    return user, api_token_create(user=user, name="bench")


def _task(key: str) -> Any:
    from tasks.services import task_create
    from tasks.spec import TaskSpec

    spec = TaskSpec.model_validate(
        {
            "title": "bench approval",
            "goal": "benchmark",
            "tools": ["ledger_append"],
            "model": {
                "kind": "scripted",
                "script": [
                    {"call": "ledger_append", "args": {"key": key, "value": "approved"}},
                    {"final": "done"},
                ],
            },
        }
    )
    return task_create(spec=spec, user=None)


def _queues_empty() -> bool:
    import django_rq
    from django.conf import settings

    return all(django_rq.get_queue(name).count == 0 for name in settings.HARNESS_QUEUES)


def _status(task_id: Any) -> str:
    from tasks.models import Task

    return Task.objects.values_list("status", flat=True).get(id=task_id)


def _event_time(task_id: Any, type: str, **payload: Any) -> float:
    from tasks.models import TaskEvent

    events = TaskEvent.objects.filter(task_id=task_id, type=type).order_by("-id")
    for event in events:
        if all(event.payload.get(k) == v for k, v in payload.items()):
            return event.created_at.timestamp()
    raise LookupError(f"no {type} event {payload} for task {task_id}")


def _paused(worker: RqWorker, key: str) -> tuple[Any, Any]:
    """(a task of `ledger_append` paused for review on the worker, its pending review), the
    worker idle again."""
    from review.models import ReviewRequest

    task = _task(key)
    wait_for(lambda: _status(task.id) == "waiting_review", what="the task to pause for review")
    # Idle: the work horse that ran the first part has exited and the worker waits on Redis.
    wait_for(lambda: worker.state() == "idle", what="the worker to be idle")
    return task, ReviewRequest.objects.get(task_id=task.id, status="pending")


def _decide(client: Any, review: Any) -> None:
    from tasks.canonical import canonical_hash

    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        data={
            "decision": "approve",
            "arguments_hash": canonical_hash(review.arguments),
            "comment": "bench",
        },
        content_type="application/json",
    )
    if response.status_code != 200:
        raise RuntimeError(f"decision failed: {response.status_code} {response.content[:300]}")


def _one(client: Any, worker: RqWorker, key: str) -> dict[str, float]:
    from agent.tools.testing import ledger_records

    task, review = _paused(worker, key)
    sent = time.time()
    _decide(client, review)
    answered = time.time()
    record = wait_for(lambda: ledger_records(key=key), what="the approved tool to run")[0]
    tool_ran = datetime.fromisoformat(record["at"]).timestamp()
    wait_for(lambda: _status(task.id) == "succeeded", what="the task to finish")
    running = _event_time(task.id, "status", to="running", reason="acquired")
    started = _event_time(task.id, "tool_started")
    tasks_delete([task.id])
    return {
        "latency": tool_ran - sent,
        "from_response": tool_ran - answered,
        "request": answered - sent,
        "pickup": running - answered,
        "resume": started - running,
        "tool": tool_ran - started,
    }
