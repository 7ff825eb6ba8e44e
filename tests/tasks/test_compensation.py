"""How a rollback undoes one call (tasks.selectors.compensation_for, issue #44): a tool's own
declaration, an `http.compensations` request, or why the call cannot be undone."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agent.tools.command import run_command  # noqa: F401  (registers the tool)
from tasks.selectors import Irreversible, PlannedCompensation, compensation_for, effects_outside
from tasks.tools import Compensate, ToolContext, registry, tool
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db

HTTP_CONFIG = """
review_rules: []
http:
  compensations:
    - match: {method: POST, url: "https://tracker.example/*/issues"}
      request:
        method: DELETE
        url: "https://tracker.example/issues/{{ result.json.id }}\\
          ?project={{ args.headers.X-Project }}"
        headers: {X-Reason: "rollback of {{ result.json.id }}"}
        json: {reason: rollback, id: "{{ result.json.id }}"}
"""


class _Key(BaseModel):
    key: str


@tool(
    name="test_undo_open",
    risk="external",
    side_effect=True,
    test_only=True,
    compensate=Compensate("test_undo_close", lambda args, result: {"key": 1 / 0}),
)
def _undo_open(ctx: ToolContext, args: _Key) -> dict:
    return {}


@tool(name="test_undo_close", risk="external", side_effect=True, test_only=True)
def _undo_close(ctx: ToolContext, args: _Key) -> dict:
    return {}


def test_a_tool_is_either_irreversible_or_compensated():
    undo = Compensate("close_ticket", lambda args, result: {"key": result["key"]})
    with pytest.raises(TypeError, match="not both"):
        tool(name="both_ways", compensate=undo, reversible=False)
    with pytest.raises(TypeError, match="Compensate"):
        Compensate("close_ticket", {"key": "x"})  # type: ignore[arg-type]


def test_a_registered_tool_carries_its_declarations(settings):
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    opened = registry.get("open_ticket")
    assert opened.compensate is not None and opened.compensate.tool == "close_ticket"
    assert opened.compensate.args({"title": "x"}, {"key": "OPS-3"}) == {"key": "OPS-3"}
    assert registry.get("send_email").reversible is False
    assert registry.get("close_ticket").compensate is None


def test_an_http_request_matching_a_pattern_gets_its_compensating_request(harness_yaml):
    harness_yaml(HTTP_CONFIG)
    task = TaskFactory()
    call = ToolCallFactory(
        task=task,
        tool="http_request",
        status="succeeded",
        arguments={
            "method": "POST",
            "url": "https://tracker.example/ops/issues",
            "headers": {"X-Project": "ops team"},
        },
        result={"status": 201, "body": '{"id": "42/../admin"}', "headers": {}},
    )
    found = compensation_for(call, task=task)
    assert isinstance(found, PlannedCompensation)
    assert (found.call_id, found.tool) == (call.call_id, "http_request")
    assert found.arguments == {
        "method": "DELETE",
        # Values are escaped as one path segment: they cannot climb out of /issues/.
        "url": "https://tracker.example/issues/42%2F..%2Fadmin?project=ops%20team",
        "headers": {"X-Reason": "rollback of 42/../admin", "Content-Type": "application/json"},
        "body": '{"reason": "rollback", "id": "42/../admin"}',
    }
    other = ToolCallFactory(
        task=task,
        tool="http_request",
        status="succeeded",
        arguments={"method": "POST", "url": "https://tracker.example/ops/issues/7/comments"},
        result={"status": 201, "body": "{}"},
    )
    missing = compensation_for(other, task=task)
    assert isinstance(missing, Irreversible)
    assert missing.why.startswith("no compensation declared")


def test_a_response_without_the_value_cannot_be_compensated(harness_yaml):
    harness_yaml(HTTP_CONFIG)
    task = TaskFactory()
    call = ToolCallFactory(
        task=task,
        tool="http_request",
        status="succeeded",
        arguments={"method": "POST", "url": "https://tracker.example/ops/issues"},
        result={"status": 500, "body": "<html>oops</html>"},
    )
    found = compensation_for(call, task=task)
    assert isinstance(found, Irreversible)
    assert "has no 'json'" in found.why


def test_a_sandboxed_command_without_network_stays_in_the_workspace(settings):
    command = registry.get("run_command")
    assert effects_outside(command, {"command": "ls"}) == ""
    assert "network" in effects_outside(command, {"command": "curl x", "network": True})
    settings.HARNESS_SANDBOX = "off"
    assert "unsandboxed" in effects_outside(command, {"command": "ls"})


def test_an_args_function_that_fails_is_a_reason_not_an_error():
    task = TaskFactory()
    call = ToolCallFactory(
        task=task, tool="test_undo_open", status="succeeded", arguments={"key": "k"}, result={}
    )
    found = compensation_for(call, task=task)
    assert isinstance(found, Irreversible)
    assert "ZeroDivisionError" in found.why
