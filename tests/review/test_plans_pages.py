"""Plan tasks on the pages (issue #46): the plan review page lists every item with its preview
and per-item controls that post one decision; the task page marks each call in plan, outside
plan or departed from plan; the New task form's checkbox creates a plan task."""

from __future__ import annotations

import json
import re

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import page_client
from tests.factories import run_in_process, scripted_task
from tests.review.test_plans import SCRIPT, TOOLS

pytestmark = pytest.mark.django_db


def planned_review() -> tuple[Task, ReviewRequest]:
    task = scripted_task(SCRIPT, TOOLS, mode="plan")
    assert run_in_process(task) == "paused"
    return task, ReviewRequest.objects.get(task=task, kind="plan")


def test_the_plan_page_lists_the_items_and_decides_them_in_one_form(operator):
    task, review = planned_review()
    client = page_client(operator)
    inbox = client.get("/reviews/")
    assert inbox.status_code == 200 and f"/reviews/{review.id}/" in inbox.content.decode()
    page = client.get(f"/reviews/{review.id}/").content.decode()
    assert page.count('data-testid="plan-item"') == 4
    assert page.count('data-testid="plan-item-reject"') == 4
    assert "+alpha" in page and 'data-testid="plan-item-simulated"' in page
    assert 'data-testid="plan-approve"' in page and 'data-testid="approve"' not in page
    plan_hash = re.search(r'name="plan_hash" value="([0-9a-f]{64})"', page).group(1)
    response = client.post(
        f"/reviews/{review.id}/plan-decide/",
        {
            "plan_hash": plan_hash,
            "decision": "approve",
            "item-4-decision": "reject",
            "item-4-comment": "not c",
            "item-3-decision": "edit",
            "item-3-arguments": json.dumps({"key": "plan", "value": "page"}),
        },
    )
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.status == "approved"
    assert review.choice["items"]["4"] == {"decision": "reject", "comment": "not c"}
    assert review.choice["items"]["3"]["arguments"]["value"] == "page"
    assert run_in_process(task) == "succeeded"
    calls = client.get(f"/tasks/{task.id}/?tab=calls").content.decode()
    assert "in plan (item 1)" in calls and "dry run" in calls
    decided = client.get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="plan-item-state">executed' in decided
    assert 'data-testid="plan-item-state">rejected' in decided
    assert 'data-testid="task-plan"' in client.get(f"/tasks/{task.id}/").content.decode()


def test_bad_json_in_an_edit_is_refused_naming_the_item(operator):
    _task, review = planned_review()
    client = page_client(operator)
    response = client.post(
        f"/reviews/{review.id}/plan-decide/",
        {
            "plan_hash": review.plan["plan_hash"],
            "decision": "approve",
            "item-2-decision": "edit",
            "item-2-arguments": "{",
        },
    )
    assert response.status_code == 422
    assert "items.2.arguments" in response.content.decode()
    review.refresh_from_db()
    assert review.status == "pending"


def test_the_departed_call_is_marked_on_the_task_page(operator):
    task, review = planned_review()
    client = page_client(operator)
    client.post(
        f"/reviews/{review.id}/plan-decide/",
        {"plan_hash": review.plan["plan_hash"], "decision": "approve"},
    )
    script = [dict(turn) for turn in SCRIPT]
    script[3] = {"call": "ledger_append", "args": {"key": "plan", "value": "other"}}
    spec = {**task.spec, "model": {**task.spec["model"], "script": script}}
    Task.objects.filter(id=task.id).update(spec=spec)
    assert run_in_process(task) == "paused"
    calls = client.get(f"/tasks/{task.id}/?tab=calls").content.decode()
    assert "departed from plan (item 3)" in calls


def test_the_new_task_form_starts_a_plan_task(creator):
    data = {
        "title": "Plan it",
        "goal": "Write a.txt",
        "priority": "default",
        "agent": "loop",
        "model_kind": "scripted",
        "model_script": json.dumps(SCRIPT),
        "tools": TOOLS,
        "plan_mode": "on",
        "action": "start",
    }
    client = page_client(creator)
    assert 'data-testid="new-plan-mode"' in client.get("/tasks/new/").content.decode()
    assert client.post("/tasks/new/", data).status_code == 302
    task = Task.objects.get(title="Plan it")
    assert task.spec["mode"] == "plan" and task.plan_phase == "planning"
