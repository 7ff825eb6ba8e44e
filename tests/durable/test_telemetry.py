"""OpenTelemetry traces and JSON logs from real rqworker processes, against a real OTLP/HTTP
receiver (bench.telemetry.OtlpReceiver decodes the protobuf with opentelemetry-proto)."""

from __future__ import annotations

import json

import pytest

from bench.telemetry import OtlpReceiver, ReceivedSpan
from checkpoints.recovery import checkpoint_rollback
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall
from tasks.tracing import segment_span_id
from tests.conftest import approve, free_port, page_client, wait_for
from tests.factories import enqueued_task

from .conftest import TEST_CONFIG, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

GOAL_MARK = "secret-goal-text-4711"
RETRY = {"initial_s": 0.2, "factor": 2, "jitter": "none", "max_attempts": 4}


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + "review_rules:\n  - {name: deletes, tool: delete_file, action: review}\n"


def reviewed_retried_task() -> Task:
    """delete_file (reviewed), flaky (fails once, retried after a backoff), final answer."""
    return enqueued_task(
        [
            {"call": "delete_file", "args": {"path": "old.log"}},
            {"call": "flaky", "args": {"key": "trace-k", "fail_times": 1, "error": "transient"}},
            {"final": "done"},
        ],
        ["delete_file", "flaky"],
        goal=GOAL_MARK,
        workspace={"files": {"old.log": "stale\n"}},
        retry=RETRY,
    )


def spans_when(receiver: OtlpReceiver, predicate, message: str) -> list[ReceivedSpan]:
    return wait_for(
        lambda: (spans := receiver.snapshot()) and predicate(spans) and spans,
        30,
        message=message,
    )


