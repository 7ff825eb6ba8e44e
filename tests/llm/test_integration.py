"""An OpenAI-pointed task on real rqworkers: configured by environment alone, it runs through
the same checkpoints and reviews as the scripted model."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tests.llm.conftest import API_KEY

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_openai_task_configured_by_environment_runs_on_workers_through_review(
    chat_server, workers, task_api, api_client, operator
):
    chat_server.tool_calls(
        ("write_file", {"path": "app.conf", "content": "port=8080\n"}),
        ("read_file", {"path": "app.conf"}),
    )
    chat_server.answer("app.conf now sets port=8080", prompt_tokens=1000, completion_tokens=10)
    created = task_api.create(
        {
            "title": "configure",
            "goal": "Set the port to 8080 in app.conf",
            "model": {"kind": "openai"},
            "tools": ["write_file", "read_file"],
        }
    )

    task_api.wait(created["id"], "waiting_review")
    operator_api = api_client(operator)
    (review,) = operator_api.get(
        "/api/v1/reviews", {"status": "pending", "task_id": created["id"]}
    ).json()
    assert (review["tool"], review["call_id"]) == ("write_file", "0.0.0")
    decided = operator_api.post(
        f"/api/v1/reviews/{review['id']}/decision",
        {"decision": "approve", "arguments_hash": review["arguments_hash"]},
    )
    assert decided.status_code == 200, decided.content

    done = task_api.wait(created["id"], "succeeded")
    assert done["result"] == "app.conf now sets port=8080"
    assert done["tokens_used"] == 120 + 1010
    assert done["cost_usd"] > 0
    assert all(r.headers["Authorization"] == f"Bearer {API_KEY}" for r in chat_server.requests)
    assert len(chat_server.requests) == 2  # the resumed run never re-asked the model
    triggers = set(
        Checkpoint.objects.filter(task_id=created["id"]).values_list("trigger", flat=True)
    )
    assert {
        "task_start",
        "after_model",
        "before_review",
        "before_write_operation",
        "after_step",
    } <= triggers
    calls = operator_api.get(f"/api/v1/tasks/{created['id']}/tool-calls").json()
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("write_file", "succeeded"),
        ("read_file", "succeeded"),
    ]
