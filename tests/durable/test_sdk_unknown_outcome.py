"""A tool call that was running when its worker died (SIGKILL), in an SDK agent (OpenAI Agents
SDK and Pydantic AI, real rqworkers): the worker that picks the task up does not run it again
and opens the native loop's `unknown_outcome` review showing the call; the operator's answers
work as in the native loop: `mark_done` with a result (the agent goes on with it as the tool's
output; the tool never runs again), `rerun` (it runs once more, the agent goes on with its
output), `fail_task` (the task fails, nothing runs)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from checkpoints.recovery import task_forward
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall
from tests.conftest import ApiClient, wait_for
from tests.factories import spec_task

from .conftest import TEST_CONFIG, wait_status
from .openai_agents import executions
from .pai_agents import runs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ADAPTERS = ["openai-agents", "pydantic-ai"]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "openai_agents:\n"
        '  deployer: "tests.durable.sdk_unknown_agents:deployer"\n'
        "pydantic_ai_agents:\n"
        '  deployer: "tests.durable.sdk_unknown_agents:pai_deployer"\n'
    )


class Deploy:
    """A `deployer` task of one adapter, and what its tool did."""

    def __init__(self, adapter: str, marker_dir: Path) -> None:
        self.adapter = adapter
        self.marker_dir = marker_dir
        marker_dir.mkdir(exist_ok=True)
        agent: dict = {"kind": adapter, "name": "deployer"}
        if adapter == "pydantic-ai":
            agent["input"] = json.dumps({"marker_dir": str(marker_dir)})
        spec = {"title": "deploy", "goal": f"task {uuid.uuid4().hex}: deploy", "agent": agent}
        self.task: Task = spec_task(spec, enqueue=True)

    def tool_runs(self) -> list[str]:
        if self.adapter == "pydantic-ai":
            return runs(self.marker_dir)
        return executions(self.task.id)

    def answer(self, output: str) -> str:
        """The agent's final answer when the tool's output is `output`."""
        return f"done: {output}" if self.adapter == "openai-agents" else f"finished: {output}"


def asked_about(deploy: Deploy) -> ReviewRequest:
    """The pending review of a deployer picked up after its worker died in `deploy`."""
    wait_status(deploy.task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=deploy.task, status="pending")
    # The native loop's review of a call of unknown outcome, showing the call.
    assert review.kind == "unknown_outcome"
    assert review.tool == "deploy" and review.arguments == {"version": "2.0"}
    assert '"version": "2.0"' in review.preview
    assert review.tool_call.status == "unknown_outcome" and review.tool_call.attempts == 1
    assert deploy.tool_runs() == ["deploy:start"]  # not run again on pick-up
    assert deploy.task.events.filter(type="tool_unknown_outcome").count() == 1
    return review


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_call_cut_off_by_a_dead_worker_is_asked_about_and_each_answer_is_followed(
    fleet, tmp_path, operator, adapter
):
    """Three deployers, each worker killed (SIGKILL) while `deploy` runs. Picked up by other
    workers, each asks about its call; answered `mark_done` (with what it returned), `rerun`
    and `fail_task`."""
    fleet.worker(3)
    fleet.sweeper()
    done, again, failed = (Deploy(adapter, tmp_path / name) for name in ("done", "again", "fail"))
    for deploy in (done, again, failed):
        wait_for(lambda d=deploy: "deploy:start" in d.tool_runs(), message="deploy to start")
    for deploy in (done, again, failed):
        fleet.kill_worker_of(deploy.task.id)
    fleet.worker(3)  # the machines that take over
    reviews = {deploy: asked_about(deploy) for deploy in (done, again, failed)}
    client = ApiClient(operator)

    # It took effect: the agent goes on with the operator's result; the tool never runs again.
    response = client.decide(
        reviews[done].id, decision="mark_done", result="deployed 2.0 (checked by hand)"
    )
    assert response.status_code == 200, response.content
    # It did not: it runs once more, and the agent goes on with its output.
    response = client.decide(
        reviews[again].id,
        decision="rerun",
        arguments_hash=canonical_hash(reviews[again].arguments),
    )
    assert response.status_code == 200, response.content
    # Nobody can tell: the task fails, nothing runs.
    response = client.decide(reviews[failed].id, decision="fail_task", comment="rolled out?")
    assert response.status_code == 200, response.content

    task = wait_status(done.task.id, "succeeded")
    assert task.result == done.answer("deployed 2.0 (checked by hand)")
    assert done.tool_runs() == ["deploy:start"]  # the dead worker's attempt only
    call = ToolCall.objects.get(task=task, tool="deploy")
    assert call.status == "succeeded" and call.attempts == 1

    task = wait_status(again.task.id, "succeeded")
    assert task.result == again.answer("deployed 2.0")
    assert again.tool_runs() == ["deploy:start", "deploy:start", "deploy:end"]
    call = ToolCall.objects.get(task=task, tool="deploy")
    assert call.status == "succeeded" and call.attempts == 2

    task = wait_status(failed.task.id, "failed")
    assert task.error_class == "unknown_outcome"
    assert failed.tool_runs() == ["deploy:start"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_call_left_unknown_by_a_failed_task_is_asked_about_when_the_task_goes_on(
    fleet, tmp_path, operator, adapter
):
    """The sweeper fails a task whose worker died too often: its running call's outcome is
    unknown. Continued from its last checkpoint, the task asks about that call (it neither
    runs it nor crashes on it); marked done, the agent goes on with the operator's result."""
    fleet.pool.env["HARNESS_MAX_REDISPATCHES"] = "0"
    fleet.worker(1)
    fleet.sweeper()
    deploy = Deploy(adapter, tmp_path)
    wait_for(lambda: "deploy:start" in deploy.tool_runs(), message="the deploy call to start")
    fleet.kill_worker_of(deploy.task.id)
    task = wait_status(deploy.task.id, "failed")
    assert task.error_class == "stalled"
    assert ToolCall.objects.get(task=task, tool="deploy").status == "unknown_outcome"

    fleet.worker(1)
    task_forward(task_id=task.id, user=operator, reason="go on")
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.kind == "unknown_outcome" and review.arguments == {"version": "2.0"}
    assert deploy.tool_runs() == ["deploy:start"]

    response = ApiClient(operator).decide(review.id, decision="mark_done", result="it is live")
    assert response.status_code == 200, response.content
    task = wait_status(task.id, "succeeded")
    assert task.result == deploy.answer("it is live")
    assert deploy.tool_runs() == ["deploy:start"]
