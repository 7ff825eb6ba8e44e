"""The rollback and diff pages: who may see them, and what a refused rollback shows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

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


def test_checkpoints_read_like_the_calls_and_steps_they_stand_between(finished, viewer):
    """Issue #45 item 7: "before write_file app.conf · step 0", not `1ba243de_0_tool_2026…`;
    the tab's queries do not grow with its rows (the label is a column, not a lookup)."""
    labels = [cp.label for cp in finished.checkpoints.order_by("seq")]
    assert labels[0] == "task start"
    assert labels[1:4] == [
        "after the model's turn · step 0",
        "before write_file app.conf · step 0",
        "after step 0",
    ]
    assert "before write_file new.txt · step 1" in labels
    client = page_client(viewer)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/tasks/{finished.id}/?tab=checkpoints").content.decode()
    assert "before write_file app.conf · step 0" in page
    assert len(queries) < 40
    body = client.get(f"/api/v1/tasks/{finished.id}/checkpoints").json()
    (row,) = [row for row in body if row["subject"] == "write_file new.txt"]
    assert row["label"] == "before write_file new.txt · step 1"
