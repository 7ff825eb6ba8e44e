"""Creating and running tasks in-process (no worker) for the model tests."""

from __future__ import annotations

from typing import Any

from agent.runtime import task_run
from tasks.models import Task
from tasks.services import task_create, task_transition
from tasks.spec import TaskSpec


def create(model: dict[str, Any], tools: list[str], **extra: Any) -> Task:
    spec = TaskSpec.model_validate(
        {"title": "t", "goal": extra.pop("goal", "do it"), "model": model, "tools": tools, **extra}
    )
    return task_create(spec=spec, user=None, enqueue=False)


def run(task: Task) -> Task:
    """Queue the task and run one job for it, as a worker would."""
    task_transition(task_id=task.id, to="queued")
    task_run(task_id=task.id)
    task.refresh_from_db()
    return task


def event_payloads(task: Task, type: str) -> list[dict[str, Any]]:
    return list(task.events.filter(type=type).order_by("id").values_list("payload", flat=True))
