"""A LangGraph graph's actions are held to the review policy like the harness's own tools: an
operator cannot edit an action whose interrupt does not allow edits, cannot edit an action into
one a deny rule matches or past a stricter rule's approvals, and cannot approve an action a deny
rule matches (the graph runs what is approved; tests/security/graphs.py)."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tests.conftest import ApiClient, page_client
from tests.factories import graph_spec

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
langgraph_graphs:
  deploy: "tests.security.graphs:deploy"
review_rules:
  - {name: prod-never, tool: deploy, command_regex: "prod", action: deny,
     reason: "graphs never deploy to production"}
  - {name: canary-two, tool: deploy, command_regex: "canary", action: review,
     approvals_required: 2}
"""
EVERYTHING = ["approve", "edit", "reject"]


@pytest.fixture(autouse=True)
def _graphs(harness_yaml) -> None:
    harness_yaml(CONFIG)


def paused(operator, command: str, allowed: list[str]) -> ReviewRequest:
    """The pending review of a `deploy` graph task asking about `command`."""
    spec = graph_spec("deploy", {"command": command, "allowed": allowed})
    response = ApiClient(operator).post("/api/v1/tasks", spec)
    assert response.status_code == 201, response.content
    task_id = response.json()["id"]
    assert run_task(task_id) == "paused"
    return ReviewRequest.objects.get(task_id=task_id, status="pending")


def ran(review: ReviewRequest) -> str:
    assert run_task(str(review.task_id)) == "succeeded"
    review.task.refresh_from_db()
    return review.task.result


def edit(user, review: ReviewRequest, command: str):
    return ApiClient(user).decide(
        review.id,
        decision="approve",
        arguments={"command": command},
        arguments_hash=canonical_hash(review.arguments),
    )


def fields(response) -> list[str]:
    return [e["field"] for e in response.json()["errors"]]


def test_an_interrupt_that_allows_no_edit_refuses_edited_arguments(operator):
    review = paused(operator, "deploy staging", ["approve", "reject"])
    response = edit(operator, review, "deploy staging --skip-tests")
    assert response.status_code == 422 and fields(response) == ["arguments"]
    # The page's edit form and a respond the interrupt does not offer: refused alike.
    form = page_client(operator).post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "edit",
            "arguments": '{"command": "deploy staging --skip-tests"}',
            "arguments_hash": canonical_hash(review.arguments),
        },
    )
    assert form.status_code == 422
    response = ApiClient(operator).decide(review.id, decision="respond", response="done")
    assert response.status_code == 422 and fields(response) == ["decision"]
    review.refresh_from_db()
    assert review.status == "pending" and review.edited_arguments is None

    assert ApiClient(operator).decide(review.id, decision="approve").status_code == 200
    assert '"ran": "deploy staging"' in ran(review)


def test_an_edit_into_an_action_a_deny_rule_matches_is_refused(operator):
    review = paused(operator, "deploy staging", EVERYTHING)
    response = edit(operator, review, "deploy prod")
    assert response.status_code == 422 and fields(response) == ["arguments"]
    assert "never deploy to production" in response.json()["detail"]
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0


def test_an_edit_is_held_to_the_stricter_rule_on_the_new_arguments(operator, second_operator):
    review = paused(operator, "deploy staging", EVERYTHING)
    assert review.approvals_required == 1
    response = edit(operator, review, "deploy canary")
    assert response.status_code == 200 and response.json()["status"] == "pending"
    review.refresh_from_db()
    assert review.approvals_required == 2
    assert "canary-two" in [rule["name"] for rule in review.matched_rules]
    assert ApiClient(operator).decide(review.id, decision="approve").status_code == 409

    response = ApiClient(second_operator).decide(review.id, decision="approve")
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert '"ran": "deploy canary"' in ran(review)


def test_an_action_a_deny_rule_matches_can_only_be_rejected(operator):
    review = paused(operator, "deploy prod", EVERYTHING)
    assert review.reason == "graphs never deploy to production"
    response = ApiClient(operator).decide(review.id, decision="approve")
    assert response.status_code == 422 and fields(response) == ["decision"]
    response = edit(operator, review, "deploy prod --really")
    assert response.status_code == 422

    body = {"decision": "reject", "comment": "not from a graph"}
    assert ApiClient(operator).decide(review.id, **body).status_code == 200
    assert '"ran": "nothing"' in ran(review)


def test_an_interrupt_that_offers_only_edit_refuses_an_approval_as_asked(operator):
    review = paused(operator, "deploy staging", ["edit", "reject"])
    response = ApiClient(operator).decide(review.id, decision="approve")
    assert response.status_code == 422 and fields(response) == ["arguments"]
    # Edited, even to the same arguments, it is what the graph offered: an edit.
    assert edit(operator, review, "deploy staging").status_code == 200
    assert '"ran": "deploy staging"' in ran(review)
