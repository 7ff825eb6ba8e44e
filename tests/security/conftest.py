"""Security fixtures: the full cast (anonymous, no group, viewer, creator, operator, superuser)
and cheap rows to aim requests at."""

from __future__ import annotations

from typing import Any

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.durable.conftest import (  # noqa: F401  (shared fixtures)
    durable_settings,
    fleet,
    harness_config_text,
)
from tests.factories import ReviewRequestFactory, TaskFactory, ToolCallFactory, scripted_spec
from tests.sso.fixtures import (  # noqa: F401  (shared fixtures)
    idp,
    idp_server,
    local_login_off,
    sso,
    sso_login,
    token_standin,
)
from tests.tools.conftest import call, ctx, outside, workspace  # noqa: F401  (shared fixtures)

ROLES = ("anonymous", "outsider", "viewer", "creator", "operator", "superuser")


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs, quiet_watchdog) -> None:
    pass


@pytest.fixture
def cast(request, db) -> dict[str, Any]:
    """role name -> user (None for anonymous)."""
    users: dict[str, Any] = {"anonymous": None}
    for role in ROLES[1:]:
        fixture = "admin_user" if role == "superuser" else role
        users[role] = request.getfixturevalue(fixture)
    return users


@pytest.fixture
def waiting_task(operator) -> tuple[Task, ReviewRequest]:
    """A task paused on a pending review of `write_file` (rows only; no loop)."""
    task = TaskFactory(
        title="target",
        spec=scripted_spec([], ["write_file"]),
        status="waiting_review",
        created_by=operator,
    )
    tool_call = ToolCallFactory(
        task=task,
        call_id="0.0.0",
        tool="write_file",
        arguments={"path": "a.txt", "content": "x"},
        risk="write",
        status="awaiting_review",
    )
    return task, ReviewRequestFactory(tool_call=tool_call)
