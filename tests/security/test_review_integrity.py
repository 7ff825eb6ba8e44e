"""Approvals name what they approve: an approval carries the hash of the arguments its decider
was shown, an edit is held to the strictest matching rule, and expiry is enforced at decision
time, not at the next sweep."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
import time_machine

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import ApiClient, page_client
from tests.factories import ReviewRuleFactory

pytestmark = pytest.mark.django_db(transaction=True)


def sha256_of_canonical(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def write_conf(path: str = "a.conf", content: str = "port=80\n") -> list[dict]:
    return [{"call": "write_file", "args": {"path": path, "content": content}}, {"final": "ok"}]


def decide(user, review_id: int, body: dict):
    return ApiClient(user).post(f"/api/v1/reviews/{review_id}/decision", body)


def approve_edit(user, review, arguments: dict):
    """Approve `review` with edited `arguments`, naming the hash of the arguments shown."""
    body = {
        "decision": "approve",
        "arguments": arguments,
        "arguments_hash": sha256_of_canonical(review.arguments),
    }
    return decide(user, review.id, body)


@pytest.fixture
def conf_review(paused_review):
    """conf_review(user=) -> the pending review of a task writing a.conf (port=1 -> port=80)."""

    def make(user=None):
        return paused_review(write_conf(), ["write_file"], {"a.conf": "port=1\n"}, user=user)

    return make


def test_reviews_show_the_hash_of_the_arguments_under_review(conf_review, viewer):
    review = conf_review()
    expected = sha256_of_canonical({"path": "a.conf", "content": "port=80\n"})
    client = ApiClient(viewer)
    (listed,) = client.get("/api/v1/reviews", {"status": "pending"}).json()
    assert listed["arguments_hash"] == expected
    assert client.get(f"/api/v1/reviews/{review.id}").json()["arguments_hash"] == expected


def test_an_approval_without_the_hash_is_422_naming_the_field(conf_review, operator):
    review = conf_review()
    response = decide(operator, review.id, {"decision": "approve"})
    assert response.status_code == 422
    assert "arguments_hash" in [e["field"] for e in response.json()["errors"]]
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0


def test_second_approver_cannot_approve_an_edit_they_never_saw(
    conf_review, operator, second_operator
):
    ReviewRuleFactory(name="two-person-conf", approvals_required=2)
    review = conf_review()
    original_hash = ApiClient(operator).get(f"/api/v1/reviews/{review.id}").json()
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
    now_shown = ApiClient(second_operator).get(f"/api/v1/reviews/{review.id}").json()
    assert now_shown["arguments"] == edited
    assert now_shown["arguments_hash"] == sha256_of_canonical(edited)
    ok = decide(
        second_operator,
        review.id,
        {"decision": "approve", "arguments_hash": now_shown["arguments_hash"]},
    )
    assert ok.status_code == 200 and ok.json()["status"] == "approved"


def test_an_edit_into_a_stricter_rule_needs_that_rules_approvals(conf_review, operator):
    ReviewRuleFactory(name="secrets-need-two", path_glob="secrets/**", approvals_required=2)
    review = conf_review()
    assert review.approvals_required == 1
    response = approve_edit(operator, review, {"path": "secrets/prod.conf", "content": "token=x\n"})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "pending" and body["approvals_required"] == 2
    assert "secrets-need-two" in [rule["name"] for rule in body["matched_rules"]]
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"


def test_an_edit_into_a_creator_ban_stops_the_creator(conf_review, operator):
    ReviewRuleFactory(name="prod-four-eyes", path_glob="prod/**", forbid_creator=True)
    review = conf_review(user=operator)
    response = approve_edit(operator, review, {"path": "prod/a.conf", "content": "port=2\n"})
    assert response.status_code == 403
    review.refresh_from_db()
    assert review.status == "pending" and review.edited_arguments is None


def test_an_edit_into_a_denied_call_is_refused(conf_review, operator):
    ReviewRuleFactory(name="never-etc", path_glob="etc/**", action="deny")
    review = conf_review()
    response = approve_edit(operator, review, {"path": "etc/passwd", "content": "x"})
    assert response.status_code == 422
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0


def test_a_decision_after_expiry_is_refused_before_any_sweep(conf_review, operator):
    review = conf_review()
    with time_machine.travel(review.expires_at + timedelta(seconds=1)):
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
    conf_review, operator, second_operator
):
    review = conf_review()
    current = sha256_of_canonical(review.arguments)
    client = page_client(second_operator)
    page = client.get(f"/reviews/{review.id}/").content.decode()
    # approve, approve and always allow, edit
    assert page.count(f'name="arguments_hash" value="{current}"') == 3

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
