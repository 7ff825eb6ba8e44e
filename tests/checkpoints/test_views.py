"""The rollback and diff pages: who may see them, and what a refused rollback shows."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.checkpoints.conftest import checkpoint_after_step
from tests.conftest import page_client

pytestmark = pytest.mark.django_db(transaction=True)


def _client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_only_operators_reach_the_rollback_page(finished, viewer, operator):
    url = f"/tasks/{finished.id}/checkpoints/{checkpoint_after_step(finished, 1).id}/rollback/"
    assert _client(viewer).get(url).status_code == 403
    page = _client(operator).get(url)
    assert page.status_code == 200
    assert b"new.txt" in page.content and b"csrfmiddlewaretoken" in page.content
    # Without the CSRF token the form post is refused and nothing is rolled back.
    assert _client(operator).post(url, {"reason": "x", "then": "hold"}).status_code == 403
    assert (finished.workspace_path / "new.txt").exists()


def test_a_rollback_without_a_reason_shows_the_error_and_changes_nothing(finished, operator):
    url = f"/tasks/{finished.id}/checkpoints/{checkpoint_after_step(finished, 1).id}/rollback/"
    client = page_client(operator)
    response = client.post(url, {"reason": " ", "then": "hold"})
    assert response.status_code == 422
    assert b"a reason is required" in response.content
    assert (finished.workspace_path / "new.txt").exists()


def test_the_diff_page_shows_state_and_text_differences(finished, viewer):
    a = checkpoint_after_step(finished, 1)
    b = checkpoint_after_step(finished, 4)
    page = _client(viewer).get(
        f"/tasks/{finished.id}/checkpoints/diff/", {"a": str(a.id), "b": str(b.id)}
    )
    assert page.status_code == 200
    text = page.content.decode()
    assert "-version = 1" in text and "+version = 3" in text
    assert "step_index" in text and "new.txt" in text
