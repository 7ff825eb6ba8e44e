"""/ops/ and `GET /api/v1/ops/workers` tell the truth about real rqworker processes: named
`host:pid` as the task page names them, linked both ways, and a worker killed with SIGKILL
shown dead (not busy with a fresh heartbeat), then gone once the sweep removes it."""

from __future__ import annotations

import socket

import pytest

from agent.sweep import sweep_once
from tests.conftest import ApiClient, wait_for
from tests.durable.conftest import wait_status
from tests.factories import enqueued_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def workers_api(user) -> dict[str, dict]:
    response = ApiClient(user).get("/api/v1/ops/workers")
    assert response.status_code == 200, response.content
    return {w["name"]: w for w in response.json()}


def test_a_killed_worker_is_shown_dead_then_removed(fleet, as_user, viewer, settings):
    [process] = fleet.worker(1)
    name = f"{socket.gethostname()}:{process.pid}"
    # Registered, it is `started` until its warm-up is done (tool schemas built before it
    # forks), then `idle`.
    shown = wait_for(
        lambda: (w := workers_api(viewer)[name])["state"] == "idle" and w, 30, message="idle"
    )
    assert (shown["host"], shown["pid"]) == (socket.gethostname(), process.pid)
    assert shown["queues"] == ["resume", "high", "default", "low"]

    task = enqueued_task([{"call": "sleep", "args": {"seconds": 60}}, {"final": "x"}], ["sleep"])
    wait_status(task.id, "running")
    busy = wait_for(
        lambda: (w := workers_api(viewer)[name])["state"] == "busy" and w, 30, message="busy"
    )
    assert busy["current_task_id"] == str(task.id)
    task.refresh_from_db()
    assert busy["task_worker_id"] == task.worker_id
    # The task page names the worker as /ops/ does and links to its row; /ops/ links back.
    client = as_user(viewer)
    page = client.get(f"/tasks/{task.id}/").content.decode()
    assert f'href="/ops/#worker-{name}" data-testid="task-worker-link">{name}</a>' in page
    ops = client.get("/ops/").content.decode()
    assert f'<tr id="worker-{name}"' in ops
    assert f'href="/tasks/{task.id}/" data-testid="worker-task-{name}"' in ops

    fleet.pool.kill(process)

    dead = workers_api(viewer)[name]
    assert dead["state"] == "dead"
    assert f'data-testid="worker-state-{name}">dead<' in client.get("/ops/").content.decode()
    settings.HARNESS_WORKER_DEAD_SHOWN_S = 0
    sweep_once()  # first sighting: still shown, dead
    assert workers_api(viewer)[name]["state"] == "dead"
    sweep_once()
    assert name not in workers_api(viewer)
    assert name not in client.get("/ops/").content.decode()
