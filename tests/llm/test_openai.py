"""The OpenAI-compatible adapter against a loopback chat-completions server, through the real
loop (in-process) on the real database."""

from __future__ import annotations

import socket
from decimal import Decimal

import pytest

from agent.llm import ModelError
from agent.llm.openai import OpenAIChatModel
from checkpoints.models import Checkpoint
from review.models import ReviewRequest
from review.services import review_decide
from tasks.agent_state import AgentState, Message
from tasks.canonical import canonical_hash
from tasks.models import ToolCall
from tasks.services import SpecError
from tasks.spec import OpenAIModelSpec
from tests.factories import spec_task, task_spec
from tests.llm.chat_server import SERVED_MODEL
from tests.llm.conftest import API_KEY
from tests.llm.support import create, event_payloads, run

pytestmark = pytest.mark.django_db(transaction=True)

OPENAI = {"kind": "openai"}


def test_two_tool_task_completes_with_settings_as_the_only_configuration(chat_server):
    chat_server.tool_calls(("write_file", {"path": "notes.txt", "content": "hello"}))
    chat_server.tool_calls(("read_file", {"path": "notes.txt"}))
    chat_server.answer("notes.txt says hello")
    task = run(create(OPENAI, ["write_file", "read_file"]))

    assert task.status == "succeeded", task.error_message
    assert task.result == "notes.txt says hello"
    assert (task.workspace_path / "notes.txt").read_text() == "hello"
    assert [(c.tool, c.status) for c in ToolCall.objects.filter(task=task)] == [
        ("write_file", "succeeded"),
        ("read_file", "succeeded"),
    ]

    first, second, third = chat_server.requests
    assert first.headers["Authorization"] == f"Bearer {API_KEY}"
    assert first.body["model"] == "gpt-4o-mini"  # HARNESS_MODEL
    tools = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert set(tools) == {"write_file", "read_file"}
    assert tools["write_file"]["parameters"]["required"] == ["path", "content"]
    assert tools["read_file"]["description"].startswith("Read a text file")
    assert [m["role"] for m in first.body["messages"]] == ["system", "user"]
    # The second turn sees its call (our call_id as the tool-call id) and the result.
    assistant, result = second.body["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == "0.0.0"
    assert assistant["tool_calls"][0]["function"] == {
        "name": "write_file",
        "arguments": '{"path": "notes.txt", "content": "hello"}',
    }
    assert result["role"] == "tool" and result["tool_call_id"] == "0.0.0"
    assert third.body["messages"][-1]["tool_call_id"] == "0.1.0"
    assert "hello" in third.body["messages"][-1]["content"]
    assert task.tokens_used == 3 * 120


def test_per_task_model_and_endpoint_override_the_settings(chat_server, settings):
    settings.OPENAI_BASE_URL = "https://api.openai.com/v1"
    settings.HARNESS_MODEL_ENDPOINTS = [chat_server.base_url]
    chat_server.answer("done")
    task = run(
        create(
            {
                "kind": "openai",
                "model": "local-llama",
                "base_url": chat_server.base_url,
                "temperature": 0.2,
                "max_output_tokens": 256,
            },
            [],
        )
    )
    assert task.status == "succeeded"
    body = chat_server.requests[0].body
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("local-llama", 0.2, 256)
    assert "tools" not in body


def test_an_endpoint_the_operator_did_not_allow_is_refused_at_creation(settings):
    settings.HARNESS_MODEL = "gpt-4o-mini"
    settings.HARNESS_MODEL_ENDPOINTS = []
    with pytest.raises(SpecError) as exc:
        create({"kind": "openai", "base_url": "https://collector.example/v1"}, [])
    assert "HARNESS_MODEL_ENDPOINTS" in exc.value.message


def test_a_task_without_a_model_name_is_refused_when_no_default_is_set(settings):
    settings.HARNESS_MODEL = ""
    with pytest.raises(SpecError) as exc:
        create(OPENAI, [])
    assert "HARNESS_MODEL" in exc.value.message


def test_400_fails_the_task_permanently_with_the_servers_message(chat_server):
    chat_server.error(400, "Invalid schema for function 'write_file': 'object' is required")
    task = run(create(OPENAI, ["write_file"]))

    assert task.status == "failed"
    assert task.error_class == "model_error"
    assert "Invalid schema for function 'write_file'" in task.error_message
    assert "HTTP 400" in task.error_message
    assert len(chat_server.requests) == 1


def test_malformed_arguments_get_feedback_and_the_corrected_call_runs(chat_server):
    chat_server.tool_calls(("write_file", '{"path": "a.txt", "content": "hi'))  # cut off
    chat_server.tool_calls(("write_file", {"path": "a.txt", "content": "hi"}))
    chat_server.answer("wrote a.txt")
    task = run(create(OPENAI, ["write_file"]))

    assert task.status == "succeeded"
    assert (task.workspace_path / "a.txt").read_text() == "hi"
    bad, good = ToolCall.objects.filter(task=task).order_by("id")
    assert (bad.status, bad.error_class) == ("failed", "invalid_arguments")
    assert good.status == "succeeded"
    feedback = chat_server.requests[1].body["messages"][-1]
    assert feedback["role"] == "tool" and feedback["tool_call_id"] == bad.call_id
    lines = feedback["content"].splitlines()
    assert len(lines) <= 3 and "not valid JSON" in lines[0]
    assert "path" in lines[1] and "content" in lines[1]
    decision = event_payloads(task, "model_decision")[0]
    assert "not valid JSON" in decision["calls"][0]["raw_error"]


def _approve(task, call_id: str, user) -> None:
    """An operator's approval, through the review service (the worker re-checks it)."""
    call = ToolCall.objects.get(task=task, call_id=call_id)
    review_decide(
        review_id=ReviewRequest.objects.get(tool_call=call, status="pending").id,
        user=user,
        decision="approve",
        arguments_hash=canonical_hash(call.arguments),
    )


def test_several_calls_in_one_turn_each_get_their_own_checkpoint_and_review(chat_server, operator):
    chat_server.tool_calls(
        ("write_file", {"path": "app.conf", "content": "port=8080\n"}),
        ("write_file", {"path": "db.conf", "content": "pool=5\n"}),
        ("read_file", {"path": "app.conf"}),
    )
    chat_server.answer("configured")
    task = run(create(OPENAI, ["write_file", "read_file"]))

    assert task.status == "waiting_review"
    first = ReviewRequest.objects.get(task=task)
    assert first.tool_call.call_id == "0.0.0"
    _approve(task, "0.0.0", operator)
    task = run(task)
    assert task.status == "waiting_review"
    second = ReviewRequest.objects.get(task=task, status="pending")
    assert second.tool_call.call_id == "0.0.1"
    _approve(task, "0.0.1", operator)
    task = run(task)

    assert task.status == "succeeded", task.error_message
    assert (task.workspace_path / "app.conf").read_text() == "port=8080\n"
    assert (task.workspace_path / "db.conf").read_text() == "pool=5\n"
    assert first.checkpoint_id != second.checkpoint_id
    reviewed = Checkpoint.objects.filter(task=task, trigger="before_review")
    assert {c.id for c in reviewed} == {first.checkpoint_id, second.checkpoint_id}
    assert Checkpoint.objects.filter(task=task, trigger="before_write_operation").count() == 2
    assert [c.status for c in ToolCall.objects.filter(task=task).order_by("call_id")] == [
        "succeeded"
    ] * 3
    # Resuming never asked the model again: one turn proposed all three calls.
    assert len(chat_server.requests) == 2
    results = [m for m in chat_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["0.0.0", "0.0.1", "0.0.2"]


def test_tokens_and_cost_are_counted_per_call_and_per_task_and_shown(chat_server, client, viewer):
    # harness.yaml prices gpt-4o-mini (and its dated variants) per 1000 tokens.
    chat_server.tool_calls(("list_files", {}), prompt_tokens=1000, completion_tokens=500)
    chat_server.answer("nothing here", prompt_tokens=2000, completion_tokens=100)
    task = run(create(OPENAI, ["list_files"]))

    decisions = event_payloads(task, "model_decision")
    assert [d["model"] for d in decisions] == [SERVED_MODEL, SERVED_MODEL]
    assert [(d["prompt_tokens"], d["completion_tokens"]) for d in decisions] == [
        (1000, 500),
        (2000, 100),
    ]
    assert decisions[0]["cost_usd"] == pytest.approx(0.00015 + 0.0003)
    assert decisions[1]["cost_usd"] == pytest.approx(0.0003 + 0.00006)
    assert task.tokens_used == 3600
    assert task.cost_usd == Decimal("0.000810")

    client.force_login(viewer)
    page = client.get(f"/tasks/{task.id}/").content.decode()
    assert "$0.00081" in page
    assert "1000" in page and "2000" in page  # prompt tokens per step


def test_replay_reruns_a_task_from_its_recorded_decisions_without_the_model(chat_server, operator):
    chat_server.tool_calls(("write_file", {"path": "a.txt", "content": "one"}))
    chat_server.tool_calls(("append_file", {"path": "a.txt", "content": " two"}))
    chat_server.answer("a.txt has two parts")
    original = run(create(OPENAI, ["write_file", "append_file"]))
    assert original.status == "succeeded"

    # A replay runs for someone who may read the recorded task (tests/security).
    source = {"kind": "replay", "task_id": str(original.id)}
    replay = run(spec_task(task_spec(source, ["write_file", "append_file"]), user=operator))
    assert replay.status == "succeeded"
    assert replay.result == "a.txt has two parts"
    assert (replay.workspace_path / "a.txt").read_text() == "one two"
    assert len(chat_server.requests) == 3  # the replay never called the server
    assert replay.tokens_used == 0


def test_replay_of_a_task_without_decisions_is_refused():
    with pytest.raises(SpecError) as exc:
        create({"kind": "replay", "task_id": "00000000-0000-0000-0000-000000000000"}, [])
    assert exc.value.field == "model.task_id"


# -- error classes, straight at the adapter -------------------------------------------------


def _decide(server_url: str | None = None, *, timeout_s: float = 5.0):
    model = OpenAIChatModel(OpenAIModelSpec(kind="openai", model="m", base_url=server_url))
    state = AgentState(
        messages=[Message(role="system", content="s"), Message(role="user", content="go")]
    )
    return model.decide(state=state, tools=[], timeout_s=timeout_s)


def test_429_is_transient_and_carries_retry_after(chat_server, settings):
    settings.HARNESS_MODEL_ENDPOINTS = ["*"]
    chat_server.error(429, "Rate limit reached for requests", headers={"Retry-After": "7"})
    with pytest.raises(ModelError) as exc:
        _decide(chat_server.base_url)
    assert (exc.value.error_class, exc.value.status, exc.value.retry_after_s) == (
        "transient",
        429,
        7.0,
    )
    assert "Rate limit reached" in str(exc.value)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_transient(chat_server, settings, status):
    settings.HARNESS_MODEL_ENDPOINTS = ["*"]
    chat_server.error(status, "The server had an error while processing your request.")
    with pytest.raises(ModelError) as exc:
        _decide(chat_server.base_url)
    assert exc.value.error_class == "transient" and exc.value.status == status


@pytest.mark.parametrize("status", [401, 403, 404, 422])
def test_other_client_errors_are_permanent(chat_server, settings, status):
    settings.HARNESS_MODEL_ENDPOINTS = ["*"]
    chat_server.error(status, "Incorrect API key provided")
    with pytest.raises(ModelError) as exc:
        _decide(chat_server.base_url)
    assert exc.value.error_class == "permanent"
    assert "Incorrect API key provided" in str(exc.value)


def test_connection_refused_is_transient(settings):
    settings.HARNESS_MODEL_ENDPOINTS = ["*"]
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelError) as exc:
        _decide(f"http://127.0.0.1:{port}/v1")
    assert exc.value.error_class == "transient"


def test_a_server_slower_than_the_turn_timeout_is_transient(settings):
    settings.HARNESS_MODEL_ENDPOINTS = ["*"]
    with socket.socket() as sock:  # accepts the connection, never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ModelError) as exc:
            _decide(f"http://127.0.0.1:{port}/v1", timeout_s=0.3)
    assert exc.value.error_class == "transient"
    assert "layer: turn" in str(exc.value)
