"""Approvals name what they approve: an approval carries the hash of the arguments its decider
was shown, an edit is held to the strictest matching rule, and expiry is enforced at decision
time, not at the next sweep."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from review.models import ReviewRequest, ReviewRule
from tasks.models import Task

from .conftest import api_client, page_client

pytestmark = pytest.mark.django_db(transaction=True)


def sha256_of_canonical(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def write_conf(path: str = "a.conf", content: str = "port=80\n") -> list[dict]:
    return [{"call": "write_file", "args": {"path": path, "content": content}}, {"final": "ok"}]


def decide(user, review_id: int, body: dict):
    return api_client(user).post(f"/api/v1/reviews/{review_id}/decision", body)


def test_reviews_show_the_hash_of_the_arguments_under_review(paused, viewer):
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"})
    expected = sha256_of_canonical({"path": "a.conf", "content": "port=80\n"})
    client = api_client(viewer)
    (listed,) = client.get("/api/v1/reviews", {"status": "pending"}).json()
    assert listed["arguments_hash"] == expected
    assert client.get(f"/api/v1/reviews/{review.id}").json()["arguments_hash"] == expected


def test_an_approval_without_the_hash_is_422_naming_the_field(paused, operator):
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"})
    response = decide(operator, review.id, {"decision": "approve"})
    assert response.status_code == 422
    assert "arguments_hash" in [e["field"] for e in response.json()["errors"]]
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0


def test_second_approver_cannot_approve_an_edit_they_never_saw(paused, operator, second_operator):
    ReviewRule.objects.create(
        name="two-person-conf", tool="write_file", action="review", approvals_required=2
    )
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"})
    original_hash = api_client(operator).get(f"/api/v1/reviews/{review.id}").json()
    original_hash = original_hash["arguments_hash"]
    edited = {"path": "a.conf", "content": "port=6666\n"}
    first = decide(
        operator,
        review.id,
        {"decision": "approve", "arguments": edited, "arguments_hash": original_hash},
    )
    assert first.status_code == 200 and first.json()["status"] == "pending"

    # B loaded the review before A's edit: B's approval names the original arguments.
    stale = decide(
        second_operator, review.id, {"decision": "approve", "arguments_hash": original_hash}
    )
    assert stale.status_code == 409
    plain = decide(second_operator, review.id, {"decision": "approve"})
    assert plain.status_code == 422
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 1
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"

    # Shown the edit, B approves exactly that.
    now_shown = api_client(second_operator).get(f"/api/v1/reviews/{review.id}").json()
    assert now_shown["arguments"] == edited
    assert now_shown["arguments_hash"] == sha256_of_canonical(edited)
    ok = decide(
        second_operator,
        review.id,
        {"decision": "approve", "arguments_hash": now_shown["arguments_hash"]},
    )
    assert ok.status_code == 200 and ok.json()["status"] == "approved"


def test_an_edit_into_a_stricter_rule_needs_that_rules_approvals(paused, operator):
    ReviewRule.objects.create(
        name="secrets-need-two",
        tool="write_file",
        path_glob="secrets/**",
        action="review",
        approvals_required=2,
    )
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"})
    assert review.approvals_required == 1
    response = decide(
        operator,
        review.id,
        {
            "decision": "approve",
            "arguments": {"path": "secrets/prod.conf", "content": "token=x\n"},
            "arguments_hash": sha256_of_canonical(review.arguments),
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "pending" and body["approvals_required"] == 2
    assert "secrets-need-two" in [rule["name"] for rule in body["matched_rules"]]
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"


def test_an_edit_into_a_creator_ban_stops_the_creator(paused, operator):
    ReviewRule.objects.create(
        name="prod-four-eyes",
        tool="write_file",
        path_glob="prod/**",
        action="review",
        forbid_creator=True,
    )
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"}, user=operator)
    response = decide(
        operator,
        review.id,
        {
            "decision": "approve",
            "arguments": {"path": "prod/a.conf", "content": "port=2\n"},
            "arguments_hash": sha256_of_canonical(review.arguments),
        },
    )
    assert response.status_code == 403
    review.refresh_from_db()
    assert review.status == "pending" and review.edited_arguments is None


def test_an_edit_into_a_denied_call_is_refused(paused, operator):
    ReviewRule.objects.create(
        name="never-etc", tool="write_file", path_glob="etc/**", action="deny"
    )
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"})
    response = decide(
        operator,
        review.id,
        {
            "decision": "approve",
            "arguments": {"path": "etc/passwd", "content": "x"},
            "arguments_hash": sha256_of_canonical(review.arguments),
        },
    )
    assert response.status_code == 422
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0


def test_a_decision_after_expiry_is_refused_before_any_sweep(paused, operator):
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"})
    ReviewRequest.objects.filter(pk=review.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    for body in (
        {"decision": "approve", "arguments_hash": sha256_of_canonical(review.arguments)},
        {"decision": "reject", "reason": "late"},
    ):
        response = decide(operator, review.id, body)
        assert response.status_code == 409, body
        assert "expired" in response.json()["detail"]
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"


def test_the_page_forms_carry_the_hash_and_a_stale_one_records_nothing(
    paused, operator, second_operator
):
    review = paused(write_conf(), ["write_file"], {"a.conf": "port=1\n"})
    current = sha256_of_canonical(review.arguments)
    client = page_client(second_operator)
    page = client.get(f"/reviews/{review.id}/").content.decode()
    assert page.count(f'name="arguments_hash" value="{current}"') == 2  # approve and edit

    edited = {"path": "a.conf", "content": "port=6666\n"}
    ReviewRequest.objects.filter(pk=review.pk).update(edited_arguments=edited)
    response = client.post(
        f"/reviews/{review.id}/decide/", {"decision": "approve", "arguments_hash": current}
    )
    assert response.status_code == 302  # back to the review, with the conflict shown
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0
    missing = client.post(f"/reviews/{review.id}/decide/", {"decision": "approve"})
    assert missing.status_code == 422 and "arguments_hash" in missing.content.decode()
