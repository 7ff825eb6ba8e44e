"""The review inbox and review page, through Django's test client."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.conftest import page_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_anonymous_users_are_sent_to_login(paused_review):
    review = paused_review()
    client = Client()
    for url in ("/reviews/", f"/reviews/{review.id}/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    response = client.post(f"/reviews/{review.id}/decide/", {"decision": "approve"})
    assert response.status_code == 302
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"


def test_inbox_lists_pending_oldest_first_and_the_nav_counts_them(paused_review, operator):
    first = paused_review(title="first")
    second = paused_review(title="second")
    client = page_client(operator)
    client.post(f"/reviews/{first.id}/decide/", {"decision": "reject", "reason": "no"})
    third = paused_review(title="third")
    page = client.get("/reviews/").content.decode()
    assert page.index(f'data-review-id="{second.id}"') < page.index(f'data-review-id="{third.id}"')
    assert f'data-review-id="{first.id}"' not in page
    assert 'data-testid="pending-count">2<' in page
    everything = client.get("/reviews/?status=all").content.decode()
    assert everything.index(f'data-review-id="{third.id}"') < everything.index(
        f'data-review-id="{first.id}"'
    )
    only_tool = client.get("/reviews/?tool=write_file").content.decode()
    assert "data-review-id" not in only_tool


def test_review_page_explains_the_pause_and_shows_the_preview(paused_review, viewer):
    review = paused_review(goal="tidy the workspace")
    page = page_client(viewer).get(f"/reviews/{review.id}/").content.decode()
    assert "Why was this paused?" in page
    assert "Destructive tools delete or overwrite data." in page
    assert "when risk is destructive" in page
    assert '<span class="diff-del">-stale</span>' in page
    assert "tidy the workspace" in page  # the agent's recent messages
    assert f"#checkpoint-{review.checkpoint.seq}" in page
    assert "only operators decide" in page and 'data-testid="approve"' not in page


def test_viewers_get_403_when_they_post_a_decision(paused_review, viewer):
    review = paused_review()
    response = page_client(viewer).post(f"/reviews/{review.id}/decide/", {"decision": "approve"})
    assert response.status_code == 403
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"


def test_decisions_need_the_csrf_token(paused_review, operator):
    review = paused_review()
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(f"/reviews/{review.id}/decide/", {"decision": "approve"}).status_code == 403
    page = client.get(f"/reviews/{review.id}/")
    token = page.context["csrf_token"]
    response = client.post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "approve",
            "csrfmiddlewaretoken": str(token),
            "arguments_hash": page.context["arguments_hash"],
        },
    )
    assert response.status_code == 302
    assert response["Location"] == "/reviews/"  # no other review waiting
    assert Task.objects.get(pk=review.task_id).status == "queued"


def test_invalid_edits_are_shown_with_field_errors_and_change_nothing(paused_review, operator):
    review = paused_review()
    client = page_client(operator)
    not_json = client.post(
        f"/reviews/{review.id}/decide/", {"decision": "edit", "arguments": "{path: old.log"}
    )
    assert not_json.status_code == 422 and "must be valid JSON" in not_json.content.decode()
    assert "invalid JSON at line 1, column 2" in not_json.content.decode()  # where it broke
    wrong = client.post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "edit",
            "arguments": json.dumps({"path": "old.log", "recursive": True}),
            "arguments_hash": canonical_hash({"path": "old.log"}),
        },
    )
    assert wrong.status_code == 422
    assert "arguments.recursive" in wrong.content.decode()
    review.refresh_from_db()
    assert review.status == "pending" and review.edited_arguments is None


def test_edit_then_approve_from_the_page(paused_review, operator):
    review = paused_review(files={"old.log": "a", "other.log": "b"})
    response = page_client(operator).post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "edit",
            "arguments": json.dumps({"path": "other.log"}),
            "arguments_hash": canonical_hash({"path": "old.log"}),
            "comment": "the other one",
        },
    )
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.status == "approved" and review.edited_arguments == {"path": "other.log"}
    assert review.tool_call.arguments == {"path": "other.log"}


def test_a_call_with_an_unknown_outcome_offers_mark_done_rerun_or_fail(paused_review, operator):
    review = paused_review()
    # As the loop opens it when a worker died during a non-idempotent call.
    ReviewRequest.objects.filter(pk=review.pk).update(kind="unknown_outcome")
    client = page_client(operator)
    page = client.get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="mark-done"' in page and 'data-testid="approve"' not in page
    response = client.post(
        f"/reviews/{review.id}/decide/",
        {"decision": "mark_done", "result": json.dumps({"deleted": True}), "comment": "checked"},
    )
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.status == "approved" and review.decision_reason == "mark_done"
    assert review.tool_call.status == "succeeded" and review.tool_call.result == {"deleted": True}
    assert Task.objects.get(pk=review.task_id).status == "queued"
