"""Plan tasks (issue #46) end to end with real `rqworker` processes, PostgreSQL and Redis: a dry
run that writes three files, runs a command and calls an external tool opens one `plan` review
with five items and changes nothing; approving it with one write rejected runs the other four
effects with no further review, and the model is told why the fifth did not run."""

from __future__ import annotations

import pytest

from agent.tools.testing import ledger_records
from checkpoints.services import checkpoint_decode
from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import wait_for
from tests.factories import scripted_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCRIPT = [
    {"call": "write_file", "args": {"path": "a.txt", "content": "alpha\n"}},
    {"call": "write_file", "args": {"path": "b.txt", "content": "beta\n"}},
    {"call": "run_command", "args": {"command": "cat a.txt b.txt"}},
    {"call": "ledger_append", "args": {"key": "deploy", "value": "v2"}},
    {"call": "write_file", "args": {"path": "c.txt", "content": "gamma\n"}},
    {"final": "deployed"},
]


def wait_status(task: Task, *statuses: str) -> str:
    def now() -> str | None:
        status = Task.objects.values_list("status", flat=True).get(pk=task.pk)
        return status if status in statuses else None

    return wait_for(now, 90, message=f"task {task.pk} to become {'/'.join(statuses)}")


def test_a_plan_run_then_its_execution_bound_to_the_decision(workers, api_client, operator):
    task = scripted_task(
        SCRIPT,
        ["write_file", "run_command", "ledger_append"],
        enqueue=True,
        mode="plan",
        workspace={"files": {"README": "original\n"}},
    )
    wait_status(task, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    client = api_client(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    assert shown["kind"] == "plan"
    items = shown["items"]
    assert [i["tool"] for i in items] == [
        "write_file",
        "write_file",
        "run_command",
        "ledger_append",
        "write_file",
    ]
    assert all(i["preview"] for i in items)
    assert "cat a.txt b.txt" in items[2]["preview"] and items[2]["simulated"]
    assert items[3]["after_simulated"] and items[3]["risk"] == "external"
    # No side effect: the original workspace untouched (never even created), no ledger entry.
    assert not task.workspace_path.exists() or sorted(
        p.name for p in task.workspace_path.iterdir()
    ) == ["README"]
    assert ledger_records() == []

    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "plan_hash": shown["plan_hash"],
            "items": {"5": {"decision": "reject", "comment": "gamma waits for the next release"}},
        },
    )
    assert response.status_code == 200, response.content
    assert wait_status(task, "succeeded", "failed", "waiting_review") == "succeeded"
    assert ReviewRequest.objects.filter(task=task).count() == 1
    assert (task.workspace_path / "a.txt").read_text() == "alpha\n"
    assert (task.workspace_path / "b.txt").read_text() == "beta\n"
    assert not (task.workspace_path / "c.txt").exists()
    assert [(r["key"], r["value"]) for r in ledger_records()] == [("deploy", "v2")]
    task.refresh_from_db()
    state = checkpoint_decode(task.head_checkpoint).state
    tool_messages = [m.content for m in state.messages if m.role == "tool"]
    assert "alpha" in tool_messages[2] and "simulated" not in tool_messages[2]
    assert "gamma waits for the next release" in tool_messages[-1]
    plan = client.get(f"/api/v1/tasks/{task.id}/plan").json()
    assert [i["state"] for i in plan["items"]] == ["executed"] * 4 + ["rejected"]


def test_a_target_changed_after_the_plan_pauses_the_execution_for_review(
    workers, api_client, operator
):
    task = scripted_task(
        SCRIPT[:2] + [{"final": "written"}], ["write_file"], enqueue=True, mode="plan"
    )
    wait_status(task, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    # Someone writes b.txt in the task's workspace between the plan and the approval.
    task.workspace_path.mkdir(parents=True, exist_ok=True)
    (task.workspace_path / "b.txt").write_text("theirs\n")
    assert (
        client.post(
            f"/api/v1/reviews/{review.id}/decision",
            {"decision": "approve", "plan_hash": plan_hash},
        ).status_code
        == 200
    )
    wait_for(
        lambda: ReviewRequest.objects.filter(task=task, status="pending").first(),
        90,
        message="the departure's review",
    )
    departure = ReviewRequest.objects.get(task=task, status="pending")
    assert departure.kind == "policy" and departure.tool == "write_file"
    assert "changed since the plan" in departure.reason
    assert (task.workspace_path / "a.txt").read_text() == "alpha\n"
    assert (task.workspace_path / "b.txt").read_text() == "theirs\n"
    assert client.decide(departure.id, decision="approve").status_code == 200
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    assert (task.workspace_path / "b.txt").read_text() == "beta\n"
    plan = client.get(f"/api/v1/tasks/{task.id}/plan").json()
    assert [i["state"] for i in plan["items"]] == ["executed", "departed"]
    assert "changed since the plan" in plan["items"][1]["departed"]
