"""Creating and running tasks in-process (no worker) for the model tests."""

from __future__ import annotations

from typing import Any

from tasks.models import Task
from tests.factories import run_in_process, spec_task, task_spec


def create(model: dict[str, Any], tools: list[str], **extra: Any) -> Task:
    return spec_task(task_spec(model, tools, **{"goal": "do it", **extra}))


def run(task: Task) -> Task:
    """Queue the task and run one job for it, as a worker would."""
    run_in_process(task)
    return task


def event_payloads(task: Task, type: str) -> list[dict[str, Any]]:
    return list(task.events.filter(type=type).order_by("id").values_list("payload", flat=True))
