"""OpenAI Agents SDK agents (agent/openai_agents_runner/) run by real rqworkers: a tool that
needs approval pauses the task and an approval from the API (or the inbox page) runs it in a
worker; a worker killed with SIGKILL mid-run is redispatched and resumes from the last
checkpoint without running an executed tool again; a rollback restores the workspace and the
SDK's RunState and a worker goes on from there."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from checkpoints.models import Checkpoint
from checkpoints.recovery import checkpoint_rollback, task_cancel, task_resume
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import ToolCall
from tests.conftest import approve, wait_for
from tests.factories import spec_task

from .conftest import TEST_CONFIG, wait_status
from .openai_agents import executions

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "openai_agents:\n"
        '  writer: "tests.durable.openai_agents:writer"\n'
        '  slow_writer: "tests.durable.openai_agents:slow_writer"\n'
    )


def agent_task(name: str, key: str = ""):
    key = key or uuid.uuid4().hex
    spec = {
        "title": name,
        "goal": f"task {key}: do it",
        "agent": {"kind": "openai-agents", "name": name},
    }
    return spec_task(spec, enqueue=True), key


def test_needs_approval_pauses_and_the_inbox_approval_runs_the_tool_in_a_worker(fleet, operator):
    fleet.worker(1)
    task, _key = agent_task("writer")
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    assert review.tool == "publish" and review.status == "pending"
    assert executions(task.id) == ["write_file a.txt", "write_file b.txt", "record b"]

    # The inbox page's form, as an operator in the browser sends it.
    browser = Client()
    browser.force_login(operator)
    response = browser.post(
        f"/reviews/{review.id}/decide/",
        {"decision": "approve", "arguments_hash": canonical_hash(review.arguments)},
    )
    assert response.status_code in (200, 302, 303), response.content[:500]
    task = wait_status(task.id, "succeeded")
    assert task.result == "done: published 1.0"
    assert executions(task.id)[-1] == "publish 1.0"
    assert ToolCall.objects.get(task=task, tool="publish").status == "succeeded"


def test_a_worker_killed_mid_run_resumes_without_repeating_an_executed_tool(fleet):
    fleet.worker(2)
    fleet.sweeper()
    task, key = agent_task("slow_writer")
    # Turn 1 (the second model call) is slow: the worker dies during it, after `record one`
    # ran and its outcome was written.
    wait_for(lambda: "turn 1" in executions(key, "model"), message="the slow model turn")
    assert executions(task.id) == ["record one"]
    # A call's outcome is committed behind the next model turn (agent.sdk_run.write_behind):
    # this test's kill comes once it is durable (a kill before that is the unknown-outcome
    # flow, tests/durable/test_sdk_unknown_outcome.py).
    wait_for(
        lambda: ToolCall.objects.filter(task=task, status="succeeded").count() == 1,
        message="record one's outcome committed",
    )
    fleet.kill_worker_of(task.id)

    task = wait_status(task.id, "succeeded")
    assert task.result == "done: recorded two"
    # `record one` ran once: the resumed run replayed its outcome from the ledger; the model
    # turn that was cut off was asked again, the first one was not (it is in the RunState).
    assert executions(task.id) == ["record one", "record two"]
    assert executions(key, "model") == ["turn 0", "turn 1", "turn 1", "turn 2"]
    assert task.redispatch_count == 1
    assert task.events.filter(type="resumed").count() == 1
    assert task.events.filter(type="tool_replayed").count() == 1


def test_rollback_restores_the_workspace_and_the_run_state_and_a_worker_goes_on(fleet, operator):
    fleet.worker(1)
    task, key = agent_task("writer")
    wait_status(task.id, "waiting_review")
    approve(ReviewRequest.objects.get(task=task), operator)
    task = wait_status(task.id, "succeeded")
    workspace = task.workspace_path
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt", "b.txt"]

    # Back to turn 2's model response (a.txt written, b.txt not yet), and resume.
    target = Checkpoint.objects.get(task=task, trigger="after_model", step_index=2)
    checkpoint_rollback(
        task_id=task.id, checkpoint_id=target.id, user=operator, reason="redo b", resume=True
    )
    wait_status(task.id, "waiting_review")
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt", "b.txt"]  # b rewritten
    review = ReviewRequest.objects.get(task=task, status="pending")
    approve(review, operator, arguments={"version": "1.1"})
    task = wait_status(task.id, "succeeded")
    assert task.result == "done: published 1.1"
    assert executions(task.id).count("write_file a.txt") == 1
    assert executions(task.id).count("write_file b.txt") == 2
    # The model was not asked turn 1 again: its response came back with the RunState.
    assert executions(key, "model") == ["turn 0", "turn 1", "turn 2", "turn 3", "turn 2", "turn 3"]


def test_a_cancel_mid_run_stops_at_the_next_turn_and_resume_goes_on_from_there(fleet, operator):
    fleet.worker(1)
    task, key = agent_task("slow_writer")
    wait_for(lambda: "turn 1" in executions(key, "model"), message="the slow model turn")
    task_cancel(task_id=task.id, user=operator, reason="hold on")

    task = wait_status(task.id, "canceled")
    assert executions(task.id) == ["record one"]  # turn 1's call did not run
    task_resume(task_id=task.id, user=operator, reason="go on")

    task = wait_status(task.id, "succeeded")
    assert task.result == "done: recorded two"
    assert executions(task.id) == ["record one", "record two"]
    # Turn 1's answer was checkpointed before the cancel took effect: not asked again.
    assert executions(key, "model") == ["turn 0", "turn 1", "turn 2"]
