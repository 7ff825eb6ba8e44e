"""Issue #2 end to end on the real parts: API -> PostgreSQL -> Redis -> rqworker processes."""

from __future__ import annotations

import zlib

import django_rq
import pytest

from agent.jobs import run_task
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_raw
from tasks.models import Task
from tests.factories import scripted_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_scripted_task_runs_in_a_worker_with_checkpoints_of_every_level(
    workers, task_api, api_client, viewer
):
    done = task_api.run(
        scripted_spec(
            [
                {"call": "write_file", "args": {"path": "docs/notes.md", "content": "# Notes\n"}},
                {
                    "calls": [
                        {"call": "read_file", "args": {"path": "docs/notes.md"}},
                        {
                            "call": "append_file",
                            "args": {"path": "docs/notes.md", "content": "more\n"},
                        },
                    ]
                },
                {"final": "notes written"},
            ],
            ["write_file", "read_file", "append_file"],
        )
    )
    assert done["status"] == "succeeded" and done["result"] == "notes written"
    task = Task.objects.get(id=done["id"])
    assert (task.workspace_path / "docs" / "notes.md").read_text() == "# Notes\nmore\n"

    client = api_client(viewer)
    checkpoints = client.get(f"/api/v1/tasks/{task.id}/checkpoints").json()
    assert {c["level"] for c in checkpoints} == {"task", "step", "tool"}
    seqs = [c["seq"] for c in checkpoints]
    assert seqs == sorted(set(seqs)) and all(c["checksum_ok"] for c in checkpoints)
    assert done["head_checkpoint"] == checkpoints[-1]["id"]

    events = client.get(f"/api/v1/tasks/{task.id}/events").json()
    types = [e["type"] for e in events]
    assert types.count("model_decision") == 3
    assert types.count("tool_finished") == 3
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)

    calls = client.get(f"/api/v1/tasks/{task.id}/tool-calls").json()
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("write_file", "succeeded"),
        ("read_file", "succeeded"),
        ("append_file", "succeeded"),
    ]


def test_tampering_with_a_stored_checkpoint_is_reported(workers, task_api, api_client, viewer):
    done = task_api.run(
        scripted_spec([{"call": "list_files", "args": {}}, {"final": "ok"}], ["list_files"])
    )
    victim = Checkpoint.objects.filter(task_id=done["id"]).order_by("seq")[1]
    Checkpoint.objects.filter(pk=victim.pk).update(
        payload=zlib.compress(checkpoint_raw(victim.payload).replace(b"list_files", b"rm_files"))
    )
    rows = api_client(viewer).get(f"/api/v1/tasks/{done['id']}/checkpoints").json()
    flagged = {r["seq"]: r["checksum_ok"] for r in rows}
    assert flagged[victim.seq] is False
    assert all(ok for seq, ok in flagged.items() if seq != victim.seq)


def test_two_workers_handed_the_same_task_run_it_once(workers, task_api, wait_for):
    created = task_api.create(
        scripted_spec(
            [
                {"call": "sleep", "args": {"seconds": 0.5}},
                {"call": "append_file", "args": {"path": "count.txt", "content": "x"}},
                {"final": "done"},
            ],
            ["sleep", "append_file"],
        )
    )
    # The API enqueued one job; hand the same task to the other worker too.
    duplicate = django_rq.get_queue("default").enqueue(run_task, created["id"], job_timeout=-1)
    task_api.wait(created["id"], "succeeded")
    original = django_rq.get_queue("default").fetch_job(
        Task.objects.values_list("rq_job_id", flat=True).get(id=created["id"])
    )
    jobs = [original, duplicate]
    wait_for(
        lambda: all(j.get_status(refresh=True) == "finished" for j in jobs),
        30,
        message="both jobs to finish",
    )
    # Whichever job came first ran the task; the other found it taken and left it alone.
    assert sorted(j.return_value() for j in jobs) == ["skipped", "succeeded"]
    task = Task.objects.get(id=created["id"])
    assert (task.workspace_path / "count.txt").read_text() == "x"
    acquisitions = task.events.filter(type="status", payload__reason="acquired")
    assert acquisitions.count() == 1
    assert task.lease_epoch == 1
