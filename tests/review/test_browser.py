"""An operator approves a paused call in headless Chromium and watches the task finish,
against a live server, PostgreSQL, Redis and real workers."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.conftest import BROWSER, delete_script, wait_for
from tests.factories import scripted_task

pytestmark = [*BROWSER, pytest.mark.integration]


def test_operator_approves_in_the_browser_and_the_task_finishes(
    live_server, workers, open_page, operator
):
    task = scripted_task(
        delete_script(),
        ["delete_file"],
        enqueue=True,
        title="clean old logs",
        workspace={"files": {"old.log": "stale\n"}},
    )
    wait_for(
        lambda: Task.objects.get(pk=task.pk).status == "waiting_review",
        90,
        message="the task to pause for review",
    )

    page = open_page(operator, "/reviews/", timeout_ms=15_000)
    assert page.inner_text("[data-testid=pending-count]") == "1"

    page.click("[data-testid=review-inbox] a:has-text('delete_file')")
    # The click starts the navigation; the review page is read once it has loaded.
    page.wait_for_url(f"{live_server.url}/reviews/*/")
    assert "Why was this paused?" in page.inner_text("main")
    assert "-stale" in page.inner_text("[data-testid=preview]")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=approve]")
    # No other review waits: the decision goes back to the inbox.
    page.wait_for_url(f"{live_server.url}/reviews/")
    page.goto(f"{live_server.url}/tasks/{task.pk}/")

    def finished() -> bool:
        page.reload()
        return page.inner_text("[data-testid=task-status]") == "succeeded"

    wait_for(finished, 90, interval=0.3, message="the task page to show succeeded")
    assert not (task.workspace_path / "old.log").exists()
    assert page.query_selector("[data-testid=pending-count]") is None
