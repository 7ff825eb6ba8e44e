"""A work horse that stops making progress while its worker stays up (SIGSTOP here; a debugger,
a read stuck on a dead mount or a deadlock look the same from outside): its worker kills it once
the call's timeout plus HARNESS_HORSE_GRACE_S has passed, and the task is redispatched at once,
instead of being held `running` until the job's hard timeout (about an hour here)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from collections.abc import Iterator

import pytest

from agent.tools.testing import ledger_records, started
from tasks.models import Task, TaskEvent
from tests.conftest import wait_for
from tests.factories import enqueued_task, graph_task, spec_task

from .conftest import TEST_CONFIG, process_alive, wait_status
from .graphs import runs
from .openai_agents import executions
from .pai_agents import runs as pai_runs
from .test_crash_recovery import LedgerLock

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Room for a loaded machine's bookkeeping between phases, which must not look frozen.
GRACE_S = 5
# The job's hard timeout is session + turn + tool + 120 s: over an hour, far past any wait here.
BUDGET = {"tool_timeout_s": 3, "turn_timeout_s": 4, "session_timeout_s": 3600}


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "langgraph_graphs:\n"
        '  slow_steps: "tests.durable.graphs:graph"\n'
        '  slow_import: "tests.durable.slow_import_graph:graph"\n'
        "openai_agents:\n"
        '  slow_writer: "tests.durable.openai_agents:slow_writer"\n'
        "pydantic_ai_agents:\n"
        '  slow_tool: "tests.durable.pai_agents:slow_tool"\n'
    )


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) for the block; woken after it if it still exists."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if process_alive(pid):
            os.kill(pid, signal.SIGCONT)


def horse_of(task: Task) -> int:
    worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task.id)
    return int(worker_id.rsplit(":", 1)[1])


def test_a_frozen_horse_is_killed_past_its_call_timeout_and_the_task_finishes(fleet):
    fleet.pool.env["HARNESS_HORSE_GRACE_S"] = str(GRACE_S)
    fleet.worker()
    task = enqueued_task(
        [
            {"call": "sleep", "args": {"seconds": 1, "mark": "frozen-sleep"}},
            {"call": "ledger_append", "args": {"key": "frozen", "value": "paid"}},
            {"final": "done"},
        ],
        ["sleep", "ledger_append"],
        budget=BUDGET,
    )
    # Inside the call, not just decided: frozen in the bookkeeping before it, the horse is
    # rightly judged by the grace alone (layer `harness`).
    wait_for(lambda: started("frozen-sleep"), message="the sleep to start")
    horse = horse_of(task)

    with frozen(horse):
        task = wait_status(task.id, "succeeded", timeout=60)

    assert not process_alive(horse)
    event = TaskEvent.objects.get(task=task, type="horse_unresponsive")
    assert event.payload["layer"] == "tool"
    assert event.payload["limit_s"] == BUDGET["tool_timeout_s"]
    assert event.payload["grace_s"] == GRACE_S
    assert task.redispatch_count == 1
    assert [r["value"] for r in ledger_records(key="frozen")] == ["paid"]


def test_a_horse_frozen_inside_a_side_effect_never_runs_it_twice(fleet):
    """Frozen after the effect's intent was recorded and before the effect: whether it
    happened is unknown to the harness, so the redispatched task asks a human instead of
    running it again."""
    fleet.pool.env["HARNESS_HORSE_GRACE_S"] = str(GRACE_S)
    fleet.worker()
    lock = LedgerLock()  # the call blocks inside, after its intent, before its effect
    try:
        task = enqueued_task(
            [
                {"call": "ledger_append", "args": {"key": "frozen-effect", "value": "paid"}},
                {"final": "done"},
            ],
            ["ledger_append"],
            budget=BUDGET,
        )
        wait_for(
            lambda: task.tool_calls.filter(tool="ledger_append", status="running").exists(),
            message="the side effect to start",
        )
        horse = horse_of(task)
        os.kill(horse, signal.SIGSTOP)
        task = wait_status(task.id, "waiting_review", timeout=60)
    finally:
        lock.release()

    assert not process_alive(horse)
    assert TaskEvent.objects.filter(task=task, type="horse_unresponsive").count() == 1
    assert task.tool_calls.get(tool="ledger_append").status == "unknown_outcome"
    assert ledger_records(key="frozen-effect") == []


def test_a_graph_frozen_mid_super_step_is_killed_past_the_step_timeout_and_resumes(fleet, tmp_path):
    fleet.pool.env["HARNESS_HORSE_GRACE_S"] = str(GRACE_S)
    fleet.worker()
    task = graph_task("slow_steps", {"marker_dir": str(tmp_path), "sleep_s": 1.5}, budget=BUDGET)
    wait_for(lambda: "slow:start" in runs(tmp_path), message="the slow node to start")
    horse = horse_of(task)

    with frozen(horse):
        task = wait_status(task.id, "succeeded", timeout=60)

    event = TaskEvent.objects.get(task=task, type="horse_unresponsive")
    assert event.payload["layer"] == "turn"
    assert event.payload["limit_s"] == BUDGET["turn_timeout_s"]
    # The super-step that froze runs again; the one before it does not.
    assert runs(tmp_path) == ["first", "slow:start", "slow:start", "slow:end", "last"]


def test_a_slow_import_of_the_operators_graph_is_not_taken_for_a_frozen_horse(fleet, tmp_path):
    """Importing the registered code comes before any promise to the worker: an import longer
    than the grace does not get the horse killed."""
    fleet.pool.env["HARNESS_HORSE_GRACE_S"] = "1"
    fleet.worker()
    task = graph_task("slow_import", {"marker_dir": str(tmp_path), "sleep_s": 0}, budget=BUDGET)

    task = wait_status(task.id, "succeeded", timeout=60)

    assert not TaskEvent.objects.filter(task=task, type="horse_unresponsive").exists()
    assert task.redispatch_count == 0
    assert runs(tmp_path) == ["first", "slow:start", "slow:end", "last"]


def sdk_task(kind: str, name: str, *, goal: str, agent_input: str = ""):
    agent = {"kind": kind, "name": name, **({"input": agent_input} if agent_input else {})}
    spec = {"title": name, "goal": goal, "agent": agent, "budget": BUDGET}
    return spec_task(spec, enqueue=True)


def test_an_openai_agents_run_frozen_in_a_model_turn_is_killed_and_resumes(fleet):
    """The SDK adapter promises each model turn to the worker: frozen inside one, the horse is
    killed past the turn timeout plus the grace and the run resumes from its RunState without
    running an executed tool again."""
    fleet.pool.env["HARNESS_HORSE_GRACE_S"] = str(GRACE_S)
    fleet.worker()
    key = uuid.uuid4().hex  # the model keeps its log under the key its first message names
    task = sdk_task("openai-agents", "slow_writer", goal=f"task {key}: do it")
    wait_for(lambda: "turn 1" in executions(key, "model"), message="the slow model turn")
    # Record one's outcome is committed behind the next model turn (agent.sdk_run.write_behind):
    # frozen once it is durable. Frozen before, its call is of unknown outcome after the kill
    # and the task rightly asks a human (tests/durable/test_sdk_unknown_outcome.py).
    wait_for(
        lambda: task.tool_calls.filter(status="succeeded").count() == 1,
        message="record one's outcome committed",
    )
    horse = horse_of(task)

    with frozen(horse):
        task = wait_status(task.id, "succeeded", timeout=60)

    assert not process_alive(horse)
    event = TaskEvent.objects.get(task=task, type="horse_unresponsive")
    assert event.payload["layer"] == "turn"
    assert event.payload["limit_s"] == BUDGET["turn_timeout_s"]
    assert task.redispatch_count == 1
    assert executions(task.id) == ["record one", "record two"]
    assert executions(key, "model") == ["turn 0", "turn 1", "turn 1", "turn 2"]
    assert task.result == "done: recorded two"


def test_a_pydantic_ai_run_frozen_inside_a_tool_asks_a_human_instead_of_running_it_again(
    fleet, tmp_path
):
    fleet.pool.env["HARNESS_HORSE_GRACE_S"] = str(GRACE_S)
    fleet.worker()
    task = sdk_task(
        "pydantic-ai",
        "slow_tool",
        goal="run the slow_tool agent",
        agent_input=json.dumps({"marker_dir": str(tmp_path), "sleep_s": 1.5}),
    )
    wait_for(lambda: "slow:start" in pai_runs(tmp_path), message="the slow tool to start")
    horse = horse_of(task)

    with frozen(horse):
        task = wait_status(task.id, "waiting_review", timeout=60)

    assert not process_alive(horse)
    event = TaskEvent.objects.get(task=task, type="horse_unresponsive")
    assert event.payload["layer"] == "tool"
    assert task.tool_calls.get(tool="slow_write").status == "unknown_outcome"
    assert pai_runs(tmp_path) == ["slow:start"]  # never re-run blindly
