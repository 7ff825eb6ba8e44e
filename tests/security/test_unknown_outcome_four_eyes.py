"""Running a call again is approving it again: a `run_command` that needed two operators other
than the task's creator, whose worker was killed while it ran, runs again only when two such
operators ask for it, naming the arguments they were shown. "Mark done" and "fail task" run
nothing: one operator decides them, in the audit log like every other decision."""

from __future__ import annotations

import pytest

from review.models import DecisionReceipt, ReviewRequest
from review.receipts import receipts_verify
from tasks.canonical import canonical_hash
from tasks.models import AuditEntry, Task, ToolCall
from tests.conftest import ApiClient, page_client, wait_for
from tests.durable.conftest import TEST_CONFIG, wait_status
from tests.factories import UserFactory, enqueued_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FOUR_EYES = (
    TEST_CONFIG
    + """
review_rules:
  - {name: two-person-commands, tool: run_command, action: review, approvals_required: 2,
     forbid_creator: true}
"""
)
# Runs until the test puts `release` into the workspace: the kill lands mid-call for sure.
COMMAND = "echo ran >> runs.log; while [ ! -e release ]; do sleep 0.1; done"


@pytest.fixture
def harness_config_text() -> str:
    return FOUR_EYES


@pytest.fixture
def third_operator(roles):
    return UserFactory(username="operator3", roles=["operators"])


def decide(user, review_id, body: dict):
    return ApiClient(user).post(f"/api/v1/reviews/{review_id}/decision", body)


def pending_review(task: Task) -> ReviewRequest:
    wait_status(task.id, "waiting_review")
    return ReviewRequest.objects.get(task=task, status="pending")


def crashed_command(fleet, *, creator, approvers) -> tuple[Task, ReviewRequest]:
    """A four-eyes command approved by `approvers`, its worker killed while it ran; returns
    the task and the unknown-outcome review the redispatched run opened."""
    fleet.worker(2)  # one is killed; the other takes the redispatched run
    fleet.sweeper()
    task = enqueued_task(
        [{"call": "run_command", "args": {"command": COMMAND}}, {"final": "done"}],
        ["run_command"],
        user=creator,
    )
    first = pending_review(task)
    for user in approvers:
        body = {"decision": "approve", "arguments_hash": canonical_hash(first.arguments)}
        assert decide(user, first.id, body).status_code == 200
    call = ToolCall.objects.get(task=task)
    wait_for(
        lambda: ToolCall.objects.get(pk=call.pk).status == "running", message="the command to run"
    )
    fleet.kill_worker_of(task.id)
    review = pending_review(task)
    assert review.kind == "unknown_outcome"
    return task, review


def test_a_rerun_needs_the_approvals_and_the_hash_the_first_run_needed(
    fleet, operator, second_operator, third_operator, settings
):
    task, review = crashed_command(
        fleet, creator=operator, approvers=[second_operator, third_operator]
    )
    assert review.approvals_required == 2 and review.forbid_creator
    assert "two-person-commands" in [rule["name"] for rule in review.matched_rules]
    shown = canonical_hash(review.arguments)
    rerun = {"decision": "rerun", "arguments_hash": shown}

    # The creator alone: refused, as for the first run.
    response = decide(operator, review.id, rerun)
    assert response.status_code == 403, response.content
    # No hash, or the hash of other arguments: refused, naming the field.
    response = decide(second_operator, review.id, {"decision": "rerun"})
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["arguments_hash"]
    stale = {"decision": "rerun", "arguments_hash": canonical_hash({"command": "true"})}
    response = decide(second_operator, review.id, stale)
    assert response.status_code == 409
    assert [e["field"] for e in response.json()["errors"]] == ["arguments_hash"]
    # The page's form sends the hash it showed; the creator's form is refused too.
    page = page_client(operator).get(f"/reviews/{review.id}/").content.decode()
    assert f'name="arguments_hash" value="{shown}"' in page
    response = page_client(operator).post(
        f"/reviews/{review.id}/decide/", {"decision": "rerun", "arguments_hash": shown}
    )
    assert response.status_code == 403

    # One operator: recorded, still pending; the same operator again adds nothing.
    response = decide(second_operator, review.id, rerun)
    assert response.status_code == 200 and response.json()["status"] == "pending"
    assert decide(second_operator, review.id, rerun).status_code == 409
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 1
    assert Task.objects.get(id=task.id).status == "waiting_review"
    call = ToolCall.objects.get(task=task)
    assert call.status == "unknown_outcome" and call.attempts == 1

    # A second operator: it runs again.
    response = page_client(third_operator).post(
        f"/reviews/{review.id}/decide/", {"decision": "rerun", "arguments_hash": shown}
    )
    assert response.status_code == 302
    wait_for(
        lambda: ToolCall.objects.filter(task=task, attempts=2, status="running").exists(),
        message="the command to run again",
    )
    (settings.HARNESS_WORKSPACE_ROOT / str(task.id) / "release").touch()
    task = wait_status(task.id, "succeeded")
    assert ToolCall.objects.get(task=task).attempts == 2

    audit = {
        (entry.action, entry.actor_name): entry.after
        for entry in AuditEntry.objects.filter(task_id=task.id, target=f"review {review.id}")
    }
    assert audit[("review_rerun_partial", "operator2")]["arguments_hash"] == shown
    decided = audit[("review_rerun", "operator3")]
    assert decided["arguments_hash"] == shown
    assert decided["approvers"] == ["operator2", "operator3"]
    # The same receipts as every other decision, in the verified chain.
    receipts = DecisionReceipt.objects.filter(review_id=review.id).order_by("seq")
    assert [(r.decision, r.actor) for r in receipts] == [
        ("rerun_partial", "operator2"),
        ("rerun", "operator3"),
    ]
    assert all(r.subject["arguments_hash"] == shown for r in receipts)
    assert receipts_verify()[1] is None


@pytest.mark.parametrize("decision", ["mark_done", "fail_task"])
def test_mark_done_and_fail_task_stay_single_audited_decisions(
    fleet, operator, second_operator, third_operator, decision
):
    task, review = crashed_command(
        fleet, creator=operator, approvers=[second_operator, third_operator]
    )
    response = decide(second_operator, review.id, {"decision": decision, "comment": "checked"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == ("approved" if decision == "mark_done" else "rejected")
    entry = AuditEntry.objects.get(task_id=task.id, action=f"review_{decision}")
    assert entry.actor_name == "operator2"
    assert entry.after["decision"] == decision
    assert entry.after["arguments_hash"] == canonical_hash(review.arguments)
    (receipt,) = DecisionReceipt.objects.filter(review_id=review.id)
    assert (receipt.decision, receipt.actor) == (decision, "operator2")
    assert receipt.subject["arguments_hash"] == canonical_hash(review.arguments)
