"""harness_base/telemetry/ on its own: the context and format of log lines, traces off
costing nothing, and (in this process, against a real OTLP/HTTP receiver) the spans of the
frameworks' runners: Pydantic AI, OpenAI Agents SDK, LangGraph. The traces of real workers:
tests/durable/test_telemetry.py."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agent.jobs import run_task
from bench.telemetry import OtlpReceiver, traces_exported
from harness_base import telemetry
from review.models import ReviewRequest
from tasks.models import Task, ToolCall
from tasks.tracing import segment_span_id
from tests.conftest import wait_for
from tests.factories import graph_spec, run_in_process, scripted_task

ROOT = Path(__file__).resolve().parent.parent


def json_lines(emit) -> list[dict]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(telemetry.JsonFormatter())
    handler.addFilter(telemetry.LogContext())
    logger = logging.getLogger("tests.telemetry")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_log_lines_in_a_run_carry_its_task_call_and_trace_ids_as_json():
    def emit(logger: logging.Logger) -> None:
        logger.info("outside")
        with telemetry.log_context(task_id="t-1", trace_id="ab" * 16):
            logger.info("in the run")
            with telemetry.log_context(call_id="c-7"):
                logger.warning("in a call: %s", "x")
            try:
                raise ValueError("boom")
            except ValueError:
                logger.exception("failed")

    outside, run, call, failed = json_lines(emit)
    assert outside["message"] == "outside"
    assert (outside["task_id"], outside["call_id"], outside["trace_id"]) == (None, None, None)
    assert (run["task_id"], run["call_id"], run["trace_id"]) == ("t-1", None, "ab" * 16)
    assert call["message"] == "in a call: x" and call["level"] == "WARNING"
    assert (call["task_id"], call["call_id"], call["trace_id"]) == ("t-1", "c-7", "ab" * 16)
    assert failed["call_id"] is None and "ValueError: boom" in failed["exc_info"]
    assert run["logger"] == "tests.telemetry" and run["time"].endswith("+00:00")


def test_the_json_format_is_chosen_by_harness_log_format_and_a_bad_value_is_named():
    def settings_of(value: str) -> subprocess.CompletedProcess:
        code = (
            "import logging, django; django.setup(); "
            "print(type(logging.getLogger().handlers[0].formatter).__name__)"
        )
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "HARNESS_LOG_FORMAT": value},
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert settings_of("json").stdout.strip() == "JsonFormatter"
    assert settings_of("plain").stdout.strip() == "Formatter"
    bad = settings_of("xml")
    assert bad.returncode != 0 and "HARNESS_LOG_FORMAT='xml'" in bad.stderr


def test_with_traces_off_a_worker_never_imports_the_tracing_sdk():
    # (redis-py imports the SDK's metrics for its own observability: not ours to avoid.)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_") and k != "HARNESS_LOG_FORMAT"
    }
    code = (
        "import sys, django; django.setup(); import agent.worker, agent.jobs; "
        "from harness_base import telemetry; "
        "assert not telemetry.enabled(); "
        "print(sorted(m for m in sys.modules if m.startswith(("
        "'opentelemetry.sdk.trace', 'opentelemetry.exporter'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "HARNESS_WORKER_PRELOAD": "none"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.django_db(transaction=True)
def test_a_sub_agent_runs_in_its_group_s_trace_and_conversation(harness_dirs):
    """A multi-agent group is one trace and one conversation: the root task's."""
    with OtlpReceiver() as receiver, traces_exported(receiver.endpoint):
        root = scripted_task([{"final": "planned"}])
        assert run_in_process(root) == "succeeded"
        child = scripted_task(
            [{"final": "found"}], parent=root, parent_call_id="c-1", agent_name="researcher"
        )
        assert run_in_process(child) == "succeeded"
        spans = wait_for(
            lambda: (
                len(named := [s for s in receiver.snapshot() if "invoke_agent" in s.name]) == 2
                and named
            ),
            15,
            message="both tasks' run segments",
        )
    by_task = {s.attributes["gen_ai.agent.id"]: s for s in spans}
    first, sub = by_task[str(root.id)], by_task[str(child.id)]
    assert first.trace_id == sub.trace_id == root.id.hex
    assert first.parent_span_id == "" and first.span_id == f"{segment_span_id(root.id, 1):016x}"
    assert sub.parent_span_id == first.span_id
    assert sub.name == "invoke_agent researcher"
    assert sub.attributes["gen_ai.agent.name"] == "researcher"
    assert sub.attributes["gen_ai.conversation.id"] == str(root.id)
    assert first.attributes["gen_ai.conversation.id"] == str(root.id)


