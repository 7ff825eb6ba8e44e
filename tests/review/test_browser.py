"""An operator approves a paused call in headless Chromium and watches the task finish,
against a live server, PostgreSQL, Redis and real workers."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.conftest import PASSWORD, needs_chromium, wait_for

from .conftest import delete_script, make_task

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture
def page(browser):
    page = browser.new_page()
    page.set_default_timeout(15_000)
    return page


def test_operator_approves_in_the_browser_and_the_task_finishes(
    live_server, workers, page, operator
):
    task = make_task(
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

    page.goto(f"{live_server.url}/reviews/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/reviews/")
    assert page.inner_text("[data-testid=pending-count]") == "1"

    page.click("[data-testid=review-inbox] a:has-text('delete_file')")
    assert "Why was this paused?" in page.content()
    assert "-stale" in page.inner_text("[data-testid=preview]")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=approve]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.pk}/")

    def finished() -> bool:
        page.reload()
        return page.inner_text("[data-testid=task-status]") == "succeeded"

    wait_for(finished, 90, interval=0.3, message="the task page to show succeeded")
    assert not (task.workspace_path / "old.log").exists()
    assert page.query_selector("[data-testid=pending-count]") is None
