"""Hosted tools of SDK agents (agent.sdk_run.hosted) run by real rqworkers: a web search the
provider ran inside the model's turn is a ledger row with its query and its sources, on the
task's calls and timeline; a review rule naming `web_search` pauses the task before the model
is asked with the tool, so no search happens before a person allows it, and a rejection runs
the turn without it."""

from __future__ import annotations

import json
import uuid

import pytest

from review.models import ReviewRequest
from review.services import review_decide
from tasks.models import ToolCall
from tests.conftest import approve, page_client
from tests.factories import spec_task

from .conftest import TEST_CONFIG, wait_status
from .openai_agents import executions
from .pai_agents import runs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

REVIEW_WEB_SEARCH = (
    "review_rules:\n"
    "  - {name: web-search, tool: web_search, action: review, reason: searches leave a trace}\n"
)
AGENTS = (
    "openai_agents:\n"
    '  searcher: "tests.durable.openai_agents:searcher"\n'
    "pydantic_ai_agents:\n"
    '  searcher: "tests.durable.pai_agents:searcher"\n'
)


@pytest.fixture
def harness_config_text(request) -> str:
    """harness.yaml: the agents, and the rules a test names (indirect parametrize)."""
    return TEST_CONFIG + getattr(request, "param", "") + AGENTS


web_search_reviewed = pytest.mark.parametrize(
    "harness_config_text", [REVIEW_WEB_SEARCH], indirect=True, ids=["web_search_reviewed"]
)


def openai_task() -> tuple[object, str]:
    key = uuid.uuid4().hex
    spec = {
        "title": "search",
        "goal": f"task {key}: search",
        "agent": {"kind": "openai-agents", "name": "searcher"},
    }
    return spec_task(spec, enqueue=True), key


def pai_task(marker_dir) -> object:
    spec = {
        "title": "search",
        "goal": "search",
        "agent": {
            "kind": "pydantic-ai",
            "name": "searcher",
            "input": json.dumps({"marker_dir": str(marker_dir)}),
        },
    }
    return spec_task(spec, enqueue=True)


def search_row(task) -> ToolCall:
    return ToolCall.objects.get(task=task, tool="web_search", status="succeeded")


def test_an_openai_agents_web_search_is_in_the_ledger_with_its_query_and_sources(fleet, operator):
    fleet.worker(1)
    task, key = openai_task()
    task = wait_status(task.id, "succeeded")
    assert task.result == "found example.org/harness"
    row = search_row(task)
    assert row.arguments["action"]["query"] == "durable agent harness"
    assert row.result["output"]["sources"] == [
        {"type": "url", "url": "https://example.org/harness"}
    ]
    assert row.risk == "hosted"
    finished = task.events.get(type="tool_finished", payload__call_id=row.call_id)
    assert finished.payload["hosted"] is True
    # The task's calls, as the API lists them.
    client = page_client(operator)
    listed = client.get(f"/api/v1/tasks/{task.id}/tool-calls").json()
    items = listed["items"] if isinstance(listed, dict) else listed
    assert [(c["tool"], c["status"]) for c in items] == [("web_search", "succeeded")]


@web_search_reviewed
def test_a_rule_naming_web_search_pauses_before_the_model_may_search(fleet, operator):
    fleet.worker(1)
    task, key = openai_task()
    task = wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.tool == "web_search"
    assert review.interrupt["hosted"] == "web_search"
    # Paused before the model was asked: no search happened, none is in the ledger.
    assert executions(key, "model") == []
    assert not ToolCall.objects.filter(task=task, status="succeeded").exists()
    # The review page says what approving allows, and that nothing ran yet.
    page = page_client(operator).get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="hosted-gate"' in page and "Nothing has run yet" in page

    approve(review, operator)
    task = wait_status(task.id, "succeeded")
    assert executions(key, "model") == ["offered web_search"]
    row = search_row(task)
    assert row.arguments["action"]["query"] == "durable agent harness"
    permission = ToolCall.objects.get(pk=review.tool_call_id)
    assert permission.status == "approved"


@web_search_reviewed
def test_a_rejected_web_search_turn_runs_without_the_tool(fleet, operator):
    fleet.worker(1)
    task, key = openai_task()
    task = wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task, status="pending")
    review_decide(review_id=review.id, user=operator, decision="reject", comment="no searching")
    task = wait_status(task.id, "succeeded")
    assert task.result == "answered without searching"
    assert executions(key, "model") == ["offered nothing"]
    assert not ToolCall.objects.filter(task=task, status="succeeded").exists()


def test_a_pydantic_ai_web_search_is_in_the_ledger_with_its_query_and_result(fleet, tmp_path):
    fleet.worker(1)
    task = wait_status(pai_task(tmp_path).id, "succeeded")
    assert task.result == "found example.org/harness"
    row = search_row(task)
    assert row.arguments == {"query": "durable agent harness"}
    assert row.result["output"] == [{"url": "https://example.org/harness", "title": "Harness"}]
    assert task.events.get(type="tool_finished", payload__call_id=row.call_id).payload["hosted"]


@web_search_reviewed
def test_a_rule_naming_web_search_pauses_a_pydantic_ai_turn_until_approved(
    fleet, tmp_path, operator
):
    fleet.worker(1)
    task = wait_status(pai_task(tmp_path).id, "waiting_review")
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.tool == "web_search" and review.interrupt["hosted"] == "web_search"
    assert runs(tmp_path) == []  # the model was not asked: no search happened
    approve(review, operator)
    task = wait_status(task.id, "succeeded")
    assert runs(tmp_path) == ["offered:web_search"]
    assert search_row(task).arguments == {"query": "durable agent harness"}


@web_search_reviewed
def test_a_rejected_pydantic_ai_web_search_turn_runs_without_the_tool(fleet, tmp_path, operator):
    fleet.worker(1)
    task = wait_status(pai_task(tmp_path).id, "waiting_review")
    review = ReviewRequest.objects.get(task=task, status="pending")
    review_decide(review_id=review.id, user=operator, decision="reject", comment="no searching")
    task = wait_status(task.id, "succeeded")
    assert task.result == "answered without searching"
    assert runs(tmp_path) == ["offered:nothing"]
