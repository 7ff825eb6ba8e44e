"""The task page's Files tab (dashboard.views.task_page): a folder of the workspace as a
checkpoint's snapshot holds it."""

from __future__ import annotations

from typing import Any

from checkpoints import files
from checkpoints.selectors import task_checkpoints
from harness_base.http import AuthedRequest
from tasks.models import Task


def files_tab_context(request: AuthedRequest, task: Task) -> dict[str, Any]:
    """The Files tab: one folder (?dir=) of the workspace at a checkpoint (?checkpoint=, the
    head when absent), read from its snapshot (checkpoints.files)."""
    pinned = request.GET.get("checkpoint", "")
    context: dict[str, Any] = {
        "pinned": pinned,
        "checkpoint_options": task_checkpoints(task_id=task.id).defer("payload"),
    }
    try:
        at = files.workspace_at(task=task, checkpoint_id=pinned)
        listing = files.folder_listing(at=at, folder=files.folder_check(request.GET.get("dir")))
    except (files.FilesUnreadable, files.FilesInvalid) as exc:
        return {**context, "files_error": str(exc)}
    return {
        **context,
        "at": at,
        "listing": listing,
        "archive_refusal": files.archive_refusal(at),
        "archive_formats": files.ARCHIVE_FORMATS,
    }
