"""Retries with backoff through RQ's scheduler, in real workers."""

from __future__ import annotations

from datetime import datetime

import pytest

from tasks.models import ToolCall
from tests.factories import enqueued_task

from .conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_flaky_tool_failing_twice_succeeds_on_the_third_attempt_after_growing_waits(fleet):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "flaky", "args": {"key": "k1", "fail_times": 2, "error": "transient"}},
            {"final": "done"},
        ],
        ["flaky"],
        retry={"initial_s": 0.3, "factor": 2, "jitter": "none", "max_attempts": 5},
    )
    task = wait_status(task.id, "succeeded")

    call = ToolCall.objects.get(task=task)
    assert call.status == "succeeded" and call.attempts == 3
    assert [a["status"] for a in call.attempt_log] == ["failed", "failed", "succeeded"]
    assert [a["error_class"] for a in call.attempt_log] == ["transient", "transient", ""]
    assert "failure 1 of 2" in call.attempt_log[0]["error_message"]

    scheduled = list(task.events.filter(type="retry_scheduled").order_by("id"))
    delays = [e.payload["delay_s"] for e in scheduled]
    assert delays == [0.3, 0.6]
    assert all(e.payload["call_id"] == call.call_id for e in scheduled)
    # Each attempt started no earlier than the wait scheduled after the previous one.
    for before, after, delay in zip(
        call.attempt_log[:-1], call.attempt_log[1:], delays, strict=True
    ):
        gap = (
            datetime.fromisoformat(after["started_at"])
            - datetime.fromisoformat(before["finished_at"])
        ).total_seconds()
        assert gap >= delay

    statuses = [
        (e.payload["from"], e.payload["to"])
        for e in task.events.filter(type="status").order_by("id")
    ]
    assert statuses.count(("running", "retry_wait")) == 2
    assert statuses.count(("retry_wait", "queued")) == 2
    assert task.retry_count == 2
    triggers = list(task.checkpoints.values_list("trigger", flat=True))
    assert triggers.count("on_retryable_error") == 2


def test_permanent_error_is_not_retried_and_reaches_the_model(fleet):
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "flaky", "args": {"key": "k2", "fail_times": 5, "error": "permanent"}},
            {"final": "gave up"},
        ],
        ["flaky"],
    )
    task = wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task)
    assert call.status == "failed" and call.attempts == 1
    assert call.error_class == "permanent"
    assert not task.events.filter(type="retry_scheduled").exists()
    feedback = call.result["observation"]
    assert "failure 1 of 5" in feedback and len(feedback.splitlines()) <= 3


def test_transient_errors_past_the_attempt_limit_go_to_the_model(fleet):
    fleet.worker()
    task = enqueued_task(
        [{"call": "flaky", "args": {"key": "k3", "fail_times": 10}}, {"final": "gave up"}],
        ["flaky"],
        retry={"initial_s": 0.1, "max_attempts": 2},
    )
    task = wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task)
    assert call.status == "failed" and call.attempts == 2
    assert "failed 2 times" in call.result["observation"]
