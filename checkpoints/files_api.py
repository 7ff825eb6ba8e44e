"""`/api/v1/tasks/{id}/files…`: the workspace at a checkpoint, read-only (checkpoints.files).
`checkpoint_id` left out means the head checkpoint. 404 for a checkpoint that is not the
task's or a path not in its manifest, 422 for a malformed parameter, 409 when the checkpoint
or its snapshot fails verification."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.http.response import HttpResponseBase
from ninja import Router, Schema, Status
from ninja.params.functions import Query

from checkpoints import files
from checkpoints.selectors import entry_dict
from harness_base.http import AuthedRequest
from tasks.schemas import ERRORS
from tasks.selectors import access_task
from tasks.web.downloads import attachment

router = Router(tags=["files"])

PATH = Query(..., min_length=1, max_length=files.PATH_MAX_CHARS, description="a manifest path")
PREFIX = Query("", max_length=files.PATH_MAX_CHARS, description="keep paths that start with it")


class AtOut(Schema):
    id: UUID
    seq: int
    name: str
    head: bool


class FileOut(Schema):
    path: str
    hash: str
    size: int
    mode: str


class FilesOut(Schema):
    # None while the task has no checkpoint.
    checkpoint: AtOut | None
    files: list[FileOut]
    total_files: int
    total_bytes: int
    truncated: bool


class ContentOut(Schema):
    path: str
    checkpoint: AtOut
    hash: str
    size: int
    mode: str
    binary: bool
    truncated: bool
    # At most VIEW_MAX_BYTES of UTF-8 text; None for a binary file (use …/files/raw).
    text: str | None


def _refusal(exc: files.FilesInvalid | files.FilesUnreadable) -> Status[Any]:
    if isinstance(exc, files.FilesInvalid):
        return Status(
            422, {"detail": exc.message, "errors": [{"field": exc.field, "message": exc.message}]}
        )
    return Status(409, {"detail": str(exc)})


def _errors(action: Callable[[], dict[str, Any]]) -> Status[Any]:
    try:
        return Status(200, action())
    except (files.FilesInvalid, files.FilesUnreadable) as exc:
        return _refusal(exc)


@router.get("tasks/{task_id}/files", response={200: FilesOut, **ERRORS})
def files_list(
    request: AuthedRequest, task_id: str, checkpoint_id: UUID | None = None, prefix: str = PREFIX
) -> Status[Any]:
    """Every file of the workspace at the checkpoint (path, content hash, size, mode), by
    path; `prefix` keeps the paths that start with it. At most 5000 (`truncated`)."""
    task = access_task(request.user, task_id)

    def listing() -> dict[str, Any]:
        at = files.workspace_at(task=task, checkpoint_id=checkpoint_id)
        rows, truncated = files.files_list(at=at, prefix=prefix)
        return {
            "checkpoint": at.as_dict(),
            "files": rows,
            "total_files": len(at.manifest),
            "total_bytes": at.total_bytes,
            "truncated": truncated,
        }

    return _errors(listing)


@router.get("tasks/{task_id}/files/content", response={200: ContentOut, **ERRORS})
def file_content(
    request: AuthedRequest, task_id: str, path: str = PATH, checkpoint_id: UUID | None = None
) -> Status[Any]:
    """One file at the checkpoint: its text (at most 1 MiB, `truncated` beyond), or
    `binary` with no text."""
    task = access_task(request.user, task_id)

    def content() -> dict[str, Any]:
        at = files.workspace_at(task=task, checkpoint_id=checkpoint_id)
        view = files.file_view(at=at, path=files.file_path_check(path))
        return {
            "path": view.path,
            "checkpoint": at.as_dict(),
            **(entry_dict(view.entry) or {}),
            "binary": view.binary,
            "truncated": view.truncated,
            "text": view.text,
        }

    return _errors(content)


@router.get(
    "tasks/{task_id}/files/raw",
    response={200: None, **ERRORS},
    openapi_extra={
        "responses": {
            200: {
                "description": "the file's bytes, as an attachment",
                "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
                },
            }
        }
    },
)
def file_raw(
    request: AuthedRequest, task_id: str, path: str = PATH, checkpoint_id: UUID | None = None
) -> HttpResponseBase | Status[Any]:
    """The file's bytes as an `application/octet-stream` attachment."""
    task = access_task(request.user, task_id)
    try:
        at = files.workspace_at(task=task, checkpoint_id=checkpoint_id)
        _, body = files.file_bytes(at=at, path=files.file_path_check(path))
    except (files.FilesInvalid, files.FilesUnreadable) as exc:
        return _refusal(exc)
    return attachment(body, filename=path)
