"""A NUL character sent in any body, whatever its Content-Type, is a 4xx naming the field and
writes nothing. django-ninja parses every API body as JSON (text/plain, a form type or no
Content-Type at all), and the review form is read from urlencoded and multipart bodies alike:
before the guard checked every body, such a NUL reached PostgreSQL and answered 500."""

from __future__ import annotations

import json

import pytest
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

from review.models import ReviewRequest
from tasks.models import AuditEntry, Task
from tests.conftest import ApiClient, page_client

pytestmark = pytest.mark.django_db

SPEC = {"title": "t", "goal": "g", "model": {"kind": "scripted", "script": [{"final": "x"}]}}

# How each Content-Type carries the same JSON text; "" is a request without a Content-Type.
CONTENT_TYPES = [
    "application/json",
    "text/plain",
    "application/x-www-form-urlencoded",
    f"multipart/form-data; boundary={BOUNDARY}",
    "",
]


def send(client, path: str, body: dict, content_type: str):
    return client.generic("POST", path, json.dumps(body), content_type=content_type)


def fields(response) -> list[str]:
    return [e["field"] for e in response.json()["errors"]]


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_a_nul_in_a_task_spec_is_422_whatever_the_content_type(operator, content_type):
    spec = {**SPEC, "title": "a\x00b"}
    response = send(ApiClient(operator).client, "/api/v1/tasks", spec, content_type)
    assert response.status_code == 422, response.content
    assert fields(response) == ["title"]
    assert not Task.objects.exists()


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_a_nul_in_a_decision_is_422_whatever_the_content_type(
    paused_review, operator, content_type
):
    review = paused_review()
    body = {"decision": "reject", "reason": "no\x00pe", "comment": "fine"}
    path = f"/api/v1/reviews/{review.id}/decision"
    response = send(ApiClient(operator).client, path, body, content_type)
    assert response.status_code == 422, response.content
    assert fields(response) == ["reason"]
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_a_nul_in_a_cancel_reason_is_422_whatever_the_content_type(
    paused_review, operator, content_type
):
    task = paused_review().task
    audited = AuditEntry.objects.count()
    path = f"/api/v1/tasks/{task.id}/cancel"
    response = send(ApiClient(operator).client, path, {"reason": "\x00"}, content_type)
    assert response.status_code == 422, response.content
    assert fields(response) == ["reason"]
    assert Task.objects.get(pk=task.pk).status == "waiting_review"
    assert AuditEntry.objects.count() == audited


def test_a_nul_in_the_query_string_of_a_write_is_422(operator):
    response = ApiClient(operator).client.post(
        "/api/v1/tasks?note=a%00b", json.dumps(SPEC), content_type="application/json"
    )
    assert response.status_code == 422 and fields(response) == ["note"]
    assert not Task.objects.exists()


@pytest.mark.parametrize("field", ["comment", "reason"])
@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", MULTIPART_CONTENT])
def test_a_nul_in_a_review_form_field_is_422_naming_it(
    paused_review, operator, field, content_type
):
    review = paused_review()
    form = {"decision": "reject", "reason": "no", "comment": "", field: "a\x00b"}
    data = (
        encode_multipart(BOUNDARY, form)
        if content_type == MULTIPART_CONTENT
        else "&".join(f"{k}={v.replace(chr(0), '%00')}" for k, v in form.items())
    )
    response = page_client(operator).generic(
        "POST", f"/reviews/{review.id}/decide/", data, content_type=content_type
    )
    assert response.status_code == 422, response.content
    assert response.content.decode().startswith(f"{field}: NUL characters are not allowed")
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", ""])
def test_a_nul_in_a_body_the_review_form_does_not_read_writes_nothing(
    paused_review, operator, content_type
):
    review = paused_review()
    body = {"decision": "reject", "reason": "a\x00b"}
    response = send(page_client(operator), f"/reviews/{review.id}/decide/", body, content_type)
    assert 400 <= response.status_code < 500
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"