# --- the frameworks' runners: their tool attempts and model calls as spans ------------------

FRAMEWORKS = """
openai_agents:
  writer: "tests.durable.openai_agents:writer"
  flaky_writer: "tests.durable.openai_agents:flaky_writer"
  breaks: "tests.durable.openai_agents:breaks"
pydantic_ai_agents:
  release_notes: "examples.pydantic_ai_agent:agent"
langgraph_graphs:
  announcer: "examples.langgraph_agent:graph"
"""


@pytest.fixture
def frameworks(harness_dirs, harness_yaml, quiet_watchdog) -> None:
    harness_yaml(FRAMEWORKS)


def spans_of(receiver: OtlpReceiver, task_id, *, tools: set[str], chats: int) -> list:
    """The task's spans, once the tool attempts named and `chats` model calls arrived."""

    def arrived() -> list | None:
        spans = [s for s in receiver.snapshot() if s.trace_id == task_id.hex]
        done = {s.attributes.get("gen_ai.tool.name") for s in spans if "execute_tool" in s.name}
        chat_count = sum(s.attributes.get("gen_ai.operation.name") == "chat" for s in spans)
        return spans if tools <= done and chat_count >= chats else None

    return wait_for(arrived, 15, message=f"spans of {sorted(tools)} and {chats} model calls")


def tool_spans(spans: list, tool: str) -> list:
    return [s for s in spans if s.name == f"execute_tool {tool}"]


def segment(task_id, epoch: int) -> str:
    return f"{segment_span_id(task_id, epoch):016x}"


def approve_and_run(task_id, api_client, operator) -> str:

    review = ReviewRequest.objects.get(task_id=task_id, status="pending")
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    return run_task(str(task_id))


@pytest.mark.django_db(transaction=True)
def test_pydantic_ai_tool_attempts_and_model_calls_are_spans_of_their_segment(
    frameworks, task_api, api_client, operator
):

    spec = {
        "title": "notes",
        "goal": "write and publish the release notes",
        "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "faster search"},
    }
    with OtlpReceiver() as receiver, traces_exported(receiver.endpoint):
        task = Task.objects.get(id=task_api.create(spec)["id"])
        assert run_task(str(task.id)) == "paused"
        assert approve_and_run(task.id, api_client, operator) == "succeeded"
        spans = spans_of(receiver, task.id, tools={"write_note", "publish"}, chats=3)
    rows = {row.tool: row for row in ToolCall.objects.filter(task=task)}
    (write,) = tool_spans(spans, "write_note")
    (publish,) = tool_spans(spans, "publish")
    # The call's idempotency key, in the segment that ran it (publish: after the approval).
    assert write.attributes["gen_ai.tool.call.id"] == rows["write_note"].call_id
    assert write.attributes["harness.tool.status"] == "succeeded"
    assert write.attributes["harness.tool.attempt"] == 1 and write.status_code != 2
    assert write.parent_span_id == segment(task.id, 1)
    assert publish.attributes["gen_ai.tool.call.id"] == rows["publish"].call_id
    assert publish.parent_span_id == segment(task.id, 2)
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert {s.parent_span_id for s in chats} == {segment(task.id, 1), segment(task.id, 2)}
    for chat in chats:
        assert chat.name == f"chat {chat.attributes['gen_ai.request.model']}"
        assert chat.attributes["gen_ai.request.model"].startswith("function")
        assert chat.attributes["gen_ai.provider.name"] == "function"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    reasons = [c.attributes["gen_ai.response.finish_reasons"] for c in chats]
    assert reasons.count(["tool_call"]) == 2


