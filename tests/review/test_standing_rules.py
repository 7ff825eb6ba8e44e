"""Standing rules with real `rqworker` processes: "approve and always allow" makes a rule from
a review's suggestion; it approves the next matching call (recorded as its decision), and it
pauses itself when a call it allowed is rolled back or fails for good."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from checkpoints.models import Checkpoint
from review.models import ReviewRequest, ReviewRule
from tasks.models import AuditEntry, TaskEvent
from tests.conftest import wait_for
from tests.factories import scripted_task
from tests.review.test_integration import pending_review, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def write_conf(content: str) -> list[dict]:
    return [
        {"call": "write_file", "args": {"path": "service.conf", "content": content}},
        {"final": "written"},
    ]


def until(days: int = 7) -> str:
    return (timezone.localdate() + timedelta(days=days)).isoformat()


def remember_first(client, review: ReviewRequest, *, scope: str = "creator") -> ReviewRule:
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    suggestion = shown["suggested_rules"][0]
    response = client.decide(
        review.id,
        decision="approve",
        remember={"suggestion": suggestion["id"], "until": until(), "scope": scope},
    )
    assert response.status_code == 200, response.content
    return ReviewRule.objects.get(origin_review=review)


def test_a_remembered_rule_approves_the_next_call_and_pauses_after_its_rollback(
    workers, api_client, operator
):
    client = api_client(operator)
    first = scripted_task(write_conf("a=1\n"), ["write_file"], user=operator, enqueue=True)
    review = pending_review(first)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    assert [s["kind"] for s in shown["suggested_rules"]] == ["path", "path_glob"]
    assert shown["suggested_rules"][0]["path_glob"] == "service.conf"
    rule = remember_first(client, review)
    assert wait_status(first, "succeeded", "failed") == "succeeded"

    # The next matching call runs without waiting for anyone, decided by the rule.
    second = scripted_task(write_conf("a=2\n"), ["write_file"], user=operator, enqueue=True)
    assert wait_status(second, "succeeded", "failed", "waiting_review") == "succeeded"
    assert (second.workspace_path / "service.conf").read_text() == "a=2\n"
    allowed = ReviewRequest.objects.get(task=second)
    assert (allowed.kind, allowed.status, allowed.standing_rule_id) == (
        "standing_rule",
        "approved",
        rule.id,
    )
    assert allowed.decided_by is None
    decided = TaskEvent.objects.get(task=second, type="review_decided")
    assert decided.actor == f"standing rule {rule.name}"
    assert decided.payload["standing_rule"] == rule.name
    api_review = client.get(f"/api/v1/reviews/{allowed.id}").json()
    assert api_review["standing_rule"] == rule.name
    assert AuditEntry.objects.filter(
        action="standing_rule_allow", actor_name=f"standing rule {rule.name}"
    ).exists()

    # A rollback of the call it allowed: the rule pauses itself.
    start = Checkpoint.objects.filter(task=second).order_by("seq").first()
    response = client.post(
        f"/api/v1/tasks/{second.id}/rollback",
        {"checkpoint_id": str(start.id), "resume": False, "reason": "wrong value"},
    )
    assert response.status_code == 200, response.content
    record = client.get(f"/api/v1/standing-rules/{rule.id}").json()
    assert record["state"] == "paused"
    assert "rolled back" in record["paused_reason"] and "wrong value" in record["paused_reason"]
    assert record["record"]["allowed"] == 1 and record["record"]["rolled_back"] == 1

    # Paused, it allows nothing: the next matching call waits for a human again.
    third = scripted_task(write_conf("a=3\n"), ["write_file"], user=operator, enqueue=True)
    held = pending_review(third)
    assert held.standing_rule_id == rule.id and "paused" in held.reason
    assert not (third.workspace_path / "service.conf").exists()

    # An operator resumes it; its history is in the audit log.
    resumed = client.post(f"/api/v1/standing-rules/{rule.id}/resume", {"reason": "fixed"})
    assert resumed.status_code == 200 and resumed.json()["state"] == "active"
    assert resumed.json()["record"]["asked_human"] == 1
    actions = list(
        AuditEntry.objects.filter(target=f"standing rule {rule.name}")
        .order_by("at")
        .values_list("action", "actor_name")
    )
    assert actions == [
        ("standing_rule_create", operator.username),
        ("standing_rule_pause", f"standing rule {rule.name}"),
        ("standing_rule_resume", operator.username),
    ]


def test_a_permanent_failure_of_a_call_it_allowed_pauses_the_rule(workers, api_client, operator):
    ReviewRule.objects.create(name="flaky-review", tool="flaky", action="review")
    args = {"key": "standing-permanent", "fail_times": 5, "error": "permanent"}
    script = [{"call": "flaky", "args": args}, {"final": "tried"}]
    client = api_client(operator)
    first = scripted_task(script, ["flaky"], user=operator, enqueue=True)
    review = pending_review(first)
    rule = remember_first(client, review)
    assert rule.arguments_hash and not rule.path_glob
    assert wait_status(first, "succeeded", "failed") == "succeeded"
    # The human's own approval failing is not the rule's doing.
    assert not ReviewRule.objects.get(pk=rule.pk).paused

    second = scripted_task(script, ["flaky"], user=operator, enqueue=True)
    assert wait_status(second, "succeeded", "failed", "waiting_review") == "succeeded"
    assert ReviewRequest.objects.get(task=second).kind == "standing_rule"
    paused = wait_for(
        lambda: ReviewRule.objects.filter(pk=rule.pk, paused=True).first(),
        30,
        message="the rule to pause",
    )
    assert "permanent" in paused.paused_reason
    record = client.get(f"/api/v1/standing-rules/{rule.id}").json()["record"]
    assert (record["allowed"], record["failed"]) == (1, 1)

    third = scripted_task(script, ["flaky"], user=operator, enqueue=True)
    assert pending_review(third).standing_rule_id == rule.id
