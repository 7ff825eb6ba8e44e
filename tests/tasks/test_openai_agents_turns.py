"""An OpenAI Agents SDK agent whose calls the policy allows runs its turns in one Runner.run:
each turn's checkpoint holds the model's response as a recorded turn (written before its call
runs), not the SDK's whole RunState, so what a step serialises and writes does not grow with
the run; a run resumed from such a checkpoint answers the model from the recorded turns and
replays their calls from the ledger (agent/openai_agents_runner/turns.py)."""

from __future__ import annotations

import uuid

import pytest

from agent.jobs import run_task
from checkpoints.models import Checkpoint
from checkpoints.recovery import task_retry
from checkpoints.services import checkpoint_decode
from tasks.models import Task, ToolCall
from tasks.services import write_behind
from tests.durable.openai_agents import executions
from tests.tasks.oa_turns_agents import DOWN_AT, TURNS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _config(harness_dirs, harness_yaml, quiet_watchdog):
    harness_yaml('openai_agents:\n  noter: "tests.tasks.oa_turns_agents:noter"\n')


def test_a_retried_run_answers_its_recorded_turns_and_replays_their_calls(task_api, operator):
    key = uuid.uuid4().hex
    task_id = task_api.create(
        {
            "title": "notes",
            "goal": f"task {key}: record",
            "agent": {"kind": "openai-agents", "name": "noter"},
            "budget": {"max_steps": TURNS + 5},
        }
    )["id"]
    assert run_task(task_id) == "failed"  # the model endpoint was down at turn DOWN_AT
    assert executions(task_id) == [f"record n{i}" for i in range(DOWN_AT)]
    turns = [
        checkpoint_decode(c).state.sdk
        for c in Checkpoint.objects.filter(task_id=task_id, trigger="after_model")
    ]
    # One checkpoint per turn, each with the recorded turns and no serialised RunState.
    assert len(turns) == DOWN_AT
    assert all(sdk["run_state"] is None and sdk["turns"] for sdk in turns)

    task_retry(task_id=task_id, user=operator, reason="endpoint is back")
    assert run_task(task_id) == "succeeded"
    assert task_api.get(task_id)["result"] == f"done: recorded n{TURNS - 1}"
    # The turns made before the failure came from the checkpoint (the model was not asked them
    # again) and their calls replayed from the ledger: every note was recorded once.
    asked = [f"turn {i}" for i in range(DOWN_AT + 1)] + [
        f"turn {i}" for i in range(DOWN_AT, TURNS + 1)
    ]
    assert executions(key, "model") == asked
    assert executions(task_id) == [f"record n{i}" for i in range(TURNS)]
    row = Task.objects.get(id=task_id)
    assert row.events.filter(type="tool_replayed").count() == DOWN_AT
    assert row.events.filter(type="model_decision").count() == TURNS + 1


def test_each_calls_outcome_is_sent_behind_and_collected_before_the_next_write(
    task_api, monkeypatch
):
    behind: list[str] = []
    sent = write_behind._execute

    def counted(sql, params, prepare):
        behind.append(sql)
        return sent(sql, params, prepare)

    monkeypatch.setattr(write_behind, "_execute", counted)
    task_id = task_api.create(
        {
            "title": "notes",
            "goal": f"task {uuid.uuid4().hex}: record",
            "agent": {"kind": "openai-agents", "name": "noter"},
            "budget": {"max_steps": TURNS + 5},
        }
    )["id"]
    assert run_task(task_id) == "failed"  # the model endpoint was down at turn DOWN_AT
    assert len(behind) == DOWN_AT
    # Every outcome sent behind was committed by the time the run ended.
    statuses = ToolCall.objects.filter(task_id=task_id).values_list("status", flat=True)
    assert sorted(statuses) == ["succeeded"] * DOWN_AT
    # Each call's arguments are in the turn's decision and its row, not again in tool_started.
    started = Task.objects.get(id=task_id).events.filter(type="tool_started")
    assert started.count() == DOWN_AT
    assert all("args" not in payload for payload in started.values_list("payload", flat=True))
