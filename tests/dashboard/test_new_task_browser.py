"""Start a task from the browser (issue #45 item 3, "Done when"): in Chromium, a creator fills
in "New task" with an uploaded file and a scripted model, the task runs on real workers, its
spec is saved as a template from the task's page, and the template starts again with another
input. A file over the bound is refused before the form is sent, with nothing typed lost."""

from __future__ import annotations

import json

import pytest

from tasks.models import Task, TaskTemplate, ToolCall
from tasks.web.uploads import UPLOAD_FILE_MAX_BYTES
from tests.conftest import BROWSER

pytestmark = [*BROWSER, pytest.mark.integration]

SLOW_MS = 60_000
SCRIPT = [{"call": "read_file", "args": {"path": "in.txt"}}, {"final": "read it"}]


def read_result(task_id: str) -> str:
    call = ToolCall.objects.get(task_id=task_id, tool="read_file")
    return json.dumps(call.result)


def test_a_creator_starts_a_task_with_a_file_and_starts_its_template_again(
    live_server, open_page, workers, task_api, creator
):
    page = open_page(creator, "/tasks/", timeout_ms=SLOW_MS)
    page.click("[data-testid=nav-new-task]")
    page.wait_for_selector("[data-testid=new-task-form]")
    page.fill("[data-testid=new-title]", "Read the input")
    page.fill("[data-testid=new-goal]", "Read in.txt and say what it holds")
    page.select_option("[data-testid=new-agent]", "loop")
    page.select_option("[data-testid=new-model-kind]", "scripted")
    page.fill("[data-testid=new-model-script]", json.dumps(SCRIPT))
    page.check("[data-testid=new-tool-read_file]")
    page.fill("[data-testid=new-budget-max_steps]", "5")

    # Too large a file is refused before anything is sent: the page and what was typed stay.
    big = {"name": "in.txt", "mimeType": "text/plain", "buffer": b"x" * (UPLOAD_FILE_MAX_BYTES + 1)}
    page.set_input_files("[data-testid=new-upload]", big)
    page.click("[data-testid=new-start]")
    assert "at most" in page.inner_text("[data-testid=files-check]")
    assert page.input_value("[data-testid=new-title]") == "Read the input"
    assert not Task.objects.exists()

    upload = {"name": "in.txt", "mimeType": "text/plain", "buffer": b"first input\n"}
    page.set_input_files("[data-testid=new-upload]", upload)
    page.click("[data-testid=new-start]")
    page.wait_for_selector("[data-testid=save-template]")
    first_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    first = task_api.wait(first_id, "succeeded")
    assert first["created_by"] == creator.username and first["result"] == "read it"
    assert "first input" in read_result(first_id)

    # Its spec as a template, from the task's page; the New task page shows it to change.
    page.click("[data-testid=save-template] summary")
    page.fill("[data-testid=save-template-name]", "read a file")
    page.click("[data-testid=save-template-button]")
    page.wait_for_selector("[data-testid=new-task-form]")
    template = TaskTemplate.objects.get(created_by=creator)
    assert str(template.source_task_id) == first_id and "?template=" in page.url
    assert page.input_value("[data-testid=new-title]") == "Read the input"
    assert page.input_value("[data-testid=new-file-path-0]") == "in.txt"
    assert page.input_value("[data-testid=new-file-content-0]") == "first input\n"

    # Started again with another input.
    page.fill("[data-testid=new-file-content-0]", "second input\n")
    page.fill("[data-testid=new-title]", "Read the second input")
    page.click("[data-testid=new-start]")
    page.wait_for_selector("[data-testid=save-template]")
    second_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    assert second_id != first_id
    second = task_api.wait(second_id, "succeeded")
    assert second["title"] == "Read the second input"
    assert "second input" in read_result(second_id)
    assert "first input" not in read_result(second_id)
