"""Outcomes that say what happened, in headless Chromium against the live server and real
workers running scripted tasks: a task whose risky call was rejected is marked on its page and
in the task list; a task stopped by its budget is retried from its page with a higher
`max_steps` and finishes, and the audit log shows the change; the rollback preview names the
write_file call it undoes and the file it deletes; "Recover (auto)" says what it chose and why."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tasks.models import Task, ToolCall
from tests.conftest import BROWSER, delete_script
from tests.factories import scripted_task
from tests.review.test_integration import pending_review, wait_status

pytestmark = [*BROWSER, pytest.mark.integration]

WRITES = [
    {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
    {"call": "write_file", "args": {"path": "new.txt", "content": "2"}},
    {"final": "both written"},
]


def test_a_task_whose_risky_call_was_rejected_says_so_on_its_page_and_in_the_list(
    live_server, workers, open_page, operator
):
    task = scripted_task(
        delete_script(),
        ["delete_file"],
        user=operator,
        enqueue=True,
        title="clean old logs",
        workspace={"files": {"old.log": "stale\n"}},
    )
    review = pending_review(task)
    page = open_page(operator, f"/reviews/{review.id}/", timeout_ms=30_000)
    page.fill("[data-testid=reject-reason]", "that log is evidence")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=reject]")
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    assert (task.workspace_path / "old.log").read_text() == "stale\n"

    page.goto(f"{live_server.url}/tasks/{task.id}/")
    header = page.inner_text("#task-live h1")
    assert "succeeded · 1 call rejected" in " ".join(header.split())
    page.goto(f"{live_server.url}/tasks/")
    row = page.inner_text(f"[data-task='{task.id}']")
    assert "succeeded · 1 call rejected" in " ".join(row.split())


def test_a_task_over_budget_is_retried_from_its_page_with_more_steps_and_finishes(
    live_server, workers, open_page, operator
):
    task = scripted_task(
        WRITES, ["write_file"], user=operator, enqueue=True, budget={"max_steps": 1}
    )
    assert wait_status(task, "succeeded", "failed") == "failed"
    assert Task.objects.get(id=task.id).error_class == "budget_exceeded"

    page = open_page(operator, f"/tasks/{task.id}/", timeout_ms=30_000)
    # Stopped at its budget: the retry's changes are open, prefilled with the budget in force.
    assert page.is_visible("[data-testid=retry-max-steps]")
    assert page.input_value("[data-testid=retry-max-steps]") == "1"
    page.fill("[data-testid=retry-max-steps]", "10")
    page.fill(".recover-actions input[name=reason]", "it needs one more step")
    page.click("[data-testid=retry-button]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.id}/")
    assert "Retry requested; changed budget.max_steps 1 → 10." in page.inner_text(".messages")
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    assert (task.workspace_path / "new.txt").read_text() == "2"

    page.goto(f"{live_server.url}/audit/?action=retry")
    entry = page.locator("[data-testid=audit-table] tbody tr", has_text="it needs one more step")
    assert '"budget.max_steps": 1' in entry.locator("[data-testid=audit-before]").inner_text()
    assert '"budget.max_steps": 10' in entry.locator("[data-testid=audit-after]").inner_text()


def test_the_rollback_preview_names_the_write_file_call_and_the_file_it_deletes(
    live_server, workers, open_page, operator
):
    task = scripted_task(WRITES, ["write_file"], user=operator, enqueue=True)
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    call = ToolCall.objects.get(task=task, arguments__path="new.txt")
    # The checkpoint taken just before that write ran: going back to it undoes the write.
    before_write = Checkpoint.objects.filter(
        task=task, trigger="before_write_operation", step_index=call.step_index
    ).get()

    page = open_page(operator, f"/tasks/{task.id}/?tab=checkpoints", timeout_ms=30_000)
    page.click(f"[data-testid=rollback-link-{before_write.seq}]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.id}/checkpoints/{before_write.id}/rollback/")
    assert page.inner_text("[data-testid=files-delete]").split() == ["new.txt"]
    undone = page.inner_text("[data-testid=calls-undone]")
    assert call.call_id in undone and "write_file" in undone and "new.txt" in undone
    assert "a.txt" not in undone

    page.fill("[data-testid=rollback-reason]", "new.txt was not wanted")
    page.check("input[name=then][value=hold]")
    page.click("[data-testid=rollback-confirm]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.id}/")
    assert not (task.workspace_path / "new.txt").exists()
    assert (task.workspace_path / "a.txt").read_text() == "1"


def test_recover_auto_shows_the_strategy_it_chose_and_why(
    live_server, workers, open_page, operator
):
    task = scripted_task(
        WRITES, ["write_file"], user=operator, enqueue=True, budget={"max_steps": 1}
    )
    assert wait_status(task, "succeeded", "failed") == "failed"
    page = open_page(operator, f"/tasks/{task.id}/", timeout_ms=30_000)
    page.fill(".recover-actions input[name=reason]", "carry on")
    page.click("[data-testid=auto-button]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.id}/")
    assert page.inner_text(".messages") == (
        "Recover (auto) chose forward: no failed tool call: continue from the newest valid "
        "checkpoint."
    )
