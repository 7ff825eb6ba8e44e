""" "Preview edit" (POST /reviews/<id>/edit-preview/) reads the call's targets with arguments
the caller chose: only those who may decide the review may ask, only with the CSRF token, and
asking changes nothing (no approval, no edit, no receipt, the file untouched)."""

from __future__ import annotations

import os

import pytest
from django.test import Client

from review.models import DecisionReceipt, ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.conftest import page_client

pytestmark = pytest.mark.django_db(transaction=True)

ORIGINAL = "port=80\n"


@pytest.fixture
def conf_review(paused_review):
    return paused_review(
        script=[
            {"call": "write_file", "args": {"path": "service.conf", "content": "port=81\n"}},
            {"final": "done"},
        ],
        tools=["write_file"],
        files={"service.conf": ORIGINAL},
    )


def preview_body(review: ReviewRequest, content: str) -> dict[str, str]:
    return {
        "edit_mode": "form",
        "arguments_hash": canonical_hash(review.arguments),
        "arg.path": "service.conf",
        "arg.content": content,
    }


def assert_nothing_changed(review: ReviewRequest) -> None:
    review.refresh_from_db()
    assert review.status == "pending"
    assert review.edited_arguments is None and review.edited_preview == ""
    assert review.approvals.count() == 0
    assert not DecisionReceipt.objects.filter(review_id=review.id).exists()
    task = Task.objects.get(pk=review.task_id)
    assert task.status == "waiting_review"
    assert (task.workspace_path / "service.conf").read_text() == ORIGINAL


def test_viewers_may_not_preview_an_edit(conf_review, viewer):
    response = page_client(viewer).post(
        f"/reviews/{conf_review.id}/edit-preview/", preview_body(conf_review, "port=22\n")
    )
    assert response.status_code == 403
    assert "port=22" not in response.content.decode()
    assert_nothing_changed(conf_review)


def test_the_preview_needs_the_csrf_token(conf_review, operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    url = f"/reviews/{conf_review.id}/edit-preview/"
    assert client.post(url, preview_body(conf_review, "port=22\n")).status_code == 403
    token = client.get(f"/reviews/{conf_review.id}/").context["csrf_token"]
    body = {**preview_body(conf_review, "port=22\n"), "csrfmiddlewaretoken": str(token)}
    assert client.post(url, body).status_code == 200


def test_an_operator_sees_the_effect_and_nothing_changes(conf_review, operator):
    client = page_client(operator)
    url = f"/reviews/{conf_review.id}/edit-preview/"
    fragment = client.post(url, preview_body(conf_review, "port=8080\r\n"), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    text = fragment.content.decode()
    assert "<html" not in text and 'id="edit-form"' in text  # the form, for HTMX to swap
    assert '<span class="diff-del">-port=80</span><span class="diff-add">+port=8080</span>' in text
    assert "\nport=8080\n</textarea>" in text  # the typed text kept, its line breaks as LF
    page = client.post(url, preview_body(conf_review, "port=8080\n"))  # without JavaScript
    assert page.status_code == 200 and "Why was this paused?" in page.content.decode()
    assert 'data-testid="edit-preview-diff"' in page.content.decode()
    assert_nothing_changed(conf_review)


def test_a_preview_of_invalid_arguments_is_a_422_naming_the_field(conf_review, operator):
    body = {**preview_body(conf_review, "x"), "arg.path": "a" * 5000}
    response = page_client(operator).post(f"/reviews/{conf_review.id}/edit-preview/", body)
    assert response.status_code == 422 and "arguments.path" in response.content.decode()
    # An error of the whole object is shown in the form HTMX swaps in, too.
    whole = page_client(operator).post(
        f"/reviews/{conf_review.id}/edit-preview/",
        {"edit_mode": "json", "arguments": "[1]"},
        HTTP_HX_REQUEST="true",
    )
    assert whole.status_code == 422 and "must be a JSON object" in whole.content.decode()
    assert_nothing_changed(conf_review)


def test_a_preview_reads_nothing_outside_the_workspace(conf_review, operator):
    workspace = Task.objects.get(pk=conf_review.task_id).workspace_path
    secret = workspace.parent.parent / "secret.conf"
    secret.write_text("password=hunter2\n")
    (workspace / "link.conf").symlink_to(secret)
    client = page_client(operator)
    for path in (os.path.relpath(secret, workspace), str(secret), "link.conf"):
        body = {**preview_body(conf_review, "x\n"), "arg.path": path}
        response = client.post(f"/reviews/{conf_review.id}/edit-preview/", body)
        assert response.status_code in (200, 422)
        assert "hunter2" not in response.content.decode()
    assert_nothing_changed(conf_review)
