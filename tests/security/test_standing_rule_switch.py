"""A standing rule's kill switch and its limits: an operator pauses or revokes it with a reason
(audited, receipted), a revoked rule never comes back, a viewer can do neither; a rule for
everyone's tasks needs its scope confirmed; a rule ends 30 days after it was made unless told
otherwise, and an ended rule never applies."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from review.models import DecisionReceipt, ReviewRequest, ReviewRule
from review.receipts import receipts_verify
from tasks.models import AuditEntry
from tests.conftest import ApiClient, page_client
from tests.security.test_standing_rules import (
    field_of,
    next_call,
    standing_rule,
    suggestion_ids,
    write_conf,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rule(paused_review, operator) -> ReviewRule:
    review = paused_review(write_conf(), ["write_file"], {}, user=operator)
    return standing_rule(operator, review)


def switch(user, rule_id, action: str, body: dict | None = None):
    return ApiClient(user).post(f"/api/v1/standing-rules/{rule_id}/{action}", body or {})


def allowed(user) -> bool:
    outcome, call = next_call(write_conf(content="b=2\n"), ["write_file"], user=user)
    return outcome == "succeeded" and call.status == "succeeded"


def test_pause_and_revoke_need_a_reason_naming_the_field(rule, operator):
    for action in ("pause", "revoke"):
        for body in ({}, {"reason": ""}, {"reason": "   "}):
            response = switch(operator, rule.id, action, body)
            assert response.status_code == 422, (action, body)
            assert field_of(response) == ["reason"], (action, body)
    assert ReviewRule.objects.get(pk=rule.pk).standing_state == "active"


def test_viewers_cannot_pause_or_revoke_and_unknown_rules_are_404(rule, operator, viewer):
    for action in ("pause", "revoke"):
        assert switch(viewer, rule.id, action, {"reason": "x"}).status_code == 403
        assert switch(operator, 999_999, action, {"reason": "x"}).status_code == 404
        assert switch(operator, "nope", action, {"reason": "x"}).status_code == 404
    assert page_client(viewer).post(f"/reviews/rules/{rule.id}/revoke/").status_code == 403
    assert ReviewRule.objects.get(pk=rule.pk).standing_state == "active"
    assert allowed(operator)


def test_a_paused_rule_allows_nothing_and_the_pause_is_audited_and_receipted(rule, operator):
    response = switch(operator, rule.id, "pause", {"reason": "checking what it let through"})
    assert response.status_code == 200 and response.json()["state"] == "paused"
    assert switch(operator, rule.id, "pause", {"reason": "again"}).status_code == 409
    outcome, call = next_call(write_conf(content="b=2\n"), ["write_file"], user=operator)
    assert outcome == "paused" and call.status == "awaiting_review"
    assert "paused" in ReviewRequest.objects.get(tool_call=call).reason
    entry = AuditEntry.objects.get(action="standing_rule_pause")
    assert (entry.actor_name, entry.reason) == (operator.username, "checking what it let through")
    receipt = DecisionReceipt.objects.get(decision="rule_pause")
    assert (receipt.actor, receipt.via, receipt.review_id) == (operator.username, "api", None)
    assert receipt.subject["standing_rule"] == rule.name
    assert receipt.subject["reason"] == "checking what it let through"
    assert receipts_verify()[1] is None


def test_revoke_is_final(rule, operator):
    assert switch(operator, rule.id, "pause", {"reason": "hold on"}).status_code == 200
    response = switch(operator, rule.id, "revoke", {"reason": "it covered too much"})
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["revoked_reason"], body["revoked_by"]) == (
        "revoked",
        "it covered too much",
        operator.username,
    )
    # No way back: not resumed, not paused, not revoked twice (API, page or admin).
    assert switch(operator, rule.id, "resume", {"reason": "oops"}).status_code == 409
    assert switch(operator, rule.id, "pause", {"reason": "x"}).status_code == 409
    assert switch(operator, rule.id, "revoke", {"reason": "x"}).status_code == 409
    page_client(operator).post(f"/reviews/rules/{rule.id}/resume/", {"reason": "please"})
    ReviewRule.objects.filter(pk=rule.pk).update(enabled=True, paused=False)  # an admin's edit
    assert ReviewRule.objects.get(pk=rule.pk).standing_state == "revoked"
    outcome, call = next_call(write_conf(content="b=2\n"), ["write_file"], user=operator)
    assert outcome == "paused" and call.status == "awaiting_review"
    assert ReviewRequest.objects.get(tool_call=call).kind == "policy"
    assert list(
        DecisionReceipt.objects.filter(review_id=None).values_list("decision", flat=True)
    ) == ["rule_pause", "rule_revoke"]
    response = ApiClient(operator).get("/api/v1/receipts")
    export = b"".join(response.streaming_content).decode().splitlines()
    revoked = [json.loads(line) for line in export if '"rule_revoke"' in line]
    assert revoked[0]["subject"]["state"] == "revoked" and revoked[0]["task_id"] is None
    assert receipts_verify()[1] is None


def test_a_rule_for_everyones_tasks_needs_its_scope_confirmed(paused_review, operator):
    review = paused_review(write_conf(), ["write_file"], {}, user=operator)
    client = ApiClient(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    first = shown["suggested_rules"][0]["id"]

    def remember(**extra):
        return client.post(
            f"/api/v1/reviews/{review.id}/decision",
            {
                "decision": "approve",
                "arguments_hash": shown["arguments_hash"],
                "remember": {"suggestion": first, "scope": "everyone", **extra},
            },
        )

    for extra in ({}, {"confirm_scope": "creator"}, {"confirm_scope": ""}):
        response = remember(**extra)
        assert response.status_code == 422, extra
        assert field_of(response) == ["remember.confirm_scope"], extra
    # The page's form: without the box ticked, nothing is decided.
    page = page_client(operator).post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "approve",
            "arguments_hash": shown["arguments_hash"],
            "remember_suggestion": first,
            "remember_scope": "everyone",
            "remember_until": (timezone.localdate() + timedelta(days=3)).isoformat(),
        },
    )
    assert page.status_code == 422 and "every user" in page.content.decode()
    assert not ReviewRule.objects.filter(kind="standing").exists()
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"
    assert remember(confirm_scope="everyone").status_code == 200
    assert ReviewRule.objects.get(origin_review=review).scope == "everyone"


def test_a_rule_ends_thirty_days_after_it_was_made_unless_told(paused_review, operator):
    review = paused_review(write_conf(), ["write_file"], {}, user=operator)
    client = ApiClient(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    made = timezone.now()
    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "arguments_hash": shown["arguments_hash"],
            "remember": {"suggestion": suggestion_ids(operator, review)[0]},
        },
    )
    assert response.status_code == 200, response.content
    rule = ReviewRule.objects.get(origin_review=review)
    assert timedelta(days=30) <= rule.until - made < timedelta(days=30, minutes=1)
    listing = page_client(operator).get("/reviews/rules/").content.decode()
    assert str(timezone.localtime(rule.until).year) in listing
    with time_machine.travel(rule.until - timedelta(minutes=1)):
        assert allowed(operator)
    with time_machine.travel(rule.until + timedelta(seconds=1)):
        outcome, call = next_call(write_conf(content="c=3\n"), ["write_file"], user=operator)
        assert outcome == "paused" and call.status == "awaiting_review"
        assert ReviewRule.objects.get(pk=rule.pk).standing_state == "ended"
