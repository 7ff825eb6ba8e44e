"""What a tool call's attempt produced, for people (the model reads its result): a command's
stdout and stderr, a file tool's diff, an HTTP body, an MCP server's content blocks.

A running tool hands its output to `ToolContext.output` (a `CallOutput`): streams as they
arrive (`write`), whole parts once known (`attach`). The worker keeps, per part, the first
STORED_BYTES (stored with the call's outcome as `ToolOutput` rows, compressed) and the last
LIVE_BYTES of a stream (published while the call runs, see `live_output_put`).

Everything here is hostile text: pages render it escaped, downloads are served as attachments
with `nosniff`, and an image is served only under one of SAFE_IMAGE_TYPES (never SVG).
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import django_rq
from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError

from tasks.models import PREVIEW_BYTES, OutputKind, ToolOutput

log = logging.getLogger(__name__)

# Of each part: stored for the download, shown on the task page, kept live while it runs.
STORED_BYTES = 2 * 1024 * 1024
LIVE_BYTES = 64 * 1024
# Parts kept per attempt (an MCP answer may carry any number of content blocks).
MAX_PARTS = 20
MAX_NAME_CHARS = 50
MAX_HREF_CHARS = 2000
SAFE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# A running call's live record: refreshed while it runs, kept this long after its last
# update (the outcome-unknown review of a worker lost mid-call copies it into the call's
# outputs); a finished call's, only as long as a lost worker takes to be noticed.
LIVE_TTL_S = 24 * 3600
FINISHED_TTL_S = 3600
LIVE_KEY = "harness:live-output:{task_id}"
# The numbers of a result the pages show with an attempt (run_command, http_request).
SUMMARY_NUMBERS = {"exit_code": "exit_code", "duration_ms": "ran_ms", "status": "http_status"}


@dataclass
class Part:
    name: str
    kind: str = OutputKind.TEXT
    media_type: str = "text/plain"
    href: str = ""
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    size: int = 0


class CallOutput:
    """The output of one attempt, as the tool hands it over. Thread-safe: a command's pipe
    readers write while the live publisher reads. Bounded: STORED_BYTES (+ LIVE_BYTES of
    tail) per part, MAX_PARTS parts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[str, Part] = {}
        self.dropped_parts = 0
        # Moves on every change: the live publisher sends only a changed output.
        self.version = 0

    def _part(self, name: str, **kind: Any) -> Part | None:
        part = self._parts.get(name)
        if part is None:
            if len(self._parts) >= MAX_PARTS:
                self.dropped_parts += 1
                return None
            part = self._parts[name] = Part(name=name[:MAX_NAME_CHARS], **kind)
        return part

    def write(self, name: str, data: bytes) -> None:
        """Append to the stream `name` (stdout, stderr)."""
        if not data:
            return
        with self._lock:
            part = self._part(name)
            if part is None:
                return
            room = STORED_BYTES - len(part.head)
            if room > 0:
                part.head += data[:room]
            part.tail += data[-LIVE_BYTES:]
            del part.tail[:-LIVE_BYTES]
            part.size += len(data)
            self.version += 1

    def attach(
        self,
        *,
        name: str,
        data: bytes | str = b"",
        kind: str = OutputKind.TEXT,
        media_type: str = "text/plain",
        href: str = "",
    ) -> None:
        """A whole part: a diff, a body, an image, a link (`href`, http(s) only: kept, else
        dropped to text)."""
        raw = data.encode("utf-8", errors="replace") if isinstance(data, str) else bytes(data)
        if kind == OutputKind.IMAGE and media_type not in SAFE_IMAGE_TYPES:
            kind, media_type = OutputKind.BINARY, "application/octet-stream"
        if kind == OutputKind.LINK:
            href = href[:MAX_HREF_CHARS] if safe_href(href) else ""
        with self._lock:
            unique = name if name not in self._parts else f"{name} {len(self._parts) + 1}"
            part = self._part(unique, kind=kind, media_type=media_type, href=href)
            if part is None:
                return
            part.head += raw[:STORED_BYTES]
            part.size = len(raw)
            self.version += 1

    def parts(self) -> list[Part]:
        with self._lock:
            return list(self._parts.values())

    def tails(self) -> dict[str, dict[str, Any]]:
        """The streams as they stand: their last LIVE_BYTES as text, and sizes."""
        with self._lock:
            return {
                part.name: {"text": _text(bytes(part.tail)), "size": part.size}
                for part in self._parts.values()
                if part.tail
            }