def named(spans: list[ReceivedSpan], prefix: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def test_review_approval_retry_and_rollback_make_one_connected_trace(fleet, operator, settings):
    with OtlpReceiver() as receiver:
        fleet.pool.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        fleet.worker()
        task = reviewed_retried_task()
        wait_status(task.id, "waiting_review")
        review = ReviewRequest.objects.get(task=task, status="pending")
        approve(review, operator)
        wait_status(task.id, "succeeded")
        # Roll back to the end of the flaky call's step and resume: the final turn again.
        target = task.checkpoints.filter(trigger="after_step").order_by("seq").last()
        checkpoint_rollback(
            task_id=task.id, checkpoint_id=target.id, user=operator, reason="redo", resume=True
        )
        wait_for(
            lambda: (
                Task.objects.get(id=task.id).status == "succeeded"
                and Task.objects.get(id=task.id).lease_epoch == 4
            ),
            30,
            message="the rolled back task to succeed again",
        )
        spans = spans_when(
            receiver,
            lambda s: len(named(s, "invoke_agent")) == 4 and len(named(s, "chat")) == 4,
            "4 run segments and 4 model calls",
        )

    trace_id = task.id.hex
    assert {span.trace_id for span in spans} == {trace_id}
    assert {span.resource["service.name"] for span in spans} == {"agent-harness"}
    segments = sorted(named(spans, "invoke_agent"), key=lambda s: s.attributes["harness.run.epoch"])
    ids = [f"{segment_span_id(task.id, epoch):016x}" for epoch in (1, 2, 3, 4)]
    assert [s.span_id for s in segments] == ids
    # The first segment is the root; each later one is its child and follows from (links to)
    # the segment before it: the one that paused for the review, for the retry, or ended.
    assert segments[0].parent_span_id == "" and segments[0].links == []
    for before, after in zip(segments, segments[1:], strict=False):
        assert after.parent_span_id == ids[0]
        assert after.links == [(trace_id, before.span_id)]
    for segment in segments:
        assert segment.name == "invoke_agent harness"
        assert segment.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert segment.attributes["gen_ai.agent.name"] == "harness"
        assert segment.attributes["gen_ai.conversation.id"] == str(task.id)
    assert [s.attributes["harness.run.outcome"] for s in segments] == [
        "paused",
        "paused",
        "succeeded",
        "succeeded",
    ]
    by_id = {span.span_id: span for span in spans}

    # Review requested in the first segment, decided (by the operator, on the arguments the
    # operator saw) on the segment after the pause.
    (requested,) = segments[0].events_named("harness.review.requested")
    delete_call = ToolCall.objects.get(task=task, tool="delete_file")
    assert requested["gen_ai.tool.call.id"] == delete_call.call_id
    assert requested["harness.review.rules"] == ["deletes"]
    (decided,) = segments[1].events_named("harness.review.decided")
    assert decided["harness.review.decision"] == "approved"
    assert decided["harness.review.decider"] == operator.username
    assert decided["harness.review.arguments_hash"] == canonical_hash({"path": "old.log"})
    assert decided["harness.review.wait_s"] > 0
    assert decided["gen_ai.tool.call.id"] == delete_call.call_id

    # Model calls: children of their segment, with the model, usage and finish reasons.
    chats = named(spans, "chat")
    assert {c.name for c in chats} == {"chat scripted"}
    for chat in chats:
        assert by_id[chat.parent_span_id].name.startswith("invoke_agent")
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.usage.input_tokens"] >= 0
        assert chat.attributes["gen_ai.usage.output_tokens"] >= 0
    assert sorted(c.attributes["gen_ai.response.finish_reasons"][0] for c in chats) == [
        "stop",
        "stop",
        "tool_calls",
        "tool_calls",
    ]

    # Tool attempts: the flaky call twice under one call id (the idempotency key), the first
    # failed, a retry scheduled on its segment.
    tools = named(spans, "execute_tool")
    flaky_call = ToolCall.objects.get(task=task, tool="flaky")
    flaky = sorted(
        (t for t in tools if t.name == "execute_tool flaky"),
        key=lambda t: t.attributes["harness.tool.attempt"],
    )
    assert [t.attributes["gen_ai.tool.call.id"] for t in flaky] == [flaky_call.call_id] * 2
    assert flaky[0].attributes["error.type"] == "transient" and flaky[0].status_code == 2
    assert "error.type" not in flaky[1].attributes
    assert [by_id[t.parent_span_id] for t in flaky] == [segments[1], segments[2]]
    (deleted,) = [t for t in tools if t.name == "execute_tool delete_file"]
    assert deleted.attributes["gen_ai.tool.name"] == "delete_file"
    assert deleted.attributes["gen_ai.tool.call.id"] == delete_call.call_id
    (retry,) = segments[1].events_named("harness.retry.scheduled")
    assert retry["gen_ai.tool.call.id"] == flaky_call.call_id
    assert retry["error.type"] == "transient" and retry["harness.retry.attempt"] == 1

    # The rollback, on the segment it resumed; checkpoints written, with level and trigger.
    (rollback,) = segments[3].events_named("harness.rollback")
    assert rollback["harness.rollback.actor"] == operator.username
    assert rollback["harness.rollback.resume"] is True
    written = [e for s in segments for e in s.events_named("harness.checkpoint.written")]
    assert sorted(
        (
            e["harness.checkpoint.seq"],
            e["harness.checkpoint.level"],
            e["harness.checkpoint.trigger"],
        )
        for e in written
    ) == sorted(task.checkpoints.exclude(trigger="rollback").values_list("seq", "level", "trigger"))
    assert {"task_start", "before_review", "on_retryable_error"} <= {
        e["harness.checkpoint.trigger"] for e in written
    }

    # No message content unless asked for.
    everything = json.dumps([s.attributes for s in spans] + [s.events for s in spans])
    assert GOAL_MARK not in everything
    assert "gen_ai.input.messages" not in everything

    # The task page shows the trace id, linked through HARNESS_TRACE_URL_TEMPLATE.
    settings.HARNESS_TRACE_URL_TEMPLATE = "https://traces.example/trace/{trace_id}"
    page = page_client(operator).get(f"/tasks/{task.id}/").content.decode()
    assert f'href="https://traces.example/trace/{trace_id}"' in page


def test_message_contents_are_exported_only_when_asked_for(fleet):
    with OtlpReceiver() as receiver:
        fleet.pool.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        fleet.pool.env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
        fleet.worker()
        task = enqueued_task(
            [
                {"call": "write_file", "args": {"path": "a.txt", "content": "file-body-42"}},
                {"final": "all written"},
            ],
            ["write_file"],
            goal=GOAL_MARK,
        )
        wait_status(task.id, "succeeded")
        spans = spans_when(
            receiver, lambda s: len(named(s, "chat")) == 2, "the task's two model calls"
        )
    chats = sorted(named(spans, "chat"), key=lambda c: len(c.attributes["gen_ai.input.messages"]))
    first_input = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert first_input[-1] == {
        "role": "user",
        "parts": [{"type": "text", "content": GOAL_MARK}],
    }
    last_output = json.loads(chats[1].attributes["gen_ai.output.messages"])
    assert last_output[0]["finish_reason"] == "stop"
    assert "all written" in json.dumps(last_output)
    (tool,) = named(spans, "execute_tool")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {
        "path": "a.txt",
        "content": "file-body-42",
    }
    assert "gen_ai.tool.call.result" in tool.attributes


def test_unreachable_collector_is_logged_and_the_task_goes_on_in_json_lines(fleet):
    # Nothing listens on the port: every export fails.
    fleet.pool.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
    fleet.pool.env["HARNESS_LOG_FORMAT"] = "json"
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "flaky", "args": {"key": "down-k", "fail_times": 1, "error": "transient"}},
            {"final": "done"},
        ],
        ["flaky"],
        retry=RETRY,
    )
    wait_status(task.id, "succeeded")
    call = ToolCall.objects.get(task=task)

    def json_lines() -> list[dict]:
        text = "\n".join(p.read_text() for p in fleet.pool.log_dir.glob("worker-*.log"))
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def lines() -> list[dict]:
        return [line for line in json_lines() if line.get("task_id") == str(task.id)]

    ours = wait_for(
        lambda: (
            (found := lines()) and sum("run ended" in x["message"] for x in found) == 2 and found
        ),
        15,
        message="both runs of the task to log their end",
    )
    assert all(line["trace_id"] == task.id.hex for line in ours)
    (retry,) = [line for line in ours if "retry 1" in line["message"]]
    assert retry["call_id"] == call.call_id and retry["level"] == "INFO"
    assert all(line["call_id"] is None for line in ours if "run ended" in line["message"])
    # Logged once per work horse, by the export thread or by the end of the run's flush.
    failures = [line for line in json_lines() if line["logger"] == "harness.telemetry"]
    assert failures and failures[0]["level"] == "WARNING"
    assert "spans are dropped, the task goes on" in failures[0]["message"]
