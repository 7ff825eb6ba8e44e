"""Fixtures for the dashboard tests: logged-in clients per role, tasks run through the real
loop in-process, and rows with hand-chosen timestamps for the statistics."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tasks.models import Task, ToolCall
from tasks.services import task_create, task_transition
from tasks.spec import TaskSpec


@pytest.fixture(autouse=True)
def _workspace(settings, tmp_path):
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"
    settings.HARNESS_LEDGER_DIR = tmp_path / "ledger"
    settings.HARNESS_ENABLE_TEST_TOOLS = True
    # In-process runs live inside the test's transaction, which the watchdog's own
    # connection cannot see: keep it from heartbeating during a test.
    settings.HARNESS_HEARTBEAT_S = 3600


@pytest.fixture
def as_user() -> Callable[[Any], Client]:
    """`as_user(operator)` -> a test client logged in as that user (None: anonymous)."""

    def make(user) -> Client:
        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    return make


def spec(script: list[dict], tools: list[str], **extra: Any) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "title": extra.pop("title", "a task"),
            "goal": "reach the goal",
            "model": {"kind": "scripted", "script": script},
            "tools": tools,
            **extra,
        }
    )


@pytest.fixture
def run_task(operator) -> Callable[..., Task]:
    """Create a task as the operator and run it through the real loop in this process."""
    from agent.runtime import task_run

    def run(script: list[dict], tools: list[str], **extra: Any) -> Task:
        task = task_create(spec=spec(script, tools, **extra), user=operator, enqueue=False)
        task_transition(task_id=task.id, to="queued")
        task_run(task_id=task.id)
        task.refresh_from_db()
        return task

    return run


@pytest.fixture
def make_task(operator) -> Callable[..., Task]:
    """A task row with chosen fields (no loop), for list and statistics fixtures."""
    counter = iter(range(1_000_000))

    def make(**fields: Any) -> Task:
        n = next(counter)
        defaults: dict[str, Any] = {
            "title": f"task {n}",
            "goal": "g",
            "spec": {},
            "created_by": operator,
        }
        created_at = fields.pop("created_at", None)
        task = Task.objects.create(**{**defaults, **fields})
        if created_at is not None:
            Task.objects.filter(id=task.id).update(created_at=created_at)
            task.created_at = created_at
        return task

    return make


@pytest.fixture
def make_call() -> Callable[..., ToolCall]:
    counter = iter(range(1_000_000))

    def make(
        task: Task, tool: str, status: str, *, at: datetime | None = None, **fields: Any
    ) -> ToolCall:
        at = at or timezone.now() - timedelta(minutes=5)
        call = ToolCall.objects.create(
            task=task, call_id=f"c{next(counter)}", tool=tool, status=status, **fields
        )
        ToolCall.objects.filter(id=call.id).update(created_at=at)
        call.created_at = at
        return call

    return make
