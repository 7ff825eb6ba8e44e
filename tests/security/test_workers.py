"""Attacks on the workers themselves, against real `rqworker` processes and the sweep: patterns
that would backtrack forever, a call stuck holding the interpreter, commands that try to outlive
a cancel, and destructive commands that must reach a human."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.recovery import task_cancel
from tasks.models import Task, TaskEvent, ToolCall
from tests.conftest import processes_running, wait_for
from tests.durable.conftest import wait_status
from tests.factories import enqueued_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVIL = "(a+)+$"
VICTIM = "a" * 40 + "!"


def test_a_catastrophic_check_pattern_neither_hangs_nor_blocks_the_next_task(fleet):
    fleet.worker()
    fleet.sweeper()
    evil = enqueued_task(
        [{"final": VICTIM}, {"final": "aaaa"}],
        [],
        checks={"regex": EVIL},
        title="evil",
    )
    normal = enqueued_task([{"final": "done"}], [], title="normal")

    assert wait_status(evil.id, "succeeded").result == "aaaa"
    assert wait_status(normal.id, "succeeded").result == "done"
    checked = TaskEvent.objects.filter(task=evil, type="final_checked").order_by("id")
    assert [e.payload["passed"] for e in checked] == [False, True]


def test_a_catastrophic_search_pattern_neither_hangs_nor_blocks_the_next_task(fleet):
    fleet.worker()
    fleet.sweeper()
    evil = enqueued_task(
        [{"call": "search_text", "args": {"pattern": EVIL}}, {"final": "searched"}],
        ["search_text"],
        workspace={"files": {"victim.txt": (VICTIM + "\n") * 1000}},
        title="evil",
    )
    normal = enqueued_task([{"final": "done"}], [], title="normal")

    assert wait_status(evil.id, "succeeded").result == "searched"
    assert wait_status(normal.id, "succeeded").result == "done"
    call = ToolCall.objects.get(task=evil)
    assert call.status == "succeeded" and call.result["matches"] == []


def test_a_pattern_that_needs_backtracking_is_refused_at_creation(task_api):
    spec = {
        "title": "backref",
        "goal": "g",
        "model": {"kind": "scripted", "script": [{"final": "x"}]},
        "checks": {"regex": "(a+)\\1$"},
    }

    response = task_api.client.post("/api/v1/tasks", spec)

    assert response.status_code == 422
    assert "regex" in response.content.decode()
    assert "RE2" in response.content.decode()
    assert not Task.objects.exists()


def test_a_call_stuck_holding_the_interpreter_is_seen_as_busy_and_ends_on_cancel(fleet, operator):
    fleet.worker()
    fleet.sweeper()
    stuck = enqueued_task(
        [{"call": "hold_interpreter", "args": {"seconds": 60}}, {"final": "never"}],
        ["hold_interpreter"],
        budget={"tool_timeout_s": 1, "turn_timeout_s": 5, "session_timeout_s": 120},
        title="stuck",
    )
    call = wait_for(
        lambda: ToolCall.objects.filter(task=stuck, status="running").first(),
        60,
        message="the stuck call to start",
    )
    # The horse's own heartbeat thread cannot run; the supervisor's keeps the task alive well
    # past the stale-after time (1.2 s), so the sweep never takes it for a dead worker.
    wait_for(
        lambda: Task.objects.get(id=stuck.id).heartbeat_at > call.started_at + timedelta(seconds=4),
        30,
        message="heartbeats while the call is stuck",
    )
    task_cancel(task_id=stuck.id, user=operator, reason="stuck")

    stuck = wait_status(stuck.id, "canceled", timeout=60)
    statuses = [e.payload["to"] for e in TaskEvent.objects.filter(task=stuck, type="status")]
    assert "stalled" not in statuses and stuck.redispatch_count == 0
    assert "was killed" in stuck.error_message

    normal = enqueued_task([{"final": "done"}], [], title="normal")
    assert wait_status(normal.id, "succeeded").result == "done"


def test_a_canceled_command_leaves_no_detached_process(fleet, operator, commands_allowed):
    fleet.worker()
    marker = "sleep 3600.75"
    task = enqueued_task(
        [
            {"call": "run_command", "args": {"command": f"setsid {marker} & exec {marker}"}},
            {"final": "never"},
        ],
        ["run_command"],
    )
    wait_for(lambda: len(processes_running(marker)) >= 2, 60, message="the command to start")

    task_cancel(task_id=task.id, user=operator, reason="stop")

    wait_status(task.id, "canceled")
    assert processes_running(marker) == []


@pytest.mark.parametrize(
    "command", ["rm -fr /", "rm -r -f /", "rm -Rf /", "find / -delete", "curl x | sh"]
)
def test_destructive_commands_wait_for_a_human(fleet, command):
    fleet.worker()
    task = enqueued_task(
        [{"call": "run_command", "args": {"command": command}}, {"final": "x"}], ["run_command"]
    )

    task = wait_status(task.id, "waiting_review")
    call = ToolCall.objects.get(task=task)
    assert call.status == "awaiting_review"
    assert f"$ {command}" in call.reviews.get().preview
