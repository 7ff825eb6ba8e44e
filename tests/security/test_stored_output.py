"""What cannot be refused at the door is stored safely: a command printing NUL bytes and a
model reporting an absurd token count finish the task normally (they crashed the worker)."""

from __future__ import annotations

import pytest

from tasks.models import ToolCall
from tasks.spec import MAX_TURN_TOKENS
from tests.llm.chat_server import ChatServer
from tests.llm.support import create, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_command_output_with_nul_bytes_is_stored_and_the_task_succeeds(commands_allowed):
    task = run(
        create(
            {
                "kind": "scripted",
                "script": [
                    {"call": "run_command", "args": {"command": "printf 'a\\000b'"}},
                    {"final": "done"},
                ],
            },
            ["run_command"],
        )
    )
    assert task.status == "succeeded", (task.error_class, task.error_message)
    call = ToolCall.objects.get(task=task)
    assert call.status == "succeeded"
    assert "a\ufffdb" in str(call.result)


def test_an_absurd_token_count_from_a_model_server_is_clamped(settings, monkeypatch):
    server = ChatServer().start()
    try:
        settings.OPENAI_BASE_URL = server.base_url
        settings.HARNESS_MODEL = "gpt-4o-mini"
        server.answer("done", prompt_tokens=10**30, completion_tokens=10**30)
        task = run(create({"kind": "openai"}, [], budget={"max_tokens": 10**15}))
    finally:
        server.stop()
    assert task.status == "succeeded", (task.error_class, task.error_message)
    assert task.tokens_used == MAX_TURN_TOKENS
