"""A Pydantic AI task's step is two durable writes: the model turn's checkpoint rides with the
intent of its call, before the tool runs; the call's outcome rides with the step's
checkpoint, before the model is asked again. The tool sees both from a connection of its own
(only what is committed). Run by the RQ job function in this process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from agent.jobs import run_task
from tasks.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = 4


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs) -> None:
    harness_yaml('pydantic_ai_agents:\n  probe: "tests.tasks.pai_write_agents:probe_agent"\n')


def _probe_task(task_api: Any) -> str:
    created = task_api.create(
        {
            "title": "probe",
            "goal": "probe the writes",
            "agent": {
                "kind": "pydantic-ai",
                "name": "probe",
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


def test_a_step_is_two_fenced_writes(task_api):
    task_id = _probe_task(task_api)
    fenced: list[str] = []

    def count(execute, sql, params, many, context):
        if sql.lstrip().startswith("WITH fence AS"):
            fenced.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert run_task(task_id) == "succeeded"
    # task_start, two per step, the final turn with the task's end.
    assert len(fenced) == 2 * STEPS + 2
