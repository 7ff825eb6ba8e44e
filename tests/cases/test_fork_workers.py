"""Fork with edits (issue #31 item 5), with real workers: a sibling forked from the checkpoint
where the original waits for review, with the pending call's arguments edited, runs with the
original's workspace; the original, its workspace, checkpoints and ledger stay as they were."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tasks.models import AuditEntry, Task, ToolCall
from tests.cases.conftest import waiting_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_fork_with_an_edited_argument_runs_with_the_originals_workspace(
    harness_dirs, workers, task_api, api_client, operator
):
    original = task_api.create(waiting_spec())
    waiting = task_api.wait(original["id"], "waiting_review")
    client = api_client(operator)
    pending = ToolCall.objects.get(task_id=original["id"], status="awaiting_review")
    head = waiting["head_checkpoint"]
    before = (
        Checkpoint.objects.filter(task_id=original["id"]).count(),
        list(ToolCall.objects.filter(task_id=original["id"]).values_list("call_id", "status")),
    )

    edited = {"path": "notes/b.md", "content": "edited\n"}
    forked = client.post(
        f"/api/v1/tasks/{original['id']}/fork",
        {"checkpoint_id": head, "pending_args": {pending.call_id: edited}, "reason": "try b"},
    )
    assert forked.status_code == 201, forked.content
    sibling = task_api.wait(forked.json()["id"], "succeeded")
    assert sibling["fork_of_id"] == original["id"] and sibling["result"] == "done"

    sibling_ws = Task.objects.get(id=sibling["id"]).workspace_path
    assert (sibling_ws / "a.md").read_text() == "a\n"
    assert (sibling_ws / "notes" / "b.md").read_text() == "edited\n"
    assert not (sibling_ws / "cfg" / "app.conf").exists()
    ran = ToolCall.objects.get(task_id=sibling["id"], tool="write_file", status="succeeded")
    assert ran.arguments == edited

    # The original: still waiting for its review, its files, checkpoints and ledger as before.
    assert task_api.get(original["id"])["status"] == "waiting_review"
    original_ws = Task.objects.get(id=original["id"]).workspace_path
    assert (original_ws / "a.md").read_text() == "a\n"
    assert not (original_ws / "notes").exists()
    after = (
        Checkpoint.objects.filter(task_id=original["id"]).count(),
        list(ToolCall.objects.filter(task_id=original["id"]).values_list("call_id", "status")),
    )
    assert after == before

    # Listed together, and compared with a replay's report: the first step that differs is
    # the one whose call was edited (the original's still waits for review).
    compared = client.get(f"/api/v1/tasks/{original['id']}/compare?other={sibling['id']}").json()
    assert compared["siblings"] == [original["id"], sibling["id"]]
    assert compared["first_divergent_step"] == 2
    added = next(f for f in compared["files"] if f["path"] == "notes/b.md")
    assert added["change"] == "added" and "+edited" in added["text_diff"]


def test_adopting_a_finished_fork_rolls_the_original_forward_to_its_head(
    harness_dirs, workers, task_api, api_client, operator
):
    original = task_api.create(waiting_spec())
    waiting = task_api.wait(original["id"], "waiting_review")
    client = api_client(operator)
    pending = ToolCall.objects.get(task_id=original["id"], status="awaiting_review")
    edited = {"path": "notes/b.md", "content": "edited\n"}
    forked = client.post(
        f"/api/v1/tasks/{original['id']}/fork",
        {"checkpoint_id": waiting["head_checkpoint"], "pending_args": {pending.call_id: edited}},
    ).json()
    task_api.wait(forked["id"], "succeeded")

    adopted = client.post(
        f"/api/v1/tasks/{original['id']}/adopt", {"sibling_id": forked["id"], "reason": "b wins"}
    )
    assert adopted.status_code == 200, adopted.content
    done = task_api.wait(original["id"], "succeeded")
    assert done["result"] == "done"
    workspace = Task.objects.get(id=original["id"]).workspace_path
    assert (workspace / "notes" / "b.md").read_text() == "edited\n"
    assert not (workspace / "cfg" / "app.conf").exists()
    assert AuditEntry.objects.filter(action="adopt", task_id=original["id"]).exists()
