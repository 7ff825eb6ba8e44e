"""Review fixtures on top of the shared cast (tests/conftest.py): a second operator and a
permission holder for four-eyes rules, and tasks paused for review by the real loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from agent.runtime import task_run
from review.models import ReviewRequest
from tasks.models import Task
from tasks.services import task_create, task_transition
from tasks.spec import TaskSpec
from tests.conftest import PASSWORD


@pytest.fixture(autouse=True)
def _harness_settings(settings, tmp_path) -> None:
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"
    settings.HARNESS_LEDGER_DIR = tmp_path / "ledger"
    settings.HARNESS_ENABLE_TEST_TOOLS = True


@pytest.fixture
def second_operator(roles, django_user_model):
    user = django_user_model.objects.create_user(username="operator2", password=PASSWORD)
    user.groups.add(roles["operators"])
    return user


@pytest.fixture
def decider(db, django_user_model):
    """In no group, but holding the `review.decide_review` permission."""
    user = django_user_model.objects.create_user(username="decider", password=PASSWORD)
    user.user_permissions.add(Permission.objects.get(codename="decide_review"))
    return user


def make_task(
    script: list[dict], tools: list[str], *, user=None, enqueue: bool = False, **extra: Any
) -> Task:
    spec = TaskSpec.model_validate(
        {
            "title": extra.pop("title", "review test"),
            "goal": "tidy the workspace",
            "model": {"kind": "scripted", "script": script},
            "tools": tools,
            **extra,
        }
    )
    return task_create(spec=spec, user=user, enqueue=enqueue)


def delete_script(path: str = "old.log") -> list[dict]:
    return [{"call": "delete_file", "args": {"path": path}}, {"final": "done"}]


def run_in_process(task: Task) -> str:
    """Run the loop here (no worker) on a queued task."""
    return task_run(task_id=task.id)


@pytest.fixture
def paused_review(db) -> Callable[..., ReviewRequest]:
    """paused_review(user=, script=, tools=, files=, ...) -> the pending review of a task whose
    loop ran in-process until the policy paused it (default: delete_file on old.log)."""

    def make(
        *,
        user=None,
        script: list[dict] | None = None,
        tools: list[str] | None = None,
        files: dict[str, str] | None = None,
        **extra: Any,
    ) -> ReviewRequest:
        task = make_task(
            script or delete_script(),
            tools or ["delete_file"],
            user=user,
            workspace={"files": files or {"old.log": "stale\n"}},
            **extra,
        )
        task_transition(task_id=task.id, to="queued")
        assert run_in_process(task) == "paused"
        return ReviewRequest.objects.get(task=task, status="pending")

    return make
