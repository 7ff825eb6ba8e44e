"""Pydantic AI external tools (a tool raising CallDeferred) run by real rqworkers: each call is
a review an operator answers with the tool's result, over the API or on the review page; the
agent resumes with the answer as the tool's return (the tool never runs again), the ledger row
records the answer and the audit who gave it; a rejection reaches the model as a failed call."""

from __future__ import annotations

import json

import pytest

from review.models import ReviewRequest
from tasks.models import AuditEntry, ToolCall
from tests.conftest import ApiClient, page_client, wait_for
from tests.factories import spec_task

from .conftest import TEST_CONFIG, wait_status
from .pai_agents import runs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + 'pydantic_ai_agents:\n  external: "tests.durable.pai_agents:external"\n'


def external_task(marker_dir):
    spec = {
        "title": "stock check",
        "goal": "ask the warehouse",
        "agent": {
            "kind": "pydantic-ai",
            "name": "external",
            "input": json.dumps({"marker_dir": str(marker_dir)}),
        },
    }
    return spec_task(spec, enqueue=True)


def pending(task, sku: str) -> ReviewRequest:
    return wait_for(
        lambda: ReviewRequest.objects.filter(
            task=task, status="pending", original_arguments={"sku": sku}
        ).first(),
        message=f"a pending review of the call for {sku}",
    )


def test_an_operator_answers_external_calls_and_the_agent_goes_on_with_the_answers(
    fleet, tmp_path, operator
):
    fleet.worker(1)
    task = external_task(tmp_path)
    api = ApiClient(operator)

    # Answered over the API with any JSON: the agent's tool returns it.
    review = pending(task, "sku-0")
    task = wait_status(task.id, "waiting_review")
    assert review.kind == "pydantic-ai" and review.tool == "ask_warehouse"
    assert review.interrupt["mode"] == "external"
    assert review.interrupt["allowed"] == ["respond", "reject"]
    assert review.matched_rules[0]["name"] == "external-tool"
    response = api.decide(review.id, decision="respond", response={"in_stock": 42})
    assert response.status_code == 200, response.content

    # Answered on the review page, which offers respond and reject but no approval.
    review = pending(task, "sku-1")
    client = page_client(operator)
    page = client.get(f"/reviews/{review.id}/").content
    assert b'data-testid="respond"' in page and b'data-testid="approve"' not in page
    response = client.post(
        f"/reviews/{review.id}/decide/", {"decision": "respond", "response": "12 left"}
    )
    assert response.status_code == 302, response.content

    # Rejected: the model is told the call failed, and why.
    review = pending(task, "sku-2")
    response = api.decide(review.id, decision="reject", comment="ask purchasing")
    assert response.status_code == 200, response.content

    task = wait_status(task.id, "succeeded", "failed")
    assert task.status == "succeeded", task.error_message
    assert task.result == (
        "stock: {'in_stock': 42} | 12 left | failed: a reviewer rejected ask_warehouse: "
        "ask purchasing; it has no result"
    )
    # Each call reached the tool once (it deferred); an answer never ran it again.
    assert runs(tmp_path) == ["ask:sku-0", "ask:sku-1", "ask:sku-2"]
    calls = list(ToolCall.objects.filter(task=task).order_by("id"))
    assert [(c.status, c.result.get("value"), c.result.get("answered_by")) for c in calls] == [
        ("succeeded", {"in_stock": 42}, "operator"),
        ("succeeded", "12 left", "operator"),
        ("rejected", None, None),
    ]
    answered = AuditEntry.objects.filter(task=task, action="review_respond").order_by("at")
    assert [(a.actor, a.after["status"]) for a in answered] == [(operator, "responded")] * 2
