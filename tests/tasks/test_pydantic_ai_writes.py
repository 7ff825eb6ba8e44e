"""A Pydantic AI task's step is two durable writes: the model turn's checkpoint rides with the
intent of its call, before the tool runs; the call's outcome rides with the step's
checkpoint, sent behind (agent.sdk_run.write_behind: committed while the model is asked again)
and collected before the next write. The tool sees both from a connection of its own (only
what is committed). Run by the RQ job function in this process."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from django.db import OperationalError, connection

from agent.jobs import run_task
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_decode
from harness_base.collector import RUN_YOUNG_THRESHOLD
from tasks.models import Task, ToolCall
from tasks.services import write_behind
from tests.tasks import pai_write_agents

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = 4


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs) -> None:
    harness_yaml(
        "pydantic_ai_agents:\n"
        '  probe: "tests.tasks.pai_write_agents:probe_agent"\n'
        '  steal: "tests.tasks.pai_write_agents:steal_agent"\n'
        '  collector: "tests.tasks.pai_write_agents:collector_agent"\n'
    )


def _probe_task(task_api: Any, name: str = "probe") -> str:
    created = task_api.create(
        {
            "title": name,
            "goal": "probe the writes",
            "agent": {
                "kind": "pydantic-ai",
                "name": name,
                "input": json.dumps({"steps": STEPS}),
            },
        }
    )
    return str(created["id"])


def test_a_tool_runs_once_its_intent_and_turn_are_committed_and_the_last_outcome_too(task_api):
    task_id = _probe_task(task_api)
    assert run_task(task_id) == "succeeded"

    seen = [
        json.loads(call.result["value"])
        for call in ToolCall.objects.filter(task_id=task_id).order_by("step_index")
    ]
    assert [s["turn"] for s in seen] == list(range(STEPS))
    for step, view in enumerate(seen):
        # Its own intent, and every earlier call's outcome.
        assert view["calls"] == {
            **{str(earlier): "succeeded" for earlier in range(step)},
            str(step): "running",
        }
        # The model turn that asked for it is checkpointed and head.
        assert view["latest"] == ["after_model", step] and view["head_is_latest"]


def test_a_step_is_two_fenced_writes_its_outcome_sent_behind(task_api, monkeypatch):
    task_id = _probe_task(task_api)
    fenced: list[str] = []
    behind: list[str] = []

    def count(execute, sql, params, many, context):
        if sql.lstrip().startswith("WITH fence AS"):
            fenced.append(sql)
        return execute(sql, params, many, context)

    sent = write_behind._execute

    def counted(sql, params, prepare):
        behind.append(sql)
        return sent(sql, params, prepare)

    monkeypatch.setattr(write_behind, "_execute", counted)
    with connection.execute_wrapper(count):
        assert run_task(task_id) == "succeeded"
    # In place: task_start, each step's intent, the final turn with the task's end; behind:
    # each step's outcome.
    assert len(fenced) == STEPS + 2
    assert len(behind) == STEPS


def test_a_lease_lost_while_an_outcome_is_in_flight_stops_the_run_before_the_next_tool(task_api):
    pai_write_agents.stolen_turns.clear()
    task_id = _probe_task(task_api, "steal")
    assert run_task(task_id) == "lease_lost"
    # The outcome of the turn that took the lease was refused when the next write collected
    # it: that write (the next call's intent) was never made and its tool never ran.
    assert pai_write_agents.stolen_turns == [0, pai_write_agents.STOLEN_AFTER]
    calls = dict(ToolCall.objects.filter(task_id=task_id).values_list("step_index", "status"))
    assert calls == {0: "succeeded", 1: "running"}
    assert Task.objects.get(id=task_id).status == "running"


def test_a_proposed_calls_tool_started_leaves_out_the_arguments_the_decision_holds(task_api):
    task_id = _probe_task(task_api)
    assert run_task(task_id) == "succeeded"
    events = Task.objects.get(id=task_id).events
    started = list(events.filter(type="tool_started").values_list("payload", flat=True))
    assert len(started) == STEPS and all("args" not in payload for payload in started)
    decided = [
        call["args"]
        for payload in events.filter(type="model_decision").values_list("payload", flat=True)
        for call in payload["calls"]
    ]
    rows = ToolCall.objects.filter(task_id=task_id).order_by("step_index")
    assert decided == [row.arguments for row in rows] == [{"turn": i} for i in range(STEPS)]


# The fenced writes of a run: task_start, then each step's intent and outcome (write-behind off:
# both in place), then the stop's.
@pytest.mark.parametrize("failing", [3, 4], ids=["an outcome", "an intent"])
def test_after_a_failed_write_every_checkpoint_written_reads_back(task_api, settings, failing):
    """A write that fails (the database's own error, not a lost lease) forgets the history
    chunks and base it carried; whatever the stop's last write then stores (a checkpoint built
    before the failure included) names only chunks some row holds, and the head exists."""
    settings.HARNESS_WRITE_BEHIND = False
    task_id = _probe_task(task_api)
    fenced = 0

    def fail_one(execute, sql, params, many, context):
        nonlocal fenced
        if sql.lstrip().startswith("WITH fence AS"):
            fenced += 1
            if fenced == failing:
                raise OperationalError("the server closed the connection")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(fail_one):
        assert run_task(task_id) == "failed"
    assert fenced == failing + 1  # the stop's write was made
    checkpoints = list(Checkpoint.objects.filter(task_id=task_id).order_by("created_at"))
    assert [c.trigger for c in checkpoints][:2] == ["task_start", "after_model"]
    for checkpoint in checkpoints:
        checkpoint_decode(checkpoint)  # raises on a chunk or base no row holds
    head = Task.objects.get(id=task_id).head_checkpoint_id
    assert head in {c.id for c in checkpoints}


def test_a_run_collects_its_young_generation_less_often_and_gives_the_thresholds_back(task_api):
    """A run's working set (the history, the ledger) is long-lived: the collector's young
    generation is collected every RUN_YOUNG_THRESHOLD allocations while it runs
    (harness_base.collector), and the process has its own thresholds back after it."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        task_id = _probe_task(task_api, "collector")
        assert run_task(task_id) == "succeeded"
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
    seen = [call.result["value"] for call in ToolCall.objects.filter(task_id=task_id)]
    assert seen == [[RUN_YOUNG_THRESHOLD, 10, 10]] * STEPS
