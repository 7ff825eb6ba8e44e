"""The workspace at a checkpoint, read-only (checkpoints.files): a file's page, its download,
the tree as one archive, and the diff of one file between two checkpoints. The tree itself is
the task page's Files tab. Every role that reads the task reads these; nothing here acts."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render

from checkpoints import files
from checkpoints.models import Checkpoint
from checkpoints.selectors import task_checkpoints
from harness_base.http import AuthedRequest
from tasks.errors import NotFound
from tasks.selectors import access_task
from tasks.web.access import viewer_required
from tasks.web.downloads import attachment


def _refusals(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A bad parameter is a 422 naming it and an unreadable checkpoint a 409, as plain text
    (no parameter is echoed into HTML)."""

    @wraps(view)
    def wrapper(request: AuthedRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except files.FilesInvalid as exc:
            return HttpResponse(str(exc), status=422, content_type="text/plain; charset=utf-8")
        except files.FilesUnreadable as exc:
            return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")

    return wrapper


def _checkpoint_options(task_id: Any) -> QuerySet[Checkpoint]:
    return task_checkpoints(task_id=task_id).defer("payload")


@viewer_required
@_refusals
def file_page(request: AuthedRequest, task_id: UUID) -> HttpResponse:
    """One file at one checkpoint (the head by default): its text up to VIEW_MAX_BYTES, or
    that it is binary; links to download it and to compare it with another checkpoint."""
    task = access_task(request.user, task_id)
    path = files.file_path_check(request.GET.get("path"))
    at = files.workspace_at(task=task, checkpoint_id=request.GET.get("checkpoint"))
    view, status = None, 200
    try:
        view = files.file_view(at=at, path=path)
    except NotFound:
        status = 404
    return render(
        request,
        "checkpoints/file.html",
        {
            "task": task,
            "at": at,
            "path": path,
            "crumbs": files.folder_crumbs(path.rpartition("/")[0]),
            "file": view,
            "checkpoints": _checkpoint_options(task.id),
            "view_max": files.VIEW_MAX_BYTES,
        },
        status=status,
    )


@viewer_required
@_refusals
def file_download(request: AuthedRequest, task_id: UUID) -> HttpResponseBase:
    task = access_task(request.user, task_id)
    path = files.file_path_check(request.GET.get("path"))
    at = files.workspace_at(task=task, checkpoint_id=request.GET.get("checkpoint"))
    _, body = files.file_bytes(at=at, path=path)
    return attachment(body, filename=path)


@viewer_required
@_refusals
def archive_download(request: AuthedRequest, task_id: UUID) -> HttpResponseBase:
    """The whole tree at a checkpoint as `?format=zip` or `tar.gz`, streamed; refused (422)
    over HARNESS_ARCHIVE_MAX_FILES / HARNESS_ARCHIVE_MAX_BYTES."""
    task = access_task(request.user, task_id)
    fmt = request.GET.get("format", "zip")
    if fmt not in files.ARCHIVE_FORMATS:
        raise files.FilesInvalid("format", f"one of {', '.join(files.ARCHIVE_FORMATS)}")
    at = files.workspace_at(task=task, checkpoint_id=request.GET.get("checkpoint"))
    refusal = files.archive_refusal(at)
    if refusal:
        raise files.FilesInvalid("checkpoint", refusal)
    return attachment(
        files.archive_stream(at=at, fmt=fmt),
        filename=files.archive_name(at, fmt),
        content_type="application/zip" if fmt == "zip" else "application/gzip",
    )


@viewer_required
@_refusals
def file_diff_page(request: AuthedRequest, task_id: UUID) -> HttpResponse:
    """One file from checkpoint `a` to checkpoint `b` (the head when `b` is left out)."""
    task = access_task(request.user, task_id)
    path = files.file_path_check(request.GET.get("path"))
    if not request.GET.get("a"):
        raise files.FilesInvalid("a", "required: the checkpoint to compare from")
    a = files.workspace_at(task=task, checkpoint_id=request.GET.get("a"))
    b = files.workspace_at(task=task, checkpoint_id=request.GET.get("b"))
    return render(
        request,
        "checkpoints/file_diff.html",
        {
            "task": task,
            "path": path,
            "a": a,
            "b": b,
            "diff": files.file_diff(a=a, b=b, path=path),
            "checkpoints": _checkpoint_options(task.id),
        },
    )
