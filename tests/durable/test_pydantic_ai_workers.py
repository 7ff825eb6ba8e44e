"""Pydantic AI agents run by real rqworkers (agent.pydantic_ai_runner): reviews decided from
the API and the inbox after the pausing worker exited, a worker killed with SIGKILL while the
model thinks or while a tool runs, rollback to a step's checkpoint (workspace and message
history), and retry. Executed tools never run twice."""

from __future__ import annotations

import json

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_decode
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import ToolCall
from tests.conftest import ApiClient, page_client, wait_for
from tests.factories import spec_task

from .conftest import TEST_CONFIG, wait_status
from .graphs import workspace_files
from .pai_agents import runs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "review_rules:\n"
        '  - {name: protected-config, risk: write, path_glob: "**/*.conf", action: review}\n'
        "pydantic_ai_agents:\n"
        '  files: "tests.durable.pai_agents:files"\n'
        '  slow_tool: "tests.durable.pai_agents:slow_tool"\n'
        '  approvals: "tests.durable.pai_agents:approvals"\n'
    )


def pai_task(name: str, marker_dir, **inputs):
    spec = {
        "title": name,
        "goal": f"run the {name} agent",
        "agent": {
            "kind": "pydantic-ai",
            "name": name,
            "input": json.dumps({"marker_dir": str(marker_dir), **inputs}),
        },
    }
    return spec_task(spec, enqueue=True)


def pending_review(task, tool: str) -> ReviewRequest:
    return wait_for(
        lambda: ReviewRequest.objects.filter(task=task, status="pending", tool=tool).first(),
        message=f"a pending review of {tool}",
    )


def test_approvals_edit_reject_and_our_rules_from_the_api_and_the_inbox(fleet, tmp_path, operator):
    fleet.worker(1)
    task = pai_task("approvals", tmp_path)
    api = ApiClient(operator)

    # requires_approval=True: paused before it ran; approved over the API as asked.
    wait_status(task.id, "waiting_review")
    review = pending_review(task, "deploy")
    assert review.kind == "pydantic-ai" and review.original_arguments == {"env": "staging"}
    assert runs(tmp_path) == []
    shown = api.get(f"/api/v1/reviews/{review.id}").json()
    assert shown["tool"] == "deploy" and shown["arguments"] == {"env": "staging"}
    response = api.decide(review.id, decision="approve")
    assert response.status_code == 200, response.content

    # A tool that raised ApprovalRequired itself (a large transfer), the small one ran as is;
    # edited in the inbox: it runs once, with the reviewer's amount.
    review = pending_review(task, "transfer")
    assert review.original_arguments == {"amount": 5000}
    assert runs(tmp_path) == ["deploy:staging", "transfer:50"]
    client = page_client(operator)
    assert client.get(f"/reviews/{review.id}/").status_code == 200
    response = client.post(
        f"/reviews/{review.id}/decide/",
        {
            "decision": "edit",
            "arguments": json.dumps({"amount": 900}),
            "arguments_hash": canonical_hash({"amount": 5000}),
            "comment": "smaller",
        },
    )
    assert response.status_code == 302, response.content

    # Our review rule (protected-config on a tool whose metadata says risk write): rejected
    # in the inbox; the agent is told, nothing is written.
    review = pending_review(task, "configure")
    assert review.matched_rules[0]["name"] == "protected-config"
    response = client.post(
        f"/reviews/{review.id}/decide/", {"decision": "reject", "comment": "not in prod"}
    )
    assert response.status_code == 302, response.content

    task = wait_status(task.id, "succeeded")
    assert runs(tmp_path) == ["deploy:staging", "transfer:50", "transfer:900"]
    assert "not in prod" in task.result
    assert not (task.workspace_path / "app.conf").exists()
    calls = list(ToolCall.objects.filter(task=task).order_by("id"))
    assert [(c.tool, c.status, c.attempts) for c in calls] == [
        ("deploy", "succeeded", 1),
        ("transfer", "succeeded", 1),
        ("transfer", "succeeded", 2),  # started, asked for approval, ran once approved
        ("configure", "rejected", 0),
    ]
    assert calls[2].arguments == {"amount": 900}
    history = checkpoint_decode(task.head_checkpoint).state.sdk["messages"]
    assert any(
        part.get("tool_name") == "configure" and "not in prod" in str(part.get("content"))
        for message in history
        for part in message["parts"]
    )


