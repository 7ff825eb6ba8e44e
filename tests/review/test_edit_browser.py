"""Edit-then-approve in headless Chromium: an operator types a file's new content with real
line breaks, previews the edited call's diff without leaving the page, approves, and the file
is written exactly as typed; the decided review shows that diff with the edit beside it.
Against a live server, PostgreSQL, Redis and a real worker."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import BROWSER, wait_for
from tests.factories import scripted_task

pytestmark = [*BROWSER, pytest.mark.integration]

ORIGINAL = "# service\nport=80\nworkers=2\n"
PROPOSED = "# service\nport=81\nworkers=2\n"
TYPED = "# service\nport=8080\nworkers=4\nlog=info\n"


def test_an_operator_edits_file_content_previews_it_and_the_file_is_written_as_typed(
    live_server, worker_pool, open_page, operator
):
    worker_pool.start(1)
    task = scripted_task(
        [
            {"call": "write_file", "args": {"path": "service.conf", "content": PROPOSED}},
            {"final": "configured"},
        ],
        ["write_file"],
        enqueue=True,
        title="configure the service",
        workspace={"files": {"service.conf": ORIGINAL}},
    )
    wait_for(
        lambda: Task.objects.get(pk=task.pk).status == "waiting_review",
        90,
        message="the task to pause for review",
    )
    review = ReviewRequest.objects.get(task=task)
    page = open_page(operator, f"/reviews/{review.id}/", timeout_ms=30_000)
    page.evaluate("window.stayedOnThisPage = true")

    content = page.locator("[data-testid=edit-field-content]")
    assert content.input_value() == PROPOSED  # real line breaks, not "\n" escapes
    content.fill("")
    content.press_sequentially(TYPED)  # Enter types each line break
    page.click("[data-testid=edit-preview-button]")
    diff = page.wait_for_selector("[data-testid=edit-preview-diff]")
    shown = diff.inner_text()
    assert "-port=80\n" in shown and "+port=8080\n" in shown and "+log=info" in shown
    assert page.evaluate("window.stayedOnThisPage") is True  # swapped in, no reload
    assert page.locator("[data-testid=edit-field-content]").input_value() == TYPED
    assert Task.objects.get(pk=task.pk).status == "waiting_review"  # previewing decides nothing

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=edit-approve]")
    page.wait_for_url(f"{live_server.url}/reviews/")
    wait_for(
        lambda: Task.objects.get(pk=task.pk).status == "succeeded",
        90,
        message="the edited call to run and the task to finish",
    )
    assert (task.workspace_path / "service.conf").read_text() == TYPED

    page.goto(f"{live_server.url}/reviews/{review.id}/")
    written = page.inner_text("[data-testid=edited-call] [data-testid=preview]")
    assert "-port=80\n" in written and "+port=8080\n" in written and "+workers=4" in written
    edit = page.inner_text("[data-testid=edit-changes]")
    assert "content" in edit and "-port=81\n" in edit and "+port=8080\n" in edit
    assert "\\n" not in edit  # the text's lines, not its JSON
