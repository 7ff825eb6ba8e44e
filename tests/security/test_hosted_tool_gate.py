"""A person's permission for a model turn to use a hosted tool (agent.sdk_run.hosted) is
checked again when the turn is to use it, as every approval is when it takes effect: a rule
made stricter after the approval (two approvers now) stops the turn before the model is
asked, and the review reopens saying what changed. Both SDK adapters; the job function runs
in this process (tests/durable/test_hosted_tools.py drives real workers)."""

from __future__ import annotations

import json
import uuid

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest, ReviewRule
from tasks.models import ToolCall
from tests.durable.openai_agents import executions
from tests.durable.pai_agents import runs

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
review_rules:
  - {name: web-search, tool: web_search, action: review}
openai_agents:
  searcher: "tests.durable.openai_agents:searcher"
pydantic_ai_agents:
  searcher: "tests.durable.pai_agents:searcher"
"""


@pytest.fixture(autouse=True)
def _config(harness_dirs, harness_yaml, quiet_watchdog):
    harness_yaml(CONFIG)


def _spec(kind: str, key: str, marker_dir) -> dict:
    agent = {"kind": kind, "name": "searcher"}
    if kind == "pydantic-ai":
        agent["input"] = json.dumps({"marker_dir": str(marker_dir)})
    return {"title": "search", "goal": f"task {key}: search", "agent": agent}


@pytest.mark.parametrize("kind", ["openai-agents", "pydantic-ai"])
def test_a_hosted_tool_approval_made_insufficient_by_a_new_rule_is_asked_again(
    kind, task_api, api_client, operator, tmp_path
):
    key = uuid.uuid4().hex
    task = task_api.create(_spec(kind, key, tmp_path))
    assert run_task(task["id"]) == "paused"
    first = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert api_client(operator).decide(first.id, decision="approve").status_code == 200
    # After the approval, before the turn: web search now needs two approvers.
    ReviewRule.objects.create(
        name="two-for-search", tool="web_search", action="review", approvals_required=2
    )

    assert run_task(task["id"]) == "paused"
    # The model was never asked: no search ran.
    assert executions(key, "model") == [] and runs(tmp_path) == []
    assert not ToolCall.objects.filter(task_id=task["id"], status="succeeded").exists()
    reopened = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert reopened.reopened_from_id == first.id and reopened.approvals_required == 2
    assert ToolCall.objects.get(pk=first.tool_call_id).status == "awaiting_review"
