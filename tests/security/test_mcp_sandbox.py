"""A stdio MCP server is a tool process: it runs in the task's sandbox and must not see the
harness, the worker's secrets, other processes or the network (THREATS.md)."""

from __future__ import annotations

import pytest
from django.conf import settings

from tasks.models import ToolCall
from tests.durable.conftest import durable_settings, fleet  # noqa: F401  (fixtures)
from tests.factories import enqueued_task
from tests.mcp.conftest import BASE_CONFIG, wait_status
from tests.mcp.test_stdio import STDIO_CONFIG

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SECRET = "sk-mcp-sandbox-test-secret"


@pytest.fixture
def harness_config_text() -> str:
    return BASE_CONFIG + STDIO_CONFIG.replace(
        'env: {PYTHONPATH: "{harness}"}', 'env: {PYTHONPATH: "{harness}", TICKETS: "granted"}'
    )


def _probe(path: str) -> dict:
    return {"call": "local__probe", "args": {"path": path}}


def test_stdio_server_sees_only_its_workspace_and_granted_environment(fleet):  # noqa: F811
    fleet.pool.env["OPENAI_API_KEY"] = SECRET
    fleet.worker()
    data_dir = str(settings.BASE_DIR / ".data")
    task = enqueued_task(
        [
            _probe(str(settings.BASE_DIR / "manage.py")),
            _probe(data_dir),
            _probe(str(settings.HARNESS_WORKSPACE_ROOT)),
            {"final": "probed"},
        ],
        ["local__probe"],
    )
    task = wait_status(task.id, "succeeded")
    code, data, workspaces = (
        c.result for c in ToolCall.objects.filter(task=task).order_by("call_id")
    )
    assert code["uid"] == 65534 and code["cwd"] == "/workspace"
    # Only what harness.yaml grants (plus the sandbox's PATH, HOME, LANG, TMPDIR).
    assert "TICKETS" in code["env"] and "OPENAI_API_KEY" not in code["env"]
    assert not {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} & set(code["env"])
    assert not code["exists"] and not data["exists"] and not workspaces["exists"]
    # Its own PID namespace: the server and the sandbox's init, not the worker.
    assert code["processes"] <= 3
