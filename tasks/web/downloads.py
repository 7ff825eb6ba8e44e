"""File downloads whose bytes come from a task (a workspace file, an archive of its tree):
always an attachment with a name made safe, never sniffed, never shown as a page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import overload

from django.http import HttpResponse, StreamingHttpResponse

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
NAME_MAX = 120


def safe_filename(name: str, *, fallback: str = "download") -> str:
    """The last component of `name`, reduced to letters, digits, `.`, `_` and `-` (no quotes,
    slashes, control characters or leading dots), at most NAME_MAX characters."""
    base = name.rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", base).lstrip(".")[-NAME_MAX:]
    return cleaned or fallback


@overload
def attachment(body: bytes, *, filename: str, content_type: str = ...) -> HttpResponse: ...
@overload
def attachment(
    body: Iterator[bytes], *, filename: str, content_type: str = ...
) -> StreamingHttpResponse: ...
def attachment(
    body: bytes | Iterator[bytes], *, filename: str, content_type: str = "application/octet-stream"
) -> HttpResponse | StreamingHttpResponse:
    """`body` as a download named `filename` (made safe): bytes at once, an iterator streamed.
    `nosniff` keeps a browser from reading it as HTML or script whatever it holds; the
    sandbox CSP disarms it if it is ever opened in a tab anyway."""
    if isinstance(body, bytes):
        response: HttpResponse | StreamingHttpResponse = HttpResponse(
            body, content_type=content_type
        )
    else:
        response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{safe_filename(filename)}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
