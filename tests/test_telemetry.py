"""harness_site/telemetry.py on its own: the context and format of log lines, and traces off
costing nothing (the exported traces: tests/durable/test_telemetry.py)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.telemetry import OtlpReceiver, traces_exported
from harness_site import telemetry
from tasks.tracing import segment_span_id
from tests.conftest import wait_for
from tests.factories import run_in_process, scripted_task

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
        "from harness_site import telemetry; "
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
