"""Retry offers the changes that can help: a task stopped by its budget is retried with a
higher `max_steps` (API and page) and finishes; timeouts and an OpenAI-compatible model's name
change the same way; bad values are 422 naming the field and change nothing; the audit log
keeps before and after. "Recover (auto)" says which strategy it chose and why."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tasks.models import AuditEntry, Task, TaskEvent
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = [
    {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
    {"call": "write_file", "args": {"path": "b.txt", "content": "2"}},
    {"final": "both written"},
]


@pytest.fixture
def over_budget(operator) -> Task:
    """A task that stopped at `max_steps=1` with one more write to go."""
    task = scripted_task(WRITES, ["write_file"], user=operator, budget={"max_steps": 1})
    assert run_in_process(task) == "failed"
    assert task.error_class == "budget_exceeded"
    return task


def test_an_empty_retry_of_a_task_over_budget_stops_again_at_once(
    over_budget, api_client, operator
):
    response = api_client(operator).post(f"/api/v1/tasks/{over_budget.id}/retry", {})
    assert response.status_code == 200, response.content
    assert response.json()["spec_changes"] == {}
    assert run_in_process(over_budget) == "failed"
    assert over_budget.error_class == "budget_exceeded"


def test_a_retry_with_a_raised_max_steps_finishes_the_task_and_is_audited(
    over_budget, api_client, operator
):
    response = api_client(operator).post(
        f"/api/v1/tasks/{over_budget.id}/retry",
        {"reason": "give it room", "budget": {"max_steps": 10}},
    )
    assert response.status_code == 200, response.content
    assert response.json()["spec_changes"] == {
        "before": {"budget.max_steps": 1},
        "after": {"budget.max_steps": 10},
    }
    assert response.json()["task"]["spec"]["budget"]["max_steps"] == 10
    assert run_in_process(over_budget) == "succeeded"
    assert (over_budget.workspace_path / "b.txt").read_text() == "2"
    audit = AuditEntry.objects.get(action="retry", task=over_budget)
    assert (audit.actor, audit.reason) == (operator, "give it room")
    assert audit.before["spec"] == {"budget.max_steps": 1}
    assert audit.after["spec"] == {"budget.max_steps": 10}
    event = TaskEvent.objects.get(task=over_budget, type="retry")
    assert event.payload["spec_changes"]["after"] == {"budget.max_steps": 10}


def test_values_in_force_change_nothing(over_budget, api_client, operator):
    """The page sends every field prefilled: a timeout equal to harness.yaml's stays unset."""
    response = api_client(operator).post(
        f"/api/v1/tasks/{over_budget.id}/retry",
        {"budget": {"max_steps": 1, "session_timeout_s": 3600}},
    )
    assert response.status_code == 200, response.content
    assert response.json()["spec_changes"] == {}
    assert "session_timeout_s" not in Task.objects.get(id=over_budget.id).spec["budget"]
    assert not AuditEntry.objects.get(action="retry", task=over_budget).after.get("spec")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"budget": {"max_steps": 0}}, "budget.max_steps"),
        ({"budget": {"max_steps": 10**9}}, "budget.max_steps"),
        ({"budget": {"max_tokens": "lots"}}, "budget.max_tokens"),
        ({"budget": {"turn_timeout_s": 99999}}, "budget.turn_timeout_s"),
        ({"budget": {"tool_timeout_s": -1}}, "budget.tool_timeout_s"),
        ({"budget": {"max_children": 3}}, "budget"),
        ({"model": "gpt-4o"}, "model"),
        ({"model": "x" * 201}, "model"),
    ],
)
def test_bad_changes_are_422_naming_the_field_and_change_nothing(
    over_budget, api_client, operator, body, field
):
    spec = Task.objects.get(id=over_budget.id).spec
    response = api_client(operator).post(f"/api/v1/tasks/{over_budget.id}/retry", body)
    assert response.status_code == 422, response.content
    assert field in response.content.decode()
    task = Task.objects.get(id=over_budget.id)
    assert (task.status, task.spec) == ("failed", spec)
    assert not AuditEntry.objects.filter(action="retry").exists()


def test_the_page_retries_with_a_raised_max_steps(over_budget, as_user, operator):
    page = as_user(operator).get(f"/tasks/{over_budget.id}/").content.decode()
    assert 'data-testid="retry-changes" open' in page
    assert 'name="max_steps" min="1" max="100000" step="1" value="1"' in page
    response = as_user(operator).post(
        f"/tasks/{over_budget.id}/recover/",
        {
            "action": "retry",
            "reason": "more steps",
            "max_steps": "5",
            "max_tokens": "1000000",
            "session_timeout_s": "3600",
            "turn_timeout_s": "300",
            "tool_timeout_s": "60",
        },
        follow=True,
    )
    assert "Retry requested; changed budget.max_steps 1 → 5." in response.content.decode()
    # Only the changed value is written: the timeouts still follow harness.yaml.
    assert Task.objects.get(id=over_budget.id).spec["budget"] == {
        "max_steps": 5,
        "max_tokens": 1000000,
    }
    assert run_in_process(over_budget) == "succeeded"


def test_the_page_says_why_a_bad_change_was_refused(over_budget, as_user, operator):
    response = as_user(operator).post(
        f"/tasks/{over_budget.id}/recover/",
        {"action": "retry", "reason": "r", "max_steps": "0"},
        follow=True,
    )
    assert "budget.max_steps: " in response.content.decode()
    assert Task.objects.get(id=over_budget.id).status == "failed"


def test_recover_auto_says_which_strategy_it_chose_and_why(over_budget, as_user, operator):
    response = as_user(operator).post(
        f"/tasks/{over_budget.id}/recover/", {"action": "auto", "reason": "go on"}, follow=True
    )
    why = "no failed tool call: continue from the newest valid checkpoint"
    assert f"Recover (auto) chose forward: {why}." in response.content.decode()
    audit = AuditEntry.objects.get(action="forward", task=over_budget)
    assert audit.reason == f"go on [auto chose forward: {why}]"


def test_the_api_answer_of_recover_auto_says_why(over_budget, api_client, operator):
    response = api_client(operator).post(
        f"/api/v1/tasks/{over_budget.id}/recover", {"strategy": "auto", "resume": False}
    )
    assert response.status_code == 200, response.content
    assert (response.json()["kind"], response.json()["why"]) == (
        "forward",
        "no failed tool call: continue from the newest valid checkpoint",
    )


def test_the_rollback_preview_lists_a_call_waiting_for_its_retry(operator, api_client):
    """It ran once (and failed); going back before it undoes it too."""
    script = [
        {"call": "flaky", "args": {"key": "preview-retry", "fail_times": 1, "error": "transient"}},
        {"final": "done"},
    ]
    task = scripted_task(script, ["flaky"], user=operator)
    run_in_process(task)
    assert task.status == "retry_wait"
    start = Checkpoint.objects.filter(task=task).order_by("seq").first()
    preview = api_client(operator).get(
        f"/api/v1/tasks/{task.id}/rollback/preview", {"checkpoint_id": str(start.id)}
    )
    assert [(c["tool"], c["status"]) for c in preview.json()["calls_undone"]] == [
        ("flaky", "retry_wait")
    ]
