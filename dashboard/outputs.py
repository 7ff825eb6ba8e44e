"""Tool outputs on the pages and the API (tasks.outputs): the download of one stored part, and
the running call's live output. Output is hostile: a download is an attachment with
`nosniff`, text is served as text/plain, an image only under a safe image type."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpResponse
from django.utils import timezone

from tasks.models import OutputKind, Task, ToolOutput
from tasks.outputs import SAFE_IMAGE_TYPES, live_output_get, output_content
from tasks.states import TERMINAL, TaskStatus
from tasks.web.downloads import attachment, safe_filename

_SUFFIX = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
}


def output_content_type(row: ToolOutput) -> str:
    if row.kind == OutputKind.IMAGE and row.media_type in SAFE_IMAGE_TYPES:
        return row.media_type
    if row.kind in (OutputKind.TEXT, OutputKind.LINK):
        return "text/plain; charset=utf-8"
    return "application/octet-stream"


def output_filename(row: ToolOutput) -> str:
    stem = safe_filename(f"{row.call_id}-attempt{row.attempt}-{row.name}".replace("/", "_"))
    content_type = output_content_type(row)
    suffix = _SUFFIX.get(content_type, "txt" if content_type.startswith("text/") else "bin")
    return f"{stem}.{suffix}"


def output_download(row: ToolOutput) -> HttpResponse:
    """The stored bytes of one output part, as a download (an <img> still shows an image)."""
    response = attachment(
        output_content(row), filename=output_filename(row), content_type=output_content_type(row)
    )
    response["Cache-Control"] = "private, max-age=3600"
    return response


def live_output(*, task: Task, now: datetime | None = None) -> dict[str, Any] | None:
    """The task's running call as the page shows it: tool, call, attempt, seconds running and
    its streams as last published; None when no call runs (or the task has ended). A task
    that is not running any more (its worker was lost) shows what was last seen."""
    if task.status in TERMINAL:
        return None
    record = live_output_get(task_id=task.id)
    if record is None or record.get("finished"):
        return None
    lost = task.status != TaskStatus.RUNNING
    try:
        started = datetime.fromisoformat(str(record.get("started_at")))
        # A lost call ran until its last update, as far as anyone saw.
        until = datetime.fromisoformat(str(record.get("updated_at"))) if lost else None
    except ValueError:
        return None
    now = now or timezone.now()
    streams = record.get("streams")
    return {
        "call_id": str(record.get("call_id", "")),
        "tool": str(record.get("tool", "")),
        "attempt": record.get("attempt"),
        "elapsed_s": max(0.0, ((until or now) - started).total_seconds()),
        "streams": sorted(
            ((str(name), stream) for name, stream in streams.items() if isinstance(stream, dict)),
            key=_stream_order,
        )
        if isinstance(streams, dict)
        else [],
        "version": f"{record.get('version')}:{record.get('updated_at')}",
        "lost": lost,
        "progress": _latest_progress(streams),
    }


# stdout reads first, then stderr, then anything else by name.
STREAM_ORDER = {"stdout": 0, "stderr": 1}


def _stream_order(item: tuple[str, Any]) -> tuple[int, str]:
    return (STREAM_ORDER.get(item[0], len(STREAM_ORDER)), item[0])


def _latest_progress(streams: Any) -> str:
    """The last line of a call's `progress` stream (an MCP server's progress notifications,
    agent.tools.mcp_client), or ""."""
    stream = streams.get("progress") if isinstance(streams, dict) else None
    text = stream.get("text") if isinstance(stream, dict) else None
    lines = str(text or "").strip().splitlines()
    return lines[-1][:400] if lines else ""
