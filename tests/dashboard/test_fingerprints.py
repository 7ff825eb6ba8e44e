"""Error fingerprints: volatile parts stripped, computed when the error is recorded."""

from __future__ import annotations

import pytest

from tasks.errors import error_fingerprint, error_normalise
from tasks.services import task_transition
from tests.factories import TaskFactory


@pytest.mark.parametrize(
    "message, normalised",
    [
        ("max_steps=5 reached", "max_steps=<n> reached"),
        (
            "checkpoint 3f2a5b8e-1111-2222-3333-444455556666 (seq 12): checksum mismatch",
            "checkpoint <uuid> (seq <n>): checksum mismatch",
        ),
        (
            "No such file: /srv/ws/3f2a5b8e-1111-2222-3333-444455556666/a.txt",
            "No such file: <path>",
        ),
        ("HTTP 429 from https://api.example.com/v1/chat?x=1", "HTTP <n> from <url>"),
        ("sha deadbeefcafe1234 mismatch", "sha <hex> mismatch"),
        (
            "write_file failed: path '../etc' escapes the workspace",
            "write_file failed: path '…' escapes the workspace",
        ),
    ],
)
def test_volatile_parts_are_replaced(message, normalised):
    assert error_normalise(message) == normalised


def test_same_failure_with_different_ids_shares_a_fingerprint_other_class_does_not():
    a = error_fingerprint("timeout", "call 0.3.1 exceeded its 30s timeout")
    assert a == error_fingerprint("timeout", "call 0.9.2 exceeded its 5s timeout")
    assert a != error_fingerprint("transient", "call 0.3.1 exceeded its 30s timeout")
    assert error_fingerprint("", "") == ""


@pytest.mark.django_db
def test_a_failed_transition_stores_the_fingerprint():
    task = TaskFactory()
    task_transition(task_id=task.id, to="queued")
    task_transition(
        task_id=task.id,
        to="failed",
        fields={"error_class": "budget_exceeded", "error_message": "max_steps=3 reached"},
    )
    task.refresh_from_db()
    assert task.error_fingerprint == error_fingerprint("budget_exceeded", "max_steps=8 reached")
