"""Layered timeouts: tool < turn < session, each enforced and named in the event it leaves."""

from __future__ import annotations

import pytest

from tasks.models import ToolCall
from tests.conftest import processes_running
from tests.factories import enqueued_task

from .conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def timeout_layers(task) -> list[str]:
    return [e.payload["layer"] for e in task.events.filter(type="timeout").order_by("id")]


def test_tool_timeout_stops_the_call_records_timed_out_and_the_model_carries_on(fleet):
    fleet.worker()
    task = enqueued_task(
        [{"call": "sleep", "args": {"seconds": 30}}, {"final": "moved on"}],
        ["sleep"],
        budget={"tool_timeout_s": 0.5, "turn_timeout_s": 5, "session_timeout_s": 60},
        retry={"max_attempts": 1},
    )
    task = wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task)
    assert call.status == "timed_out" and call.error_class == "timeout"
    assert "(layer: tool)" in call.result["observation"]
    assert timeout_layers(task) == ["tool"]
    assert task.result == "moved on"


def test_run_command_past_its_tool_timeout_is_killed(fleet, commands_allowed):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "run_command", "args": {"command": "exec sleep 60.5"}},
            {"final": "done"},
        ],
        ["run_command"],
        budget={"tool_timeout_s": 0.5, "turn_timeout_s": 5, "session_timeout_s": 60},
    )
    task = wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task)
    # A non-idempotent tool that timed out is not retried: it may have half-acted.
    assert call.status == "timed_out" and call.attempts == 1
    assert timeout_layers(task) == ["tool"]
    assert processes_running("sleep 60.5") == []


def test_turn_timeout_bounds_the_model_call_and_fails_the_task_when_retries_run_out(fleet):
    fleet.worker()
    task = enqueued_task(
        [{"final": "too slow", "delay_s": 30}],
        [],
        budget={"tool_timeout_s": 0.2, "turn_timeout_s": 0.5, "session_timeout_s": 60},
        retry={"initial_s": 0.1, "max_attempts": 2},
    )
    task = wait_status(task.id, "failed")
    assert task.error_class == "timeout"
    assert "(layer: turn)" in task.error_message
    assert timeout_layers(task) == ["turn", "turn"]
    assert task.events.filter(type="retry_scheduled").count() == 1


def test_session_timeout_fails_the_task_after_a_final_checkpoint(fleet):
    fleet.worker()
    task = enqueued_task(
        [{"call": "sleep", "args": {"seconds": 0.4}}] * 20 + [{"final": "never"}],
        ["sleep"],
        budget={"tool_timeout_s": 0.8, "turn_timeout_s": 1, "session_timeout_s": 1.5},
    )
    task = wait_status(task.id, "failed")
    assert task.error_class == "timeout"
    assert "(layer: session)" in task.error_message
    assert timeout_layers(task) == ["session"]
    head = task.checkpoints.order_by("-seq").first()
    assert task.head_checkpoint_id == head.id and head.trigger == "after_step"
    assert 0 < task.steps_used < 20
