"""Compare shows what a fork changed (issue #45 item 2): a fork whose pending write_file was
edited shows, at the divergent step, the call it ran with the edited content (marked as an edit
of the original's call), and each final file that differs carries its diff from the original's
head to the fork's, on the page and in the API."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from review.models import ReviewRequest
from tasks.models import ToolCall
from tests.cases.conftest import waiting_spec
from tests.conftest import approve, needs_chromium

SLOW_MS = 60_000
ORIGINAL = {"path": "cfg/app.conf", "content": "x=1\n"}
EDITED = {"path": "cfg/app.conf", "content": "worker_processes 12\n"}


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_the_comparison_shows_the_forks_edited_call_and_the_files_diff(
    live_server, open_page, workers, task_api, api_client, operator
):
    original = task_api.create(waiting_spec())
    waiting = task_api.wait(original["id"], "waiting_review")
    pending = ToolCall.objects.get(task_id=original["id"], status="awaiting_review")
    client = api_client(operator)
    forked = client.post(
        f"/api/v1/tasks/{original['id']}/fork",
        {
            "checkpoint_id": waiting["head_checkpoint"],
            "pending_args": {pending.call_id: EDITED},
            "reason": "more workers",
        },
    )
    assert forked.status_code == 201, forked.content
    fork_id = forked.json()["id"]
    # Both run to the end: the fork's edited write goes through review again, as the original's.
    for task_id in (original["id"], fork_id):
        # The fork reaches its review when a worker has run it: wait for that, not for luck.
        task_api.wait(task_id, "waiting_review")
        review = ReviewRequest.objects.get(task_id=task_id, status="pending")
        approve(review, operator)
        task_api.wait(task_id, "succeeded")
    assert Checkpoint.objects.filter(task_id=fork_id).exists()

    compared = client.get(f"/api/v1/tasks/{original['id']}/compare?other={fork_id}").json()
    assert compared["first_divergent_step"] == 2
    row = next(r for r in compared["steps"] if r["turn"] == 2)
    (ran,) = row["replay"]["calls"]
    assert ran["tool"] == "write_file" and ran["status"] == "succeeded"
    assert ran["args"] == EDITED and ran["edited_from"] == ORIGINAL
    assert row["recorded"]["calls"][0]["args"] == ORIGINAL
    (changed,) = compared["files"]
    assert changed["path"] == "cfg/app.conf" and changed["change"] == "changed"
    assert "-x=1" in changed["text_diff"] and "+worker_processes 12" in changed["text_diff"]

    page = open_page(
        operator, f"/tasks/{original['id']}/compare/?other={fork_id}", timeout_ms=SLOW_MS
    )
    divergent = page.inner_text("[data-testid=divergent-row]")
    assert "worker_processes 12" in divergent and "x=1" in divergent
    edited = page.inner_text("[data-testid=divergent-row] [data-testid=edited-call]")
    assert "write_file" in edited and "worker_processes 12" in edited and "edited" in edited
    diff = page.inner_text("[data-testid=compare-files] [data-testid=file-diff]")
    assert "+worker_processes 12" in diff and "-x=1" in diff