def safe_href(href: str) -> bool:
    return href.lower().startswith(("http://", "https://"))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def output_summary(result: Any) -> dict[str, Any]:
    """The facts of a result the pages show with its attempt: exit code, duration, limits
    hit, HTTP status (numbers and short names only, from a dict result)."""
    if not isinstance(result, dict):
        return {}
    summary: dict[str, Any] = {}
    for key, shown in SUMMARY_NUMBERS.items():
        value = result.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            summary[shown] = value
    limits = result.get("limits_hit")
    if isinstance(limits, list) and limits:
        summary["limits_hit"] = [str(name)[:20] for name in limits[:10]]
    return summary


def _row(
    *,
    task_id: Any,
    call_id: str,
    attempt: int,
    position: int,
    part: Part,
    data: bytes,
    partial: bool,
) -> ToolOutput:
    text = part.kind in (OutputKind.TEXT, OutputKind.LINK)
    preview = _text(data[-PREVIEW_BYTES:] if partial else data[:PREVIEW_BYTES]) if text else ""
    # A text part the preview holds exactly (a file tool's diff, a short stdout) is stored
    # once, as its preview: `data` stays empty (output_content reads the preview back).
    whole = text and not partial and len(data) <= PREVIEW_BYTES and preview.encode() == data
    return ToolOutput(
        task_id=task_id,
        call_id=call_id,
        attempt=attempt,
        position=position,
        name=part.name,
        kind=part.kind,
        media_type=part.media_type,
        href=part.href,
        size=part.size,
        stored=len(data),
        data=b"" if whole else zlib.compress(data, 6),
        # What was last seen of a lost call: its end.
        preview=preview,
        partial=partial,
    )


def output_rows(
    *, task_id: Any, call_id: str, attempt: int, output: CallOutput
) -> list[ToolOutput]:
    """The unsaved rows of an attempt's output (the worker writes them with its outcome)."""
    return [
        _row(
            task_id=task_id,
            call_id=call_id,
            attempt=attempt,
            position=n,
            part=part,
            data=bytes(part.head),
            partial=False,
        )
        for n, part in enumerate(output.parts())
    ]


def output_rows_last_seen(*, task_id: Any, record: dict[str, Any]) -> list[ToolOutput]:
    """The unsaved rows of what a live record last showed of a call whose worker was lost:
    each stream's tail, marked partial."""
    rows = []
    for n, (name, stream) in enumerate(sorted((record.get("streams") or {}).items())):
        data = str(stream.get("text", "")).encode("utf-8")[-LIVE_BYTES:]
        part = Part(name=str(name)[:MAX_NAME_CHARS], size=int(stream.get("size") or len(data)))
        rows.append(
            _row(
                task_id=task_id,
                call_id=str(record.get("call_id", ""))[:100],
                attempt=int(record.get("attempt") or 0),
                position=n,
                part=part,
                data=data,
                partial=True,
            )
        )
    return rows


def output_content(row: ToolOutput) -> bytes:
    data = bytes(row.data)
    if not data:
        # Stored as its preview alone (`_row`): the preview is the whole part.
        return row.preview.encode() if row.stored else b""
    return zlib.decompress(data)


# --- the live record of a running call (Redis) -------------------------------------------------


def _redis() -> Any:
    return django_rq.get_connection(settings.HARNESS_QUEUES[0])


def live_output_put(
    *,
    task_id: Any,
    call_id: str,
    tool: str,
    attempt: int,
    started_at: datetime,
    output: CallOutput,
    finished: bool = False,
) -> None:
    """Publish the running call's output as it stands (the task page polls it). Best
    effort: without Redis the page only lacks the live view."""
    record = {
        "call_id": call_id,
        "tool": tool,
        "attempt": attempt,
        "started_at": started_at.isoformat(),
        "updated_at": timezone.now().isoformat(),
        "finished": finished,
        "version": output.version,
        "streams": output.tails(),
    }
    try:
        _redis().set(
            LIVE_KEY.format(task_id=task_id),
            json.dumps(record),
            ex=FINISHED_TTL_S if finished else LIVE_TTL_S,
        )
    except (RedisError, OSError) as exc:
        log.warning("live output of task %s not published: %s", task_id, exc)


def live_output_get(*, task_id: Any) -> dict[str, Any] | None:
    """The task's live record (its running or last published call), or None."""
    try:
        raw = _redis().get(LIVE_KEY.format(task_id=task_id))
    except (RedisError, OSError) as exc:
        log.warning("live output of task %s not read: %s", task_id, exc)
        return None
    try:
        record = json.loads(raw) if raw else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
