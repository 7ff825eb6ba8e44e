"""The rollback preview is the rollback's own plan (checkpoints.selectors.rollback_plan): what a
command planted after a checkpoint — a symlink, a folder, a file — and every call undone are
listed, on the API and the page, and the rollback removes exactly that."""

from __future__ import annotations

import os

import pytest

from checkpoints.models import Checkpoint
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, checkpoint_after_step, files_of
from tests.conftest import page_client
from tests.factories import run_in_process, scripted_spec, spec_task

pytestmark = pytest.mark.django_db

PLANT = "ln -s /etc/passwd link; mkdir -p planted/empty; echo new > new.txt"


@pytest.fixture
def planted(operator, harness_yaml, commands_allowed, settings, harness_dirs):
    """A task that wrote a.txt (step 0), then planted a link, folders and a file with a
    command (step 1), then wrote b.txt with write_file (step 2)."""
    settings.HARNESS_BLOB_DIR = harness_dirs / "blobs"
    harness_yaml(NO_REVIEW_CONFIG)
    task = spec_task(
        scripted_spec(
            [
                {"call": "write_file", "args": {"path": "a.txt", "content": "kept\n"}},
                {"call": "run_command", "args": {"command": PLANT}},
                {"call": "write_file", "args": {"path": "b.txt", "content": "later\n"}},
                {"final": "done"},
            ],
            ["write_file", "run_command"],
        ),
        user=operator,
    )
    assert run_in_process(task) == "succeeded"
    assert os.path.islink(task.workspace_path / "link")
    return task


def _preview(client, task, checkpoint) -> dict:
    response = client.get(
        f"/api/v1/tasks/{task.id}/rollback/preview", {"checkpoint_id": str(checkpoint.id)}
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_the_preview_lists_planted_links_folders_and_files_and_the_rollback_removes_them(
    planted, api_client, operator
):
    client = api_client(operator)
    target = checkpoint_after_step(planted, 1)

    preview = _preview(client, planted, target)
    page = page_client(operator).get(f"/tasks/{planted.id}/checkpoints/{target.id}/rollback/")

    assert preview["files_delete"] == ["b.txt", "new.txt"]
    assert preview["links_delete"] == ["link"]
    assert preview["folders_delete"] == ["planted", "planted/empty"]
    assert [c["tool"] for c in preview["calls_undone"]] == ["run_command", "write_file"]
    html = page.content.decode()
    for shown in ("link", "planted/empty/", "new.txt", "b.txt", "run_command"):
        assert f"<code>{shown}</code>" in html or f">{shown}<" in html, shown

    done = client.post(
        f"/api/v1/tasks/{planted.id}/rollback",
        {"checkpoint_id": str(target.id), "resume": False, "reason": "planted"},
    ).json()

    assert done["files_deleted"] == preview["files_delete"]
    assert done["links_deleted"] == preview["links_delete"]
    assert done["folders_deleted"] == preview["folders_delete"]
    assert sorted(os.listdir(planted.workspace_path)) == ["a.txt"]
    assert files_of(planted.workspace_path) == {"a.txt": b"kept\n"}
    assert open("/etc/passwd").read()  # the link was removed, never followed


def test_a_rollback_to_the_checkpoint_before_a_write_lists_that_write(
    planted, api_client, operator
):
    client = api_client(operator)
    # Taken as write_file b.txt was about to run: going back to it deletes b.txt and runs
    # the call again.
    before_write = Checkpoint.objects.filter(
        task=planted, trigger="before_write_operation", step_index=2
    ).get()

    preview = _preview(client, planted, before_write)

    assert preview["files_delete"] == ["b.txt"]
    assert [(c["tool"], c["arguments"].get("path")) for c in preview["calls_undone"]] == [
        ("write_file", "b.txt")
    ]
    done = client.post(
        f"/api/v1/tasks/{planted.id}/rollback",
        {"checkpoint_id": str(before_write.id), "resume": False, "reason": "again"},
    ).json()
    assert done["files_deleted"] == ["b.txt"]
    assert not (planted.workspace_path / "b.txt").exists()
