"""Done when 2 (issue #43), with real rqworkers and a real MCP server over HTTP: the server's
tool list changes between the pause and the approval (the paused call's tool gains a required
argument). The approval does not run the call; a `version_drift` review names the field;
`continue` with an edit that supplies it reaches the server exactly once."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import free_port, spawn, wait_for
from tests.factories import scripted_task
from tests.mcp.conftest import _accepts

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


class DriftServer:
    def __init__(self, state: Path, port: int) -> None:
        self.state, self.port = state, port
        self.process: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{port}/mcp"

    def start(self, version: str) -> None:
        self.process = spawn(
            [str(self.port)],
            module="tests.versions_drift.mcp_server",
            log=self.state / f"server-{version}.log",
            env={
                "PATH": "/usr/bin:/bin",
                "MCP_TEST_STATE": str(self.state),
                "MCP_DRIFT_VERSION": version,
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            },
        )
        wait_for(lambda: _accepts(self.port), 60, message="the MCP server to listen")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            wait_for(lambda: not _accepts(self.port), 30, message="the MCP server to stop")

    def calls(self) -> list[dict]:
        path = self.state / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def drift_server(tmp_path: Path) -> Iterator[DriftServer]:
    state = tmp_path / "mcp-state"
    state.mkdir()
    server = DriftServer(state, free_port())
    server.start("1")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def harness_config_text(drift_server: DriftServer) -> str:
    return (
        "retry: {initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}\n"
        "timeouts: {session_s: 600, turn_s: 60, tool_s: 30}\n"
        "review_rules:\n  - {name: destructive, risk: destructive, action: review}\n"
        f"mcp_servers:\n  notes: {{url: {json.dumps(drift_server.url)}}}\n"
    )


def pending(task: Task, kind: str) -> ReviewRequest:
    return wait_for(
        lambda: ReviewRequest.objects.filter(task=task, status="pending", kind=kind).first(),
        90,
        message=f"a pending {kind} review",
    )


def test_an_mcp_tool_list_changed_between_pause_and_approval_asks_again(
    fleet, drift_server, operator, second_operator, api_client
):
    fleet.worker(1)
    task = scripted_task(
        [{"call": "notes__file_note", "args": {"title": "disk full"}}, {"final": "filed"}],
        ["notes__file_note"],
        user=operator,
        enqueue=True,
    )
    old = pending(task, "policy")
    drift_server.stop()
    drift_server.start("2")

    assert api_client(operator).decide(old.id, decision="approve").status_code == 200
    review = pending(task, "version_drift")
    assert drift_server.calls() == []
    drift = review.drift
    (change,) = [c for c in drift["changes"] if c["kind"] == "mcp"]
    assert change["name"] == "notes"
    assert drift["argument_errors"] == [
        {"field": "arguments.priority", "message": "Field required"}
    ]

    client = api_client(second_operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()["arguments_hash"]
    response = client.decide(
        review.id,
        decision="continue",
        arguments_hash=shown,
        arguments={"title": "disk full", "priority": 2},
    )
    assert response.status_code == 200, response.content
    wait_for(
        lambda: (
            Task.objects.values_list("status", flat=True).get(pk=task.pk) in ("succeeded", "failed")
        ),
        90,
    )
    task.refresh_from_db()
    assert task.status == "succeeded", task.error_message
    assert drift_server.calls() == [{"title": "disk full", "priority": 2}]
