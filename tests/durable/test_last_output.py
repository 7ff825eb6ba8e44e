"""A command's worker is killed mid-run: the call's outcome is unknown and a person decides
what happened. The review shows what the task page last showed of the command's output."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tasks.outputs import live_output_get
from tests.conftest import wait_for
from tests.factories import enqueued_task

from .conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

COMMAND = "echo seen-before-the-crash; while [ ! -e never ]; do sleep 0.05; done"


def _published(task) -> bool:
    streams = (live_output_get(task_id=task.id) or {}).get("streams") or {}
    return "seen-before-the-crash" in streams.get("stdout", {}).get("text", "")


def test_the_outcome_unknown_review_shows_the_last_output_seen(
    fleet, commands_allowed, as_user, viewer
):
    fleet.worker(2)
    fleet.sweeper()
    task = enqueued_task(
        [{"call": "run_command", "args": {"command": COMMAND}}, {"final": "done"}],
        ["run_command"],
    )
    wait_for(lambda: _published(task), 60, message="the first line to be published")
    fleet.kill_worker_of(task.id)

    task = wait_status(task.id, "waiting_review", timeout=90)
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.kind == "unknown_outcome"
    html = as_user(viewer).get(f"/reviews/{review.id}/").content.decode()
    assert "What the call did, as far as was seen" in html
    assert "seen-before-the-crash\n</pre>" in html
    assert "last seen while it ran (its worker stopped)" in html
