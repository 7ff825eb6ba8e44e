"""Selectors answer with the domain error `NotFound`; the web layer maps it to 404, so a
malformed or unknown id is a 404 on pages and in the API, never a 500."""

from __future__ import annotations

import uuid

import pytest

from tasks.errors import NotFound
from tasks.models import Task
from tasks.selectors import access_task
from tests.conftest import ApiClient, page_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(operator) -> Task:
    return Task.objects.create(
        goal="look", spec={"model": "scripted", "tools": []}, created_by=operator
    )


def test_selector_raises_the_domain_error_not_an_http_one(operator, task):
    assert access_task(operator, task.id) == task
    for bad in (uuid.uuid4(), "not-a-uuid", None):
        with pytest.raises(NotFound):
            access_task(operator, bad)


def test_a_user_without_a_role_cannot_read_a_task_through_the_selector(outsider, task):
    with pytest.raises(NotFound):
        access_task(outsider, task.id)


def test_pages_answer_404_for_unknown_ids(operator, task):
    client = page_client(operator)
    assert client.get(f"/tasks/{uuid.uuid4()}/").status_code == 404
    rollback = f"/tasks/{task.id}/checkpoints/{uuid.uuid4()}/rollback/"
    assert client.get(rollback).status_code == 404


def test_api_answers_404_with_what_was_not_found(operator, task):
    client = ApiClient(operator)
    response = client.get(f"/api/v1/tasks/{uuid.uuid4()}")
    assert response.status_code == 404
    assert response.json() == {"detail": "task not found"}
    missing_checkpoint = client.get(
        f"/api/v1/tasks/{task.id}/rollback/preview", {"checkpoint_id": str(uuid.uuid4())}
    )
    assert missing_checkpoint.status_code == 404
    assert missing_checkpoint.json() == {"detail": "checkpoint not found"}
    assert client.get("/api/v1/reviews/999999").json() == {"detail": "review not found"}
