"""Security fixtures: the full cast (anonymous, no group, viewer, creator, operator, superuser)
and cheap rows to aim requests at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from harness_site.config import harness_config
from review.models import ReviewRequest
from tasks.models import Task, ToolCall
from tests.conftest import PASSWORD, ApiClient
from tests.durable.conftest import (  # noqa: F401  (shared fixtures)
    durable_settings,
    fleet,
    harness_config_text,
)
from tests.tools.conftest import call, ctx, outside, workspace  # noqa: F401  (shared fixtures)

ROLES = ("anonymous", "outsider", "viewer", "creator", "operator", "superuser")


@pytest.fixture(autouse=True)
def _harness_settings(settings, tmp_path) -> None:
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"
    settings.HARNESS_LEDGER_DIR = tmp_path / "ledger"
    settings.HARNESS_ENABLE_TEST_TOOLS = True
    settings.HARNESS_HEARTBEAT_S = 3600


@pytest.fixture
def creator(roles, django_user_model):
    """May create tasks (and read); may not operate or decide."""
    user = django_user_model.objects.create_user(username="creator", password=PASSWORD)
    user.groups.add(roles["creators"])
    return user


@pytest.fixture
def cast(request, db) -> dict[str, Any]:
    """role name -> user (None for anonymous)."""
    users: dict[str, Any] = {"anonymous": None}
    for role in ROLES[1:]:
        fixture = "admin_user" if role == "superuser" else role
        users[role] = request.getfixturevalue(fixture)
    return users


def page_client(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def api_client(user) -> ApiClient:
    return ApiClient(user)


@pytest.fixture
def waiting_task(operator) -> tuple[Task, ReviewRequest]:
    """A task paused on a pending review of `write_file` (rows only; no loop)."""
    task = Task.objects.create(
        title="target",
        goal="g",
        spec={"model": {"kind": "scripted", "script": []}, "tools": ["write_file"]},
        status="waiting_review",
        created_by=operator,
    )
    arguments = {"path": "a.txt", "content": "x"}
    tool_call = ToolCall.objects.create(
        task=task,
        call_id="0.0.0",
        tool="write_file",
        arguments=arguments,
        risk="write",
        status="awaiting_review",
    )
    review = ReviewRequest.objects.create(
        task=task,
        tool_call=tool_call,
        tool="write_file",
        risk="write",
        original_arguments=arguments,
        requested_at=timezone.now(),
    )
    return task, review


@pytest.fixture
def second_operator(roles, django_user_model):
    user = django_user_model.objects.create_user(username="operator2", password=PASSWORD)
    user.groups.add(roles["operators"])
    return user


@pytest.fixture
def paused(db):
    """paused(script, tools, files, user=) -> the pending review of a task the real loop ran
    in-process until the policy paused it."""
    from agent.runtime import task_run
    from tasks.services import task_create, task_transition
    from tasks.spec import TaskSpec

    def make(script: list[dict], tools: list[str], files: dict[str, str], *, user=None):
        spec = TaskSpec.model_validate(
            {
                "title": "security",
                "goal": "change the files",
                "model": {"kind": "scripted", "script": script},
                "tools": tools,
                "workspace": {"files": files},
            }
        )
        task = task_create(spec=spec, user=user, enqueue=False)
        task_transition(task_id=task.id, to="queued")
        assert task_run(task_id=task.id) == "paused"
        return ReviewRequest.objects.get(task=task, status="pending")

    return make


@pytest.fixture
def harness_yaml(settings, tmp_path: Path) -> Iterator:
    """harness_yaml(text): use this harness.yaml for the rest of the test."""

    def use(text: str) -> None:
        path = tmp_path / "harness.yaml"
        path.write_text(text)
        settings.HARNESS_CONFIG_FILE = path
        harness_config.cache_clear()

    yield use
    harness_config.cache_clear()
