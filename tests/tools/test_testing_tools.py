from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import ValidationError

from agent.tools.testing import ledger_path, ledger_records
from tasks.tools import (
    PermanentToolError,
    ToolContext,
    ToolError,
    TransientToolError,
    UnknownTool,
    registry,
)

TEST_TOOLS = ["flaky", "ledger_append", "noop", "sleep"]


def test_test_tools_are_unknown_unless_enabled(settings):
    settings.HARNESS_ENABLE_TEST_TOOLS = False

    assert not set(TEST_TOOLS) & set(registry.names())
    for name in TEST_TOOLS:
        with pytest.raises(UnknownTool):
            registry.get(name)


def test_test_tools_are_listed_when_enabled(test_tools):
    assert set(TEST_TOOLS) <= set(registry.names())


@pytest.mark.parametrize(
    ("error", "exc_type"), [("transient", TransientToolError), ("permanent", PermanentToolError)]
)
def test_flaky_fails_the_given_number_of_times_then_succeeds(call, test_tools, error, exc_type):
    arguments = {"key": f"k-{error}", "fail_times": 2, "error": error}

    for attempt in (1, 2):
        with pytest.raises(exc_type, match=f"failure {attempt} of 2") as excinfo:
            call("flaky", arguments)
        assert excinfo.value.error_class == error
    result = call("flaky", arguments)

    assert result == {"key": f"k-{error}", "attempt": 3, "ok": True}
    assert call("flaky", arguments)["attempt"] == 4


def test_flaky_counts_per_key(call, test_tools):
    with pytest.raises(TransientToolError):
        call("flaky", {"key": "a", "fail_times": 1})

    assert call("flaky", {"key": "b", "fail_times": 0})["attempt"] == 1
    assert call("flaky", {"key": "a", "fail_times": 1})["attempt"] == 2


def _flaky_in_child(ctx: ToolContext) -> None:
    spec = registry.get("flaky")
    try:
        spec.func(ctx, spec.args_model.model_validate({"key": "shared", "fail_times": 1}))
    except TransientToolError:
        raise SystemExit(3) from None


def test_flaky_count_is_shared_across_processes(call, ctx, test_tools):
    child = multiprocessing.get_context("fork").Process(target=_flaky_in_child, args=(ctx,))
    child.start()
    child.join(10)

    assert child.exitcode == 3  # the other "worker" used up the one failure
    assert call("flaky", {"key": "shared", "fail_times": 1})["attempt"] == 2


def test_flaky_counts_concurrent_calls_exactly(call, test_tools):
    def attempt(_: int) -> int:
        return call("flaky", {"key": "busy", "fail_times": 0})["attempt"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        attempts = sorted(pool.map(attempt, range(40)))

    assert attempts == list(range(1, 41))


def test_sleep_sleeps(call, test_tools):
    started = time.monotonic()

    result = call("sleep", {"seconds": 0.1})

    assert time.monotonic() - started >= 0.1
    assert result["slept_s"] >= 0.1


def test_sleep_stops_when_the_call_is_stopped(call, ctx, test_tools):
    threading.Timer(0.2, ctx.stop.set).start()
    started = time.monotonic()

    with pytest.raises(ToolError) as excinfo:
        call("sleep", {"seconds": 60})

    assert excinfo.value.error_class == "canceled"
    assert time.monotonic() - started < 2


def test_sleep_stops_at_the_call_timeout(call, workspace, test_tools):
    short = ToolContext(task_id="t", call_id="c", workspace=workspace, timeout_s=0.2)

    with pytest.raises(ToolError) as excinfo:
        call("sleep", {"seconds": 60}, context=short)

    assert excinfo.value.error_class == "timeout"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("sleep", {"seconds": 3601}),
        ("sleep", {"seconds": -1}),
        ("flaky", {"key": "k", "fail_times": -1}),
        ("flaky", {"key": "k", "fail_times": 1, "error": "sometimes"}),
        ("ledger_append", {"value": "v"}),
        ("noop", {"anything": 1}),
    ],
)
def test_bad_arguments_are_rejected(test_tools, name, arguments):
    with pytest.raises(ValidationError):
        registry.get(name).args_model.model_validate(arguments)


def test_ledger_append_records_every_execution_with_its_idempotency_key(
    call, ctx, workspace, test_tools
):
    other = ToolContext(task_id="task-1", call_id="call-2", workspace=workspace, timeout_s=30)

    first = call("ledger_append", {"key": "order", "value": "1"})
    call("ledger_append", {"key": "order", "value": "1"})  # a duplicate execution of call-1
    call("ledger_append", {"key": "order", "value": "2"}, context=other)

    assert first == {"recorded": True, "key": "order", "idempotency_key": "task-1:call-1"}
    assert ledger_path().parent == test_tools
    assert workspace not in ledger_path().parents
    records = ledger_records(key="order")
    assert [(r["idempotency_key"], r["value"]) for r in records] == [
        ("task-1:call-1", "1"),
        ("task-1:call-1", "1"),
        ("task-1:call-2", "2"),
    ]
    assert {r["pid"] for r in records} == {os.getpid()}
    assert all(r["at"].endswith("+00:00") for r in records)
    assert list(workspace.iterdir()) == []


def test_concurrent_ledger_appends_are_whole_lines(call, test_tools):
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda i: call("ledger_append", {"key": "c", "value": str(i) * 500}), range(50)
            )
        )

    lines = ledger_path().read_text().splitlines()
    assert sorted(json.loads(line)["value"] for line in lines) == sorted(
        str(i) * 500 for i in range(50)
    )


def test_noop_returns_ok(call, test_tools):
    spec = registry.get("noop")

    assert call("noop", {}) == {"ok": True}
    assert (spec.risk, spec.side_effect) == ("read", False)


def test_ledger_append_is_a_non_idempotent_external_side_effect(test_tools):
    spec = registry.get("ledger_append")

    assert (spec.risk, spec.side_effect, spec.idempotent) == ("external", True, False)
