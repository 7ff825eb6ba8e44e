"""A Pydantic AI tool declared external (an ExternalToolset: the agent's code never runs it)
is answered as a CallDeferred tool is: a review the operator responds to with the result, the
agent going on with it. The RQ job function runs in this process;
tests/durable/test_pydantic_ai_external.py drives real workers."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest
from tasks.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
pydantic_ai_agents:
  refunds: "tests.durable.pai_agents:declared_external"
"""


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs) -> None:
    harness_yaml(CONFIG)


def test_a_declared_external_tool_is_answered_by_an_operator(task_api, api_client, operator):
    task = task_api.create(
        {
            "title": "refund",
            "goal": "refund o-17",
            "agent": {"kind": "pydantic-ai", "name": "refunds"},
        }
    )
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.tool == "issue_refund"
    assert review.original_arguments == {"order": "o-17", "amount": 30}
    assert review.interrupt["allowed"] == ["respond", "reject"]

    answer = {"refund_id": "R-9"}
    response = api_client(operator).decide(review.id, decision="respond", response=answer)
    assert response.status_code == 200, response.content
    assert run_task(task["id"]) == "succeeded"

    assert task_api.get(task["id"])["result"] == f"refund: {answer}"
    call = ToolCall.objects.get(task_id=task["id"])
    assert call.status == "succeeded"
    assert call.result == {"value": answer, "answered_by": "operator"}
