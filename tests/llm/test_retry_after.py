"""A rate-limited model call is retried by the loop's scheduler, never before the server's
Retry-After, on real workers."""

from __future__ import annotations

import pytest

from tasks.models import TaskEvent

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_429_with_retry_after_is_retried_after_that_delay(chat_server, workers, task_api):
    chat_server.error(429, "Rate limit reached for gpt-4o-mini", headers={"Retry-After": "2"})
    chat_server.answer("done")
    created = task_api.create(
        {"title": "rate limited", "goal": "answer", "model": {"kind": "openai"}}
    )

    done = task_api.wait(created["id"], "succeeded")
    assert done["result"] == "done"
    limited, retried = chat_server.requests
    assert retried.at - limited.at >= 2.0
    (scheduled,) = TaskEvent.objects.filter(task_id=created["id"], type="retry_scheduled")
    assert scheduled.payload["error_class"] == "transient"
    assert scheduled.payload["delay_s"] >= 2.0
    assert "Rate limit reached" in scheduled.payload["message"]