def test_a_worker_killed_while_the_model_thinks_resumes_without_repeating_a_tool(fleet, tmp_path):
    fleet.worker(1)
    fleet.sweeper()
    task = pai_task("files", tmp_path, sleep_s=2)
    wait_for(lambda: "model1:start" in runs(tmp_path), message="the slow model turn to start")
    # The first write's outcome is committed behind this model turn (write-behind): the kill
    # comes once it is durable (a kill before that is the unknown-outcome flow).
    wait_for(
        lambda: ToolCall.objects.filter(task=task, status="succeeded").count() == 1,
        message="the first write's outcome committed",
    )
    fleet.kill_worker_of(task.id)
    fleet.worker(1)  # the machine that takes over

    task = wait_status(task.id, "succeeded")
    # The first write finished before the kill and is in the step's checkpoint: it does not
    # run again; the model turn that was cut off does.
    assert runs(tmp_path) == [
        "write:a.txt=a1",
        "model1:start",
        "model1:start",
        "model1:end",
        "write:b.txt=b1",
        "write:a.txt=a2",
    ]
    assert task.redispatch_count == 1
    assert task.events.filter(type="resumed").count() == 1
    assert workspace_files(task.workspace_path) == {"a.txt": "a2", "b.txt": "b1"}
    assert ToolCall.objects.filter(task=task, status="succeeded").count() == 3


def test_a_worker_killed_inside_a_tool_asks_a_human_instead_of_running_it_again(
    fleet, tmp_path, operator
):
    fleet.worker(1)
    fleet.sweeper()
    task = pai_task("slow_tool", tmp_path, sleep_s=3)
    wait_for(lambda: "slow:start" in runs(tmp_path), message="the slow tool to start")
    fleet.kill_worker_of(task.id)
    fleet.worker(1)  # the machine that takes over

    task = wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.kind == "unknown_outcome" and review.tool == "slow_write"
    assert runs(tmp_path) == ["slow:start"]
    response = ApiClient(operator).decide(
        review.id, decision="mark_done", result={"value": "checked by hand"}
    )
    assert response.status_code == 200, response.content

    task = wait_status(task.id, "succeeded")
    assert runs(tmp_path) == ["slow:start"]  # never re-run
    assert "checked by hand" in task.result


def test_rollback_restores_the_workspace_and_the_history_then_the_agent_goes_on(
    fleet, tmp_path, operator
):
    fleet.worker(1)
    task = pai_task("files", tmp_path)
    task = wait_status(task.id, "succeeded")
    assert workspace_files(task.workspace_path) == {"a.txt": "a2", "b.txt": "b1"}

    # The checkpoint at the end of the first step: a.txt written, b.txt not yet.
    first_step = Checkpoint.objects.get(task=task, trigger="after_step", step_index=1)
    assert len(checkpoint_decode(first_step).state.sdk["messages"]) == 3
    api = ApiClient(operator)
    response = api.post(
        f"/api/v1/tasks/{task.id}/rollback",
        {"checkpoint_id": str(first_step.id), "resume": False, "reason": "redo b"},
    )
    assert response.status_code == 200, response.content
    assert workspace_files(task.workspace_path) == {"a.txt": "a1"}
    task.refresh_from_db()
    assert task.status == "held"
    assert len(checkpoint_decode(task.head_checkpoint).state.sdk["messages"]) == 3

    response = api.post(f"/api/v1/tasks/{task.id}/resume", {"reason": "go on"})
    assert response.status_code == 200, response.content
    task = wait_status(task.id, "succeeded")
    assert runs(tmp_path) == [
        "write:a.txt=a1",
        "model1:start",
        "model1:end",
        "write:b.txt=b1",
        "write:a.txt=a2",
        # after the rollback: from the second model turn on, not the first write
        "model1:start",
        "model1:end",
        "write:b.txt=b1",
        "write:a.txt=a2",
    ]
    assert workspace_files(task.workspace_path) == {"a.txt": "a2", "b.txt": "b1"}
    assert task.events.filter(type="context_aligned").count() == 1
    assert ToolCall.objects.filter(task=task, status="succeeded").count() == 5