@pytest.mark.django_db(transaction=True)
def test_openai_agents_tool_attempts_and_model_calls_are_spans_and_failed_ones_are_errors(
    frameworks, task_api
):

    def spec(name: str) -> dict:
        return {
            "title": name,
            "goal": f"task {uuid.uuid4().hex}: do it",
            "agent": {"kind": "openai-agents", "name": name},
        }

    with OtlpReceiver() as receiver, traces_exported(receiver.endpoint):
        task = Task.objects.get(id=task_api.create(spec("writer"))["id"])
        assert run_task(str(task.id)) == "paused"  # publish waits for a review
        spans = spans_of(receiver, task.id, tools={"write_file", "record"}, chats=3)
        flaky = Task.objects.get(id=task_api.create(spec("flaky_writer"))["id"])
        run_task(str(flaky.id))  # the model endpoint is down once: a retry is scheduled
        failed = wait_for(
            lambda: [
                s
                for s in receiver.snapshot()
                if s.trace_id == flaky.id.hex and s.name.startswith("chat") and s.status_code == 2
            ],
            15,
            message="the failed model call's span",
        )
        broken = Task.objects.get(id=task_api.create(spec("breaks"))["id"])
        assert run_task(str(broken.id)) == "failed"  # fetch raised: the run fails
        (fetch,) = wait_for(
            lambda: [
                s
                for s in receiver.snapshot()
                if s.trace_id == broken.id.hex and s.name == "execute_tool fetch"
            ],
            15,
            message="the raising tool's span",
        )
    rows = {
        (r.tool, r.arguments.get("path") or r.arguments.get("key")): r
        for r in ToolCall.objects.filter(task=task)
    }
    writes = tool_spans(spans, "write_file")
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in writes) == sorted(
        [rows[("write_file", "a.txt")].call_id, rows[("write_file", "b.txt")].call_id]
    )
    (record,) = tool_spans(spans, "record")
    assert record.attributes["gen_ai.tool.call.id"] == rows[("record", "b")].call_id
    assert not tool_spans(spans, "publish")  # not run: it waits for its review
    for traced in [*writes, record]:
        assert traced.parent_span_id == segment(task.id, 1)
        assert traced.attributes["harness.tool.status"] == "succeeded"
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 3
    for chat in chats:
        assert chat.parent_span_id == segment(task.id, 1)
        assert chat.name == "chat CountingModel"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 12
        assert chat.attributes["gen_ai.usage.output_tokens"] == 5
        assert chat.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    (down,) = failed  # its second call: the endpoint was down
    assert down.status_code == 2 and down.attributes["error.type"] == "ConnectionError"
    assert down.parent_span_id == segment(flaky.id, 1)
    fetched = ToolCall.objects.get(task=broken, tool="fetch")
    assert fetch.attributes["gen_ai.tool.call.id"] == fetched.call_id
    assert fetch.status_code == 2 and fetch.attributes["error.type"] == "ConnectionError"
    assert fetch.attributes["harness.tool.status"] == "failed"
    assert fetch.parent_span_id == segment(broken.id, 1)


@pytest.mark.django_db(transaction=True)
def test_langgraph_tool_attempts_and_model_calls_are_spans_of_their_segment(
    frameworks, task_api, api_client, operator
):

    spec = graph_spec(
        "announcer",
        {"messages": [{"role": "user", "content": '{"channel": "#general", "text": "v1.5"}'}]},
        title="announce",
        goal="announce the release",
    )
    with OtlpReceiver() as receiver, traces_exported(receiver.endpoint):
        task = Task.objects.get(id=task_api.create(spec)["id"])
        assert run_task(str(task.id)) == "paused"
        assert approve_and_run(task.id, api_client, operator) == "succeeded"
        spans = spans_of(receiver, task.id, tools={"send_announcement"}, chats=2)
    row = ToolCall.objects.get(task=task)
    (sent,) = tool_spans(spans, "send_announcement")
    # The reviewed call: its ledger row's call id, run in the segment after the approval.
    assert sent.attributes["gen_ai.tool.call.id"] == row.call_id
    assert sent.attributes["harness.tool.status"] == "succeeded" and sent.status_code != 2
    assert sent.parent_span_id == segment(task.id, 2)
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert [c.parent_span_id for c in chats] == [segment(task.id, 1), segment(task.id, 2)]
    for chat in chats:
        assert chat.name == "chat scripted-example"
        assert chat.attributes["gen_ai.request.model"] == "scripted-example"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ["stop"]
