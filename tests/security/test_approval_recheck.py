"""Attacks on the gap between an approval and the effect (issue 24): the world moves after an
operator approved a call, and the approval must not carry over to something nobody saw. Real
rqworkers, PostgreSQL and Redis; "approved but still queued" is made deterministic by deciding
while no worker runs, changing the world, then starting the workers."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from review.models import ReviewRequest, ReviewRule
from tasks.models import Task, ToolCall
from tests.conftest import wait_for
from tests.factories import ReviewRuleFactory, run_in_process, scripted_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PROPOSED = "port=8080\n"
ORIGINAL = "port=80\n"
HUMAN_EDIT = "port=443\n# edited by a person while the review waited\n"


def status_of(task: Task) -> str:
    return Task.objects.values_list("status", flat=True).get(pk=task.pk)


def conf_task(*, operator) -> tuple[Task, ReviewRequest]:
    """A task whose `write_file service.conf` paused for review (in this process: no worker
    has picked anything up yet)."""
    ReviewRuleFactory(name="protected-config", tool="write_file", path_glob="**/*.conf")
    task = scripted_task(
        [
            {"call": "write_file", "args": {"path": "service.conf", "content": PROPOSED}},
            {"final": "ok"},
        ],
        ["write_file"],
        user=operator,
        workspace={"files": {"service.conf": ORIGINAL}},
    )
    assert run_in_process(task) == "paused"
    return task, ReviewRequest.objects.get(task=task, status="pending")


def reopened_review(task: Task, old: ReviewRequest) -> ReviewRequest:
    """The new pending review the worker opened instead of running the call."""
    wait_for(
        lambda: (
            status_of(task) == "waiting_review"
            and ReviewRequest.objects.filter(task=task, status="pending").exists()
        ),
        90,
        message="the worker to reopen the review",
    )
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.pk != old.pk and review.reopened_from_id == old.pk
    return review


def test_a_file_changed_after_the_review_opened_is_not_overwritten_by_the_approval(
    worker_pool, api_client, operator
):
    task, review = conf_task(operator=operator)
    (task.workspace_path / "service.conf").write_text(HUMAN_EDIT)
    worker_pool.start(1)

    response = api_client(operator).decide(review.id, decision="approve")

    assert response.status_code == 409, response.content
    body = response.json()
    assert body["reason"] == "target_changed"
    assert "service.conf changed" in body["detail"]
    assert (task.workspace_path / "service.conf").read_text() == HUMAN_EDIT
    new = ReviewRequest.objects.get(pk=body["review_id"])
    assert new.status == "pending" and new.reopened_from_id == review.pk
    # The new review's diff is computed against the file as it is now.
    assert "+port=8080" in new.preview and "-port=443" in new.preview
    assert "-port=80\n" not in new.preview
    assert status_of(task) == "waiting_review"
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 0


def test_a_file_changed_while_the_approved_call_is_queued_reopens_the_review(
    worker_pool, api_client, operator
):
    task, review = conf_task(operator=operator)
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    (task.workspace_path / "service.conf").write_text(HUMAN_EDIT)
    worker_pool.start(1)

    new = reopened_review(task, review)

    assert (task.workspace_path / "service.conf").read_text() == HUMAN_EDIT
    assert any("service.conf changed since you approved" in c for c in new.changes)
    assert "-port=443" in new.preview and "+port=8080" in new.preview
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 0
    # The operator approves the new state: now it runs.
    assert api_client(operator).decide(new.id, decision="approve").status_code == 200
    wait_for(lambda: status_of(task) == "succeeded", 90, message="the task to finish")
    assert (task.workspace_path / "service.conf").read_text() == PROPOSED


def test_a_rule_made_stricter_while_the_approved_call_is_queued_asks_for_more(
    worker_pool, api_client, operator, second_operator
):
    task, review = conf_task(operator=operator)
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    rule = review.matched_rules[0]["name"]
    ReviewRule.objects.filter(name=rule).update(approvals_required=2)
    worker_pool.start(1)

    new = reopened_review(task, review)

    assert (task.workspace_path / "service.conf").read_text() == ORIGINAL
    assert new.approvals_required == 2
    assert any("protected-config now needs 2 approvals" in c for c in new.changes)
    assert api_client(operator).decide(new.id, decision="approve").status_code == 200
    assert status_of(task) == "waiting_review"
    assert api_client(second_operator).decide(new.id, decision="approve").status_code == 200
    wait_for(lambda: status_of(task) == "succeeded", 90, message="the task to finish")
    assert (task.workspace_path / "service.conf").read_text() == PROPOSED


def test_an_approver_removed_from_operators_after_approving_does_not_get_the_call_run(
    worker_pool, api_client, operator, second_operator
):
    task, review = conf_task(operator=second_operator)
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    operator.groups.remove(Group.objects.get(name="operators"))
    worker_pool.start(1)

    new = reopened_review(task, review)

    assert (task.workspace_path / "service.conf").read_text() == ORIGINAL
    assert any(f"approver {operator.username} no longer may approve" in c for c in new.changes)
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 0
