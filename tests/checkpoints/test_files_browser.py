"""The workspace at any checkpoint in headless Chromium, on a task that real workers ran: a
file written and then changed shows its first content at the earlier checkpoint and its last at
the head, the diff between the two shows the change, and the tree downloads as a zip holding
the files. A viewer does all of it (the browser is read-only)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from checkpoints.models import Checkpoint
from tasks.models import Task
from tests.conftest import BROWSER, wait_for
from tests.factories import enqueued_task

pytestmark = [*BROWSER, pytest.mark.integration]

SCRIPT = [
    {"call": "write_file", "args": {"path": "docs/notes.txt", "content": "first draft\n"}},
    {"call": "write_file", "args": {"path": "docs/notes.txt", "content": "final text\n"}},
    {"call": "write_file", "args": {"path": "readme.md", "content": "# hello\n"}},
    {"final": "done"},
]


def test_a_viewer_reads_a_file_then_and_now_diffs_it_and_downloads_the_tree(
    live_server, workers, open_page, operator, viewer
):
    task = enqueued_task(SCRIPT, ["write_file"], user=operator, title="notes")
    wait_for(
        lambda: Task.objects.get(id=task.id).status == "succeeded",
        90,
        interval=0.2,
        message="the task to succeed",
    )
    # The end of the first step: notes.txt as first written.
    earlier = Checkpoint.objects.get(task=task, trigger="after_step", step_index=1)

    page = open_page(viewer, f"/tasks/{task.id}/?tab=files", timeout_ms=30_000)
    assert "head" in page.inner_text("[data-testid=files-at]")
    page.click("[data-testid=files-tree] a:text('docs/')")
    page.wait_for_selector("[data-testid=tree-file] a[data-path='docs/notes.txt']")
    page.click("[data-testid=tree-file] a[data-path='docs/notes.txt']")
    page.wait_for_selector("[data-testid=file-content]")
    assert page.inner_text("[data-testid=file-content]") == "final text\n"

    page.select_option("[data-testid=file-checkpoint]", str(earlier.id))
    page.click("form:has([data-testid=file-checkpoint]) button[type=submit]")
    page.wait_for_selector(f"[data-testid=file-at]:has-text('#{earlier.seq}')")
    assert page.inner_text("[data-testid=file-content]") == "first draft\n"
    page.screenshot(path=str(Path("/tmp/files-shots/file.png")), full_page=True)

    # From this checkpoint to the head (the compare form's defaults).
    page.click("[data-testid=file-compare] button[type=submit]")
    page.wait_for_selector("[data-testid=file-diff]")
    diff = page.inner_text("[data-testid=file-diff]")
    assert "-first draft" in diff and "+final text" in diff
    assert page.inner_text("[data-testid=diff-change]") == "changed"
    page.screenshot(path=str(Path("/tmp/files-shots/diff.png")), full_page=True)

    page.goto(f"{live_server.url}/tasks/{task.id}/?tab=files")
    page.screenshot(path=str(Path("/tmp/files-shots/tab.png")), full_page=True)
    with page.expect_download() as download:
        page.click("[data-testid=archive-zip]")
    with zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes())) as archive:
        assert sorted(archive.namelist()) == ["docs/notes.txt", "readme.md"]
        assert archive.read("docs/notes.txt") == b"final text\n"
