"""An operator reads the rollback preview in headless Chromium, rolls back, then resumes."""

from __future__ import annotations

from tasks.models import Task
from tests.checkpoints.conftest import checkpoint_after_step, files_of
from tests.conftest import BROWSER

pytestmark = BROWSER


def test_operator_rolls_back_from_the_task_page_after_reading_the_preview(
    live_server, open_page, operator, finished
):
    task = finished
    target = checkpoint_after_step(task, 1)

    page = open_page(operator, f"/tasks/{task.id}/?tab=checkpoints", timeout_ms=15_000)

    page.click(f"[data-testid=rollback-link-{target.seq}]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.id}/checkpoints/{target.id}/rollback/")
    assert page.inner_text("[data-testid=files-restore]").strip() == "app.conf"
    assert page.inner_text("[data-testid=files-delete]").strip() == "new.txt"
    assert page.inner_text("[data-testid=calls-undone]").count("write_file") == 3

    # The reason is required: the browser refuses to submit without one.
    page.click("[data-testid=rollback-confirm]")
    assert page.url.endswith(f"/checkpoints/{target.id}/rollback/")
    page.fill("[data-testid=rollback-reason]", "v2 broke the service")
    page.check("input[name=then][value=hold]")
    page.click("[data-testid=rollback-confirm]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.id}/")

    assert page.inner_text("[data-testid=task-status]") == "held"
    assert f"Rolled back to checkpoint #{target.seq}" in page.inner_text(".messages")
    assert files_of(task.workspace_path) == {"app.conf": b"version = 1\n"}
    page.goto(f"{live_server.url}/tasks/{task.id}/?tab=checkpoints")
    assert "superseded" in page.inner_text(f"#checkpoint-{target.seq + 1}")

    page.fill(".recover-actions input[name=reason]", "fixed upstream")
    page.click(".recover-actions button[value=resume]")
    page.wait_for_url(f"{live_server.url}/tasks/{task.id}/")
    assert page.inner_text("[data-testid=task-status]") == "queued"
    assert Task.objects.get(id=task.id).status == "queued"
