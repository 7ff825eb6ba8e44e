"""The approval-drift attack on a LangGraph graph's action (issue 24): an operator approves an
action the graph asked about, then loses the role (or the rule gets stricter) before the graph
is resumed. The graph must not be resumed with that approval: the action is asked again, and
the new review says what changed (tests/security/graphs.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agent.jobs import run_task
from review.models import ReviewRequest
from tests.conftest import ApiClient
from tests.factories import ReviewRuleFactory, graph_spec

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
langgraph_graphs:
  deploy: "tests.security.graphs:deploy"
"""


@pytest.fixture(autouse=True)
def _graphs(harness_yaml) -> None:
    harness_yaml(CONFIG)


def approved(operator, command: str) -> ReviewRequest:
    response = ApiClient(operator).post(
        "/api/v1/tasks", graph_spec("deploy", {"command": command, "allowed": ["approve"]})
    )
    assert response.status_code == 201, response.content
    task_id = response.json()["id"]
    assert run_task(task_id) == "paused"
    review = ReviewRequest.objects.get(task_id=task_id, status="pending")
    assert ApiClient(operator).decide(review.id, decision="approve").status_code == 200
    return review


def reopened(review: ReviewRequest) -> ReviewRequest:
    assert run_task(str(review.task_id)) == "paused"
    new = ReviewRequest.objects.get(task_id=review.task_id, status="pending")
    assert new.reopened_from_id == review.pk
    return new


def test_an_approver_removed_after_approving_a_graph_action_does_not_get_it_run(
    operator, second_operator
):
    review = approved(operator, "deploy staging")
    operator.groups.remove(Group.objects.get(name="operators"))

    new = reopened(review)

    assert any(f"approver {operator.username} no longer may approve" in c for c in new.changes)
    # Approved again by someone who may: the graph runs it once.
    assert ApiClient(second_operator).decide(new.id, decision="approve").status_code == 200
    assert run_task(str(review.task_id)) == "succeeded"
    review.task.refresh_from_db()
    assert "deploy staging" in review.task.result


def test_a_rule_made_stricter_before_the_graph_resumes_asks_for_more(operator):
    review = approved(operator, "deploy canary")
    ReviewRuleFactory(
        name="canary-two", tool="deploy", command_regex="canary", approvals_required=2
    )

    new = reopened(review)

    assert new.approvals_required == 2
    assert any("canary-two now needs 2 approvals" in c for c in new.changes)
