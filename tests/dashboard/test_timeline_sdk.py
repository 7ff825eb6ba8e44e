"""The execution timeline of an SDK agent's task (Pydantic AI, OpenAI Agents SDK) is drawn as
the harness's own loop's is: each model turn a bar as long as the turn took, each tool call's
attempt a bar on its tool's row, the steps spanning them, and the calls tab lists the attempt.
An SDK's call keeps its one attempt on its ledger row (tasks.selectors.attempts_logged)."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from tasks import charts
from tasks.models import Task, TaskEvent, ToolCall
from tasks.selectors import attempts_logged, call_attempts
from tests.dashboard.test_timeline import timeline_of, traces

pytestmark = pytest.mark.django_db(transaction=True)

# The example agents harness.yaml registers: each writes its notes, then asks to publish.
AGENTS = {
    "pydantic-ai": ({"name": "release_notes", "input": "faster search"}, "write_note"),
    "openai-agents": ({"name": "release_writer"}, "write_notes"),
}


@pytest.mark.parametrize("kind", sorted(AGENTS))
def test_model_turns_and_tool_attempts_of_an_sdk_agent_are_bars(kind, task_api):
    agent, write_tool = AGENTS[kind]
    created = task_api.create(
        {"title": "notes", "goal": "write the notes", "agent": {"kind": kind, **agent}}
    )
    assert run_task(created["id"]) == "paused"  # publish waits for a person
    task = Task.objects.get(id=created["id"])
    by_name = traces(timeline_of(task))

    decisions = list(TaskEvent.objects.filter(task=task, type="model_decision"))
    assert len(decisions) == 2
    assert all(d.payload["duration_ms"] > 0 for d in decisions)
    model_bars = by_name["model calls"]
    assert model_bars["x"] == pytest.approx([d.payload["duration_ms"] for d in decisions])

    write = ToolCall.objects.get(task=task, tool=write_tool)
    assert write.status == "succeeded" and write.attempt_log == []
    tool_bars = by_name["tool attempts"]
    assert tool_bars["y"] == [charts.tool_row(write_tool)]  # publish never ran: no bar
    assert tool_bars["x"][0] == pytest.approx(
        (write.finished_at - write.started_at).total_seconds() * 1000
    )
    assert "attempt 1 of 1 · succeeded" in tool_bars["hovertext"][0]
    assert len(by_name["steps"]["x"]) >= 1

    attempts = call_attempts(call=write, outputs={})
    assert [(a["n"], a["status"]) for a in attempts] == [(1, "succeeded")]


def test_an_sdk_call_run_again_is_no_finished_attempt_while_it_runs():
    row = {
        "log": [],
        "attempts": 2,
        "started": "2026-12-07T10:00:05+00:00",
        "settled": "2026-12-07T10:00:01+00:00",  # the first attempt's
        "duration_ms": 12.5,  # the first attempt's
    }
    assert attempts_logged(status="running", **row) == []
    [entry] = attempts_logged(status="failed", **row)
    assert (entry["n"], entry["status"]) == (2, "failed")
    # The harness's own calls keep their log as it is.
    logged = [{"n": 1, "status": "succeeded", "started_at": "x", "finished_at": "y"}]
    assert attempts_logged(status="succeeded", **{**row, "log": logged}) == logged
