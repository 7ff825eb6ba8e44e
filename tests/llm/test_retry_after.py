"""A rate-limited model call is retried by the loop's scheduler, never before the server's
Retry-After, on real workers."""

from __future__ import annotations

import pytest

from tasks.models import TaskEvent
from tests.conftest import page_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_429_with_retry_after_is_retried_after_that_delay(
    chat_server, workers, task_api, operator
):
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
    # A model retry has no tool call: the task page lists it as an event, not as a call row
    # (a `"call_id": null` read back as text made a call named "null").
    assert "call_id" not in scheduled.payload
    client = page_client(operator)
    page = client.get(f"/tasks/{created['id']}/", {"tab": "events"}).content.decode()
    assert "<td>retry_scheduled</td>" in page
    assert 'data-call="null"' not in page and 'data-call=""' not in page
