"""An OpenAI Agents SDK approval is bound to the arguments the reviewer saw: a decision without
the arguments' hash is refused (422), one naming other arguments too (409), an edit that a deny
rule matches cannot be approved (422), and nothing runs meanwhile; the approved call runs once,
with exactly the approved arguments."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import ToolCall
from tests.durable.openai_agents import executions

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
review_rules:
  - {name: no-secrets, tool: ship, path_glob: "secret/**", action: deny,
     reason: "Secret files are never shipped."}
openai_agents:
  shipper: "tests.durable.openai_agents:shipper"
"""
SPEC = {
    "title": "ship",
    "goal": "task x: ship",
    "agent": {"kind": "openai-agents", "name": "shipper"},
}


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs, quiet_watchdog) -> None:
    harness_yaml(CONFIG)


def test_an_approval_of_other_arguments_is_refused_and_nothing_runs(task_api, api_client, operator):
    task = task_api.create(SPEC)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    api = api_client(operator)

    missing = api.post(f"/api/v1/reviews/{review.id}/decision", {"decision": "approve"})
    assert missing.status_code == 422 and "arguments_hash" in missing.content.decode()
    stale = api.decide(
        review.id, decision="approve", arguments_hash=canonical_hash({"path": "other.md"})
    )
    assert stale.status_code == 409
    denied_edit = api.decide(review.id, decision="approve", arguments={"path": "secret/keys.md"})
    assert denied_edit.status_code == 422 and "arguments" in denied_edit.content.decode()
    respond = api.decide(review.id, decision="respond", response="shipped")
    assert respond.status_code == 422
    review.refresh_from_db()
    assert review.status == "pending"
    assert task_api.get(task["id"])["status"] == "waiting_review"
    assert executions(task["id"]) == []

    assert api.decide(review.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "succeeded"
    call = ToolCall.objects.get(task_id=task["id"], tool="ship")
    assert call.arguments == review.original_arguments and call.attempts == 1
    assert executions(task["id"]) == ["ship notes/release.md"]


def test_a_deny_rule_refuses_the_call_and_the_agent_is_told(task_api, harness_yaml):
    harness_yaml(CONFIG.replace('"secret/**"', '"notes/**"'))
    task = task_api.create(SPEC)
    assert run_task(task["id"]) == "succeeded"
    call = ToolCall.objects.get(task_id=task["id"], tool="ship")
    assert call.status == "denied"
    assert "Secret files are never shipped." in task_api.get(task["id"])["result"]
    assert executions(task["id"]) == []
