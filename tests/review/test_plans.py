"""Plan tasks (issue #46) run in this process: the dry run and its one `plan` review, the
decision's contract (plan_hash, per-item reject/edit, rules per item), the execution run held
to the plan, and plan runs left out of the statistics. With real workers:
tests/review/test_plans_workers.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agent.tools.testing import ledger_records
from checkpoints.selectors import task_checkpoint_marks
from checkpoints.services import checkpoint_decode
from review.models import ReviewRequest
from tasks import charts
from tasks.charts.formatting import plotly_time
from tasks.models import Task, TaskEvent, ToolCall
from tasks.rollups.queries import finished_tasks, settled_calls
from tasks.selectors import task_timeline_events, task_tool_call_attempts
from tests.factories import ReviewRuleFactory, run_in_process, scripted_task

pytestmark = pytest.mark.django_db

SCRIPT: list[dict[str, Any]] = [
    {"call": "write_file", "args": {"path": "a.txt", "content": "alpha\n"}},
    {"call": "read_file", "args": {"path": "a.txt"}},
    {"call": "write_file", "args": {"path": "b.txt", "content": "beta\n"}},
    {"call": "ledger_append", "args": {"key": "plan", "value": "sent"}},
    {"call": "write_file", "args": {"path": "c.txt", "content": "gamma\n"}},
    {"final": "done"},
]
TOOLS = ["write_file", "read_file", "ledger_append"]


def plan_task(script: list[dict[str, Any]] = SCRIPT, **extra: Any) -> Task:
    return scripted_task(script, TOOLS, mode="plan", **extra)


def tool_messages(task: Task) -> list[str]:
    task.refresh_from_db()
    state = checkpoint_decode(task.head_checkpoint).state
    return [m.content for m in state.messages if m.role == "tool"]


def planned(task: Task) -> dict[str, Any]:
    """Run the dry run; the plan review as GET /api/v1/reviews/{id} shows it."""
    assert run_in_process(task) == "paused"
    review = ReviewRequest.objects.get(task=task)
    return review


def test_a_dry_run_opens_one_plan_review_and_changes_nothing(api_client, operator):
    task = plan_task(workspace={"files": {"keep.txt": "original\n"}})
    review = planned(task)
    shown = api_client(operator).get(f"/api/v1/reviews/{review.id}").json()
    assert shown["kind"] == "plan" and shown["status"] == "pending"
    assert [i["tool"] for i in shown["items"]] == ["write_file"] * 2 + ["ledger_append"] + [
        "write_file"
    ]
    assert [i["id"] for i in shown["items"]] == ["1", "2", "3", "4"]
    assert "+alpha" in shown["items"][0]["preview"]
    assert shown["items"][2]["simulated"] and shown["items"][2]["rules"]
    assert shown["items"][3]["after_simulated"] and not shown["items"][1]["after_simulated"]
    assert shown["plan_hash"] and shown["estimate"]["steps"] == 5
    # Nothing happened: the original workspace was never written, no external effect.
    assert not (task.workspace_path / "a.txt").exists()
    assert ledger_records() == []
    # The dry run read what it wrote (its copy), and was told the external call was simulated.
    assert (task.plan_workspace_path / "c.txt").read_text() == "gamma\n"
    messages = tool_messages(task)
    assert "alpha" in messages[1] and "simulated" in messages[3]
    assert task.status == "waiting_review"


def test_approving_with_an_item_rejected_runs_the_rest_without_review(api_client, operator):
    task = plan_task()
    review = planned(task)
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "plan_hash": plan_hash,
            "items": {"4": {"decision": "reject", "comment": "no gamma today"}},
        },
    )
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert task.status == "queued" and task.plan_phase == "executing"
    assert run_in_process(task) == "succeeded"
    assert not task.plan_workspace_path.exists()
    assert (task.workspace_path / "a.txt").read_text() == "alpha\n"
    assert (task.workspace_path / "b.txt").read_text() == "beta\n"
    assert not (task.workspace_path / "c.txt").exists()
    assert [r["key"] for r in ledger_records()] == ["plan"]
    assert ReviewRequest.objects.filter(task=task).count() == 1
    assert "no gamma today" in tool_messages(task)[-1]
    states = {
        i["id"]: i["state"] for i in client.get(f"/api/v1/tasks/{task.id}/plan").json()["items"]
    }
    assert states == {"1": "executed", "2": "executed", "3": "executed", "4": "rejected"}


def test_an_edited_item_runs_with_the_edit(api_client, operator):
    task = plan_task()
    review = planned(task)
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    edit = {"key": "plan", "value": "edited"}
    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "plan_hash": plan_hash,
            "items": {"3": {"decision": "edit", "arguments": edit}},
        },
    )
    assert response.status_code == 200, response.content
    assert run_in_process(task) == "succeeded"
    assert [r["value"] for r in ledger_records()] == ["edited"]
    plan = client.get(f"/api/v1/tasks/{task.id}/plan").json()
    assert plan["items"][2]["state"] == "executed"


def test_a_call_outside_the_plan_or_with_other_arguments_pauses_naming_it(api_client, operator):
    task = plan_task()
    review = planned(task)
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    assert (
        client.post(
            f"/api/v1/reviews/{review.id}/decision",
            {"decision": "approve", "plan_hash": plan_hash},
        ).status_code
        == 200
    )
    # The model goes another way this time (a real model may): the scripted model's turns.
    script = [dict(turn) for turn in SCRIPT]
    script[3] = {"call": "ledger_append", "args": {"key": "plan", "value": "other"}}
    script[4] = {"call": "write_file", "args": {"path": "d.txt", "content": "delta\n"}}
    spec = {**task.spec, "model": {**task.spec["model"], "script": script}}
    Task.objects.filter(id=task.id).update(spec=spec)
    assert run_in_process(task) == "paused"
    departure = ReviewRequest.objects.get(task=task, status="pending")
    assert departure.kind == "policy" and departure.tool == "ledger_append"
    assert "arguments differ from plan item 3" in departure.reason
    assert "value" in departure.reason
    assert ledger_records() == []
    assert client.decide(departure.id, decision="approve").status_code == 200
    assert run_in_process(task) == "paused"
    outside = ReviewRequest.objects.get(task=task, status="pending")
    assert outside.tool == "write_file" and "not in the plan" in outside.reason
    assert not (task.workspace_path / "d.txt").exists()
    marks = dict(
        ToolCall.objects.filter(task=task)
        .exclude(plan_mark="planned")
        .values_list("tool", "plan_mark")
        .exclude(tool="read_file")
    )
    assert marks["ledger_append"] == "departed" and marks["write_file"] in (
        "in_plan",
        "outside_plan",
    )
    plan = client.get(f"/api/v1/tasks/{task.id}/plan").json()
    assert plan["items"][2]["state"] == "departed"


def test_a_target_changed_since_the_plan_pauses(api_client, operator):
    task = plan_task()
    review = planned(task)
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    client.post(
        f"/api/v1/reviews/{review.id}/decision", {"decision": "approve", "plan_hash": plan_hash}
    )
    task.workspace_path.mkdir(parents=True, exist_ok=True)
    (task.workspace_path / "b.txt").write_text("someone else's\n")
    assert run_in_process(task) == "paused"
    departure = ReviewRequest.objects.get(task=task, status="pending")
    assert departure.tool == "write_file"
    assert "target of plan item 2 (write_file) changed since the plan" in departure.reason
    assert (task.workspace_path / "b.txt").read_text() == "someone else's\n"


def test_a_four_eyes_item_needs_two_approvals_of_the_plan(api_client, operator, second_operator):
    ReviewRuleFactory(name="two-for-c", tool="write_file", path_glob="c.txt", approvals_required=2)
    task = plan_task()
    review = planned(task)
    first, second = api_client(operator), api_client(second_operator)
    shown = first.get(f"/api/v1/reviews/{review.id}").json()
    assert shown["items"][3]["rules"][0]["name"] == "two-for-c"
    body = {"decision": "approve", "plan_hash": shown["plan_hash"]}
    assert first.post(f"/api/v1/reviews/{review.id}/decision", body).json()["status"] == "pending"
    assert Task.objects.get(id=task.id).status == "waiting_review"
    assert second.post(f"/api/v1/reviews/{review.id}/decision", body).json()["status"] == (
        "approved"
    )


def test_a_four_eyes_item_rejected_needs_one_approval(api_client, operator):
    ReviewRuleFactory(name="two-for-c", tool="write_file", path_glob="c.txt", approvals_required=2)
    task = plan_task()
    review = planned(task)
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "plan_hash": plan_hash,
            "items": {"4": {"decision": "reject", "comment": "not c"}},
        },
    )
    assert response.json()["status"] == "approved"


def test_rejecting_the_plan_cancels_the_task_and_it_counts_nowhere(api_client, operator):
    script = [{"call": "read_file", "args": {"path": "missing.txt"}}, *SCRIPT]
    task = plan_task(script)
    review = planned(task)
    response = api_client(operator).post(
        f"/api/v1/reviews/{review.id}/decision", {"decision": "reject", "comment": "no"}
    )
    assert response.status_code == 200, response.content
    assert run_in_process(task) == "canceled"
    assert ToolCall.objects.filter(task=task, status="failed").exists()
    assert not settled_calls(ToolCall.objects.filter(task=task)).exists()
    task.refresh_from_db()
    assert not task.calls_failed
    assert (
        not finished_tasks(((task.created_at, task.finished_at + timedelta(seconds=1)),))
        .filter(id=task.id)
        .exists()
    )
    assert not (task.workspace_path / "a.txt").exists() and ledger_records() == []


def test_the_plan_review_and_task_pages_show_the_plan(client, operator):
    task = plan_task()
    review = planned(task)
    client.force_login(operator)
    page = client.get(f"/reviews/{review.id}/")
    assert page.status_code == 200
    task_page = client.get(f"/tasks/{task.id}/")
    assert task_page.status_code == 200


def test_the_plan_api_is_404_before_the_dry_run_ends_and_refuses_unknown_parameters(
    api_client, operator
):
    task = plan_task()
    client = api_client(operator)
    assert client.get(f"/api/v1/tasks/{task.id}/plan").status_code == 404
    assert client.get(f"/api/v1/tasks/{task.id}").json()["plan_phase"] == "planning"
    planned(task)
    assert client.get(f"/api/v1/tasks/{task.id}/plan", {"x": "1"}).status_code == 422
    plan = client.get(f"/api/v1/tasks/{task.id}/plan").json()
    assert plan["status"] == "pending" and plan["phase"] == "planning"
    assert [i["state"] for i in plan["items"]] == ["pending"] * 4


def test_dry_runs_are_in_no_failure_statistic(api_client, operator):
    # A dry run that fails (its script ends without a final answer) and one whose read fails
    # and whose plan is then rejected.
    broken = plan_task([{"call": "read_file", "args": {"path": "missing.txt"}}])
    assert run_in_process(broken) == "failed"
    rejected = plan_task([{"call": "read_file", "args": {"path": "missing.txt"}}, *SCRIPT])
    review = planned(rejected)
    client = api_client(operator)
    client.post(f"/api/v1/reviews/{review.id}/decision", {"decision": "reject", "comment": "no"})
    assert run_in_process(rejected) == "canceled"
    stats = client.get("/api/v1/stats/failures", {"since": "1h"}).json()
    assert stats["tasks"]["failed"] == 0 and stats["tasks"]["canceled"] == 0
    assert stats["by_tool"] == [] and stats["groups"] == []


def test_a_forbid_creator_rule_on_an_item_keeps_the_creator_from_approving_the_plan(
    api_client, operator, second_operator
):
    ReviewRuleFactory(name="not-mine", tool="write_file", path_glob="b.txt", forbid_creator=True)
    task = plan_task(user=operator)
    review = planned(task)
    plan_hash = api_client(operator).get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    body = {"decision": "approve", "plan_hash": plan_hash}
    mine = api_client(operator).post(f"/api/v1/reviews/{review.id}/decision", body)
    assert mine.status_code == 403
    # With that item rejected the rule no longer applies to the plan: the creator may approve.
    body["items"] = {"2": {"decision": "reject", "comment": "not b"}}
    assert (
        api_client(operator).post(f"/api/v1/reviews/{review.id}/decision", body).json()["status"]
        == "approved"
    )


def test_the_timeline_shows_the_plan_phase_then_the_execution_phase(api_client, operator):
    task = plan_task()
    review = planned(task)
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    decided = client.post(
        f"/api/v1/reviews/{review.id}/decision", {"decision": "approve", "plan_hash": plan_hash}
    )
    assert decided.status_code == 200, decided.content
    assert run_in_process(task) == "succeeded"
    figure = charts.task_timeline(
        task=task,
        events=task_timeline_events(task=task, types=charts.TIMELINE_EVENT_TYPES),
        calls=task_tool_call_attempts(task=task),
        checkpoints=task_checkpoint_marks(task_id=task.id),
        now=timezone.now(),
    )
    started = list(
        TaskEvent.objects.filter(task=task, type="task_started")
        .order_by("id")
        .values_list("created_at", "payload")
    )
    # Each phase is marked where it began: the dry run's first pick-up, the execution's.
    phases = [a for a in figure["layout"]["annotations"] if a.get("name") == "plan phase"]
    assert [a["text"] for a in phases] == ["plan phase (dry run)", "execution phase"]
    assert [a["x"][:19] for a in phases] == [
        plotly_time(started[0][0])[:19],
        plotly_time(next(at for at, p in started if p.get("plan") == "execution"))[:19],
    ]
    # ...and the text alternative says so too.
    items = figure["summary"]["items"]
    assert [i.split(" from ")[0] for i in items[:2]] == ["plan phase (dry run)", "execution phase"]
