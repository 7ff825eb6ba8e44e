"""Rollback and resume against real rqworker processes (PostgreSQL + Redis)."""

from __future__ import annotations

import pytest

from tests.checkpoints.conftest import files_of

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_rollback_with_resume_reruns_on_a_worker_and_completes_again(
    workers, task_api, app_conf_spec, settings
):
    from tasks.models import Task

    task = task_api.run(app_conf_spec)
    workspace = settings.HARNESS_WORKSPACE_ROOT / task["id"]
    assert (workspace / "app.conf").read_text() == "version = 3\n"
    checkpoints = task_api.client.get(f"/api/v1/tasks/{task['id']}/checkpoints").json()
    after_v1 = next(c for c in checkpoints if c["trigger"] == "after_step" and c["step_index"] == 1)

    response = task_api.client.post(
        f"/api/v1/tasks/{task['id']}/rollback",
        {"checkpoint_id": after_v1["id"], "resume": True, "reason": "v2 broke prod"},
    )
    assert response.status_code == 200, response.content
    assert response.json()["files_deleted"] == ["new.txt"]

    again = task_api.wait(task["id"], "succeeded")
    assert again["rollback_count"] == 1
    assert files_of(workspace) == {"app.conf": b"version = 3\n", "new.txt": b"created after v1\n"}
    events = [e["type"] for e in task_api.client.get(f"/api/v1/tasks/{task['id']}/events").json()]
    assert events.count("rollback") == 1 and "context_aligned" in events
    assert Task.objects.get(id=task["id"]).checkpoints.filter(superseded=True).exists()
