"""A rollback's compensations on real workers (issue #44): a task opens two tickets through the
example user tool and writes a file; rolling back to before the first ticket closes both, the
newer first, each compensation under a key derived from its original's, exactly once — also
when the worker running them is killed (SIGKILL, its horse with it) between the two."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
from django.db import transaction

from tasks.models import Task, ToolCall
from tests.conftest import ApiClient, wait_for
from tests.factories import enqueued_task

from .conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCRIPT = [
    {"call": "write_file", "args": {"path": "notes.txt", "content": "v1\n"}},
    {"call": "open_ticket", "args": {"title": "API down", "severity": 1}},
    {"call": "open_ticket", "args": {"title": "DB slow", "severity": 2}},
    {"call": "write_file", "args": {"path": "notes.txt", "content": "v2\n"}},
    {"final": "filed"},
]


@pytest.fixture
def tracker_file(settings, fleet, tmp_path, monkeypatch) -> Path:
    path = tmp_path / "tracker.json"
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    monkeypatch.setenv("HARNESS_EXAMPLE_TRACKER", str(path))
    fleet.pool.env.update(
        HARNESS_TOOL_MODULES="examples.ticket_tools", HARNESS_EXAMPLE_TRACKER=str(path)
    )
    return path


def tickets(path: Path) -> dict[str, dict]:
    return {t["key"]: t for t in json.loads(path.read_text())["tickets"]}


class TrackerLock:
    """Holds the example tracker's lock: a ticket tool blocks inside, its intent recorded and
    its effect not yet made, until released."""

    def __init__(self, path: Path) -> None:
        self.fd: int | None = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def call_status(task_id, call_id: str) -> str | None:
    return (
        ToolCall.objects.filter(task_id=task_id, call_id=call_id)
        .values_list("status", flat=True)
        .first()
    )


@pytest.mark.parametrize("point", ["before_first_effect", "after_first_effect"])
def test_rollback_closes_both_tickets_once_even_when_the_worker_is_killed(
    fleet, tracker_file, operator, point
):
    fleet.worker(2)
    fleet.sweeper()
    task = enqueued_task(SCRIPT, ["write_file", "open_ticket"])
    wait_status(task.id, "succeeded")
    first, second = ToolCall.objects.filter(task=task, tool="open_ticket").order_by("id")
    assert set(tickets(tracker_file)) == {"OPS-1", "OPS-2"}
    api = ApiClient(operator)
    target = task.checkpoints.get(trigger="after_step", step_index=1, superseded=False)

    preview = api.get(
        f"/api/v1/tasks/{task.id}/rollback/preview", {"checkpoint_id": str(target.id)}
    ).json()
    assert [(c["tool"], c["arguments"]) for c in preview["compensations"]] == [
        ("close_ticket", {"key": "OPS-2"}),
        ("close_ticket", {"key": "OPS-1"}),
    ]
    assert preview["files_restore"] == ["notes.txt"] and preview["irreversible"] == []

    undo_first, undo_second = f"{first.call_id}~undo", f"{second.call_id}~undo"
    lock = TrackerLock(tracker_file)
    try:
        response = api.post(
            f"/api/v1/tasks/{task.id}/rollback",
            {"checkpoint_id": str(target.id), "resume": True, "reason": "wrong outage"},
        )
        assert response.status_code == 200, response.content
        # The newer ticket's compensation first: its intent is durable, its effect waits.
        wait_for(lambda: call_status(task.id, undo_second) == "running", message="intent")
        assert call_status(task.id, undo_first) is None
        if point == "before_first_effect":
            fleet.kill_worker_of(task.id)
            lock.release()
        else:
            with transaction.atomic():
                # Holding the task row keeps the worker from recording the outcome...
                Task.objects.select_for_update().get(id=task.id)
                lock.release()
                wait_for(
                    lambda: tickets(tracker_file)["OPS-2"]["status"] == "closed",
                    message="the first compensation's effect",
                )
                # ...and its sessions die with it: killed between the two compensations.
                fleet.kill_worker_of(task.id, terminate_backends=True)
    finally:
        lock.release()

    task = wait_status(task.id, "succeeded", timeout=90)
    assert task.redispatch_count >= 1
    final = tickets(tracker_file)
    assert (final["OPS-1"]["status"], final["OPS-2"]["status"]) == ("closed", "closed")
    # Each closed under its compensation's own key, derived from the original's.
    assert final["OPS-2"]["closed_by"] == f"{task.id}:{undo_second}"
    assert final["OPS-1"]["closed_by"] == f"{task.id}:{undo_first}"
    # One ledger row per compensation, newer first; the interrupted one ran again under the
    # same key (an idempotent tool), so the tracker closed each ticket once.
    closes = list(ToolCall.objects.filter(task=task, tool="close_ticket").order_by("id"))
    assert [(c.call_id, c.status) for c in closes] == [
        (undo_second, "succeeded"),
        (undo_first, "succeeded"),
    ]
    assert closes[1].attempts == 1 and closes[1].result == {"key": "OPS-1", "closed": True}
    if point == "after_first_effect":
        assert closes[0].result["already_closed"] is True
    assert task.events.filter(type="compensations_done").count() == 1
    assert (task.workspace_path / "notes.txt").read_text() == "v2\n"  # the agent ran again
