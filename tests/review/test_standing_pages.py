"""Standing rules on the pages: the review page offers "Approve and always allow…" with the
call's suggestions, a scope and an end date; the call a rule allowed says so; the rules page
shows each rule's track record, and an operator resumes a paused one there."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.stats import review_outcomes
from dashboard.windows import window_parse
from review.models import DecisionReceipt, ReviewRequest, ReviewRule
from review.receipts import receipts_verify
from review.services import standing_rule_pause
from tests.conftest import page_client
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _quiet(quiet_watchdog) -> None:
    pass


def write_conf(content: str) -> list[dict]:
    return [
        {"call": "write_file", "args": {"path": "service.conf", "content": content}},
        {"final": "ok"},
    ]


def test_approve_and_always_allow_from_the_review_page(paused_review, operator, viewer):
    review = paused_review(write_conf("a=1\n"), ["write_file"], {}, user=operator)
    page = page_client(operator).get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="remember-form"' in page
    assert "write_file on service.conf (any content)" in page
    assert "write_file on any .conf file at the top of the workspace" in page
    assert (
        'data-testid="remember-form"'
        not in page_client(viewer).get(f"/reviews/{review.id}/").content.decode()
    )

    client = page_client(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    response = client.post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "approve",
            "arguments_hash": shown["arguments_hash"],
            "remember_suggestion": shown["suggested_rules"][1]["id"],
            "remember_scope": "everyone",
            "remember_confirm_scope": "everyone",
            "remember_until": (timezone.localdate() + timedelta(days=3)).isoformat(),
        },
    )
    assert response.status_code == 302
    rule = ReviewRule.objects.get(origin_review=review)
    assert (rule.path_glob, rule.scope, rule.created_by) == ("*.conf", "everyone", operator)
    assert "Remembered: standing rule" in client.get(f"/reviews/{review.id}/").content.decode()

    task = scripted_task(write_conf("a=2\n"), ["write_file"], user=operator)
    assert run_in_process(task) == "succeeded"
    allowed = ReviewRequest.objects.get(task=task)
    page = client.get(f"/reviews/{allowed.id}/").content.decode()
    assert "Approved by <strong>standing rule " + rule.name in page
    calls_tab = client.get(f"/tasks/{task.id}/?tab=reviews").content.decode()
    assert f"by standing rule {rule.name}" in calls_tab
    # A receipt of the rule's approval, in the chain, with the rule as the actor.
    receipt = DecisionReceipt.objects.get(review_id=allowed.id)
    assert (receipt.decision, receipt.actor, receipt.via) == (
        "approve",
        f"rule:{rule.name}",
        "standing_rule",
    )
    assert receipts_verify()[1] is None
    # The statistics' review outcomes count what people decided, not the rule's approvals.
    window = window_parse(since="1h", bucket=None, now=timezone.now() + timedelta(seconds=1))
    assert [(row["tool"], row["approved"]) for row in review_outcomes(window)] == [
        ("write_file", 1)
    ]


def test_a_paused_rule_is_resumed_from_the_rules_page(paused_review, operator, viewer):
    review = paused_review(write_conf("a=1\n"), ["write_file"], {}, user=operator)
    client = page_client(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    client.post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "approve",
            "arguments_hash": shown["arguments_hash"],
            "remember_suggestion": shown["suggested_rules"][0]["id"],
            "remember_scope": "creator",
            "remember_until": timezone.localdate().isoformat(),
        },
    )
    rule = ReviewRule.objects.get(origin_review=review)
    assert standing_rule_pause(rule_id=rule.id, reason="checking it", user=operator)
    listing = client.get("/reviews/rules/").content.decode()
    assert "checking it" in listing and f'data-testid="resume-{rule.id}"' in listing
    assert (
        f'data-testid="resume-{rule.id}"'
        not in page_client(viewer).get("/reviews/rules/").content.decode()
    )
    assert page_client(viewer).post(f"/reviews/rules/{rule.id}/resume/").status_code == 403
    assert ReviewRule.objects.get(pk=rule.pk).paused

    response = client.post(f"/reviews/rules/{rule.id}/resume/", {"reason": "looked fine"})
    assert response.status_code == 302
    assert not ReviewRule.objects.get(pk=rule.pk).paused


def test_the_admin_pauses_and_resumes_standing_rules(paused_review, operator, admin_user):
    review = paused_review(write_conf("a=1\n"), ["write_file"], {}, user=operator)
    client = page_client(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "arguments_hash": shown["arguments_hash"],
            "remember": {
                "suggestion": shown["suggested_rules"][0]["id"],
                "until": timezone.localdate().isoformat(),
            },
        },
        content_type="application/json",
    )
    rule = ReviewRule.objects.get(origin_review=review)
    admin = page_client(admin_user)
    for action, paused in (("pause_standing_rules", True), ("resume_standing_rules", False)):
        response = admin.post(
            "/admin/review/reviewrule/",
            {"action": action, "_selected_action": [rule.id]},
        )
        assert response.status_code == 302
        assert ReviewRule.objects.get(pk=rule.pk).paused is paused


def test_remember_names_the_rule_apart_from_an_admin_rule_of_the_same_name(paused_review, operator):
    review = paused_review(write_conf("a=1\n"), ["write_file"], {}, user=operator)
    ReviewRule.objects.create(name=f"standing-{review.id}", tool="read_file", action="allow")
    client = page_client(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "arguments_hash": shown["arguments_hash"],
            "remember": {
                "suggestion": shown["suggested_rules"][0]["id"],
                "until": timezone.localdate().isoformat(),
            },
        },
        content_type="application/json",
    )
    assert response.status_code == 200
    assert ReviewRule.objects.get(origin_review=review).name.startswith(f"standing-{review.id}-")
