"""A task that failed on its model is retried with another model name (an OpenAI-compatible
endpoint's): the retry runs against the new model and the audit log keeps both names."""

from __future__ import annotations

import pytest

from tasks.models import AuditEntry
from tests.factories import run_in_process
from tests.llm.support import create, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_retry_changes_the_model_and_the_next_turn_asks_it(chat_server, api_client, operator):
    chat_server.error(404, "The model `retired-model` does not exist")
    task = run(create({"kind": "openai", "model": "retired-model"}, []))
    assert (task.status, task.error_class) == ("failed", "model_error")

    chat_server.answer("done")
    response = api_client(operator).post(
        f"/api/v1/tasks/{task.id}/retry", {"reason": "model retired", "model": "gpt-4o-mini"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["spec_changes"] == {
        "before": {"model": "retired-model"},
        "after": {"model": "gpt-4o-mini"},
    }
    assert run_in_process(task) == "succeeded"
    assert [r["model"] for r in chat_server.chat_requests()] == ["retired-model", "gpt-4o-mini"]
    audit = AuditEntry.objects.get(action="retry", task=task)
    assert (audit.before["spec"], audit.after["spec"]) == (
        {"model": "retired-model"},
        {"model": "gpt-4o-mini"},
    )


def test_an_empty_model_name_is_422_naming_the_model(chat_server, api_client, operator):
    chat_server.error(400, "bad request")
    task = run(create({"kind": "openai"}, []))
    assert task.status == "failed"
    response = api_client(operator).post(f"/api/v1/tasks/{task.id}/retry", {"model": ""})
    assert response.status_code == 422 and "model" in response.content.decode()
