"""What a server sends back, for the task page: its progress notifications as a stream of
lines, and the content blocks of an answer as outputs (text, images, links, resources)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from agent.tools.mcp_client.stderr import clean_line
from tasks.models import OutputKind
from tasks.outputs import CallOutput

# The progress stream of a call: one line per notification (the task page shows its tail
# live while the call runs; the whole, bounded, is kept with the call's outputs).
PROGRESS_STREAM = "progress"
MAX_PROGRESS_MESSAGE_CHARS = 300


def progress_line(progress: float, total: float | None, message: str | None) -> str:
    """`3/5 (60%): message` -- a server's progress notification as a line of text."""
    done = f"{progress:g}"
    if total:
        done += f"/{total:g} ({min(100.0, 100 * progress / total):.0f}%)"
    text = clean_line(str(message or "").encode())[:MAX_PROGRESS_MESSAGE_CHARS]
    return f"{done}: {text}" if text else done


def progress_writer(output: CallOutput) -> Callable[..., Any]:
    async def progress(progress: float, total: float | None, message: str | None) -> None:
        output.write(PROGRESS_STREAM, (progress_line(progress, total, message) + "\n").encode())

    return progress


def _decoded(data: Any) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (ValueError, TypeError):
        return b""


def show_content(output: CallOutput, blocks: list[Any]) -> None:
    """The content blocks of an answer, for the task page: text as text, an image as an
    image (a safe type, else a download), a resource link as a link (http(s) only, else its
    text), an embedded resource as its text or bytes."""
    for n, block in enumerate(blocks, start=1):
        kind = getattr(block, "type", "")
        if kind == "text":
            output.attach(name=f"text {n}", data=str(block.text))
        elif kind in ("image", "audio"):
            output.attach(
                name=f"{kind} {n}",
                data=_decoded(block.data),
                kind=OutputKind.IMAGE if kind == "image" else OutputKind.BINARY,
                media_type=str(block.mime_type),
            )
        elif kind == "resource_link":
            # The URI is in the text too: a link is kept only for http(s).
            output.attach(
                name=f"link {n}",
                data=" ".join(
                    str(x) for x in (block.name, block.uri, block.mime_type) if x is not None
                ),
                kind=OutputKind.LINK,
                href=str(block.uri),
            )
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                output.attach(name=f"resource {n}", data=f"{resource.uri}\n{text}")
            else:
                output.attach(
                    name=f"resource {n}",
                    data=_decoded(getattr(resource, "blob", "")),
                    kind=OutputKind.BINARY,
                    media_type="application/octet-stream",
                )
