"""The review page of a `version_drift` review (issue #43): the drift with the old and the new
schema side by side, the four choices, each posted with the page's CSRF token through the
same decision as the API, and a choice that cannot be taken refused naming its field."""

from __future__ import annotations

import pytest
from django.test import Client

from review.models import DecisionReceipt, ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.factories import ReviewRequestFactory, TaskFactory, ToolCallFactory, scripted_spec

pytestmark = pytest.mark.django_db

OLD = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
NEW = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}


@pytest.fixture(autouse=True)
def _settings(harness_dirs) -> None:
    pass


def drift_review(operator) -> ReviewRequest:
    task = TaskFactory(
        spec=scripted_spec([], ["write_file"]), status="waiting_review", created_by=operator
    )
    call = ToolCallFactory(
        task=task,
        call_id="0.0.0",
        tool="write_file",
        arguments={"path": "a.txt"},
        risk="write",
        status="awaiting_review",
    )
    return ReviewRequestFactory(
        tool_call=call,
        kind="version_drift",
        drift={
            "changes": [
                {
                    "kind": "tool",
                    "name": "write_file",
                    "change": "changed",
                    "old_body": OLD,
                    "new_body": NEW,
                    "added": ["content"],
                    "removed": [],
                    "required": ["content"],
                }
            ],
            "touches": ["the pending call's tool write_file changed its argument schema"],
            "touches_next": True,
            "arguments_valid": False,
            "argument_errors": [{"field": "arguments.content", "message": "Field required"}],
            "schema": NEW,
            "tool_gone": False,
        },
    )


def logged_in(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def post(client: Client, review: ReviewRequest, **data):
    page = client.get(f"/reviews/{review.id}/")
    token = page.cookies["csrftoken"].value
    return client.post(f"/reviews/{review.id}/decide/", {"csrfmiddlewaretoken": token, **data})


def test_the_page_shows_the_drift_side_by_side_and_the_four_choices(operator):
    review = drift_review(operator)
    page = logged_in(operator).get(f"/reviews/{review.id}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="version-drift"' in html
    assert "changed its argument schema" in html
    assert "arguments.content" in html
    assert html.count('data-testid="drift-old"') == 1 and html.count('data-testid="drift-new"') == 1
    for choice in ("drift-continue", "drift-restart", "drift-cancel"):
        assert f'data-testid="{choice}"' in html
    assert 'data-testid="approve"' not in html  # no plain approval of this kind
    # The harness loop's state can be migrated: the page does not call migrate refused.
    assert 'data-testid="drift-migrate-refused"' not in html


def test_continue_from_the_page_without_the_field_is_refused_naming_it_and_cancel_cancels(
    operator,
):
    review = drift_review(operator)
    client = logged_in(operator)
    bad = post(
        client,
        review,
        decision="continue",
        arguments_hash=canonical_hash(review.arguments),
        arguments='{"path": "a.txt"}',
    )
    assert bad.status_code == 422 and "arguments.content" in bad.content.decode()
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"

    canceled = post(client, review, decision="cancel", comment="not after this deploy")
    assert canceled.status_code == 302
    review.refresh_from_db()
    assert review.status == "rejected" and review.choice == {"decision": "cancel"}
    assert Task.objects.get(pk=review.task_id).status == "canceled"
    assert DecisionReceipt.objects.get(review_id=review.id).decision == "cancel"


def test_restart_names_a_checkpoint_of_this_task(operator):
    review = drift_review(operator)
    response = post(logged_in(operator), review, decision="restart", checkpoint_id="not-a-uuid")
    assert response.status_code == 422
    assert "checkpoint_id" in response.content.decode()
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"


def test_a_viewer_sees_the_drift_but_no_choices(operator, viewer):
    review = drift_review(operator)
    html = logged_in(viewer).get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="version-drift"' in html and 'data-testid="drift-choices"' not in html
