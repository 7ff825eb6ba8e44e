"""Missing or invalid credentials are 401 for every method, with a body saying which; never
ninja's CSRF 403. A browser session still needs the CSRF token for unsafe methods."""

from __future__ import annotations

import json

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

SPEC = {"title": "t", "goal": "g", "model": {"kind": "scripted", "script": [{"final": "x"}]}}


@pytest.mark.parametrize("method", ["get", "post"])
def test_no_credentials_is_401_saying_missing(method):
    response = getattr(Client(), method)("/api/v1/tasks", content_type="application/json")
    assert response.status_code == 401
    assert response.json()["reason"].startswith("missing credentials")
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("header", ["Bearer not-a-token", "Basic dXNlcjpwYXNz", "Bearer"])
def test_a_wrong_token_is_401_saying_invalid(method, header):
    client = Client(headers={"Authorization": header})
    response = getattr(client, method)("/api/v1/tasks", content_type="application/json")
    assert response.status_code == 401
    assert response.json()["reason"].startswith("invalid credentials")


def test_a_revoked_token_is_401(operator, api_client):
    from tasks.models import ApiToken

    client = api_client(operator)
    ApiToken.objects.filter(user=operator).update(revoked=True)
    assert client.post("/api/v1/tasks", SPEC).status_code == 401


def test_a_logged_in_session_still_needs_the_csrf_token(operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.get("/api/v1/tasks").status_code == 200
    response = client.post("/api/v1/tasks", json.dumps(SPEC), content_type="application/json")
    assert response.status_code == 403


def test_viewers_and_users_in_no_group_cannot_create_tasks(viewer, outsider, api_client):
    from tasks.models import Task

    for user in (viewer, outsider):
        assert api_client(user).post("/api/v1/tasks", SPEC).status_code == 403
    assert not Task.objects.exists()


def test_a_creator_creates_but_cannot_cancel(roles, django_user_model, api_client):
    user = django_user_model.objects.create_user(username="maker", password="x" * 12)
    user.groups.add(roles["creators"])
    client = api_client(user)
    created = client.post("/api/v1/tasks", SPEC)
    assert created.status_code == 201
    assert client.post(f"/api/v1/tasks/{created.json()['id']}/cancel").status_code == 403


def test_a_user_in_no_group_reads_nothing(operator, outsider, api_client):
    task = api_client(operator).post("/api/v1/tasks", SPEC).json()
    client = api_client(outsider)
    for path in ("/api/v1/tasks", f"/api/v1/tasks/{task['id']}", "/api/v1/reviews"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert "tasks" not in response.json()
