"""A tool's result as the harness records it and the model reads it: text, described
references to other content, images for a model that takes them."""

from __future__ import annotations

import json
from typing import Any

from tasks.agent_state import MediaPart

MAX_RESULT_CHARS = 64 * 1024


# An embedded text resource's text, as the model reads it.
MAX_EMBEDDED_TEXT_CHARS = 8000
# Images passed to the model in its native form: each at most this much base64, this many
# per result (a bigger or further one is described only).
MAX_MEDIA_BYTES = 1024 * 1024
MAX_MEDIA_PER_RESULT = 4
MAX_REFS = 50
MODEL_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _clip(text: str) -> str:
    if len(text) > MAX_RESULT_CHARS:
        return text[:MAX_RESULT_CHARS] + f"… [truncated {len(text) - MAX_RESULT_CHARS} chars]"
    return text


def _b64_size(data: Any) -> int:
    text = str(data or "")
    return max(0, len(text) * 3 // 4 - text[-2:].count("="))


def content_ref(block: Any) -> dict[str, Any]:
    """What a non-text content block is, for the record (events, the ledger) and the model:
    its type, name, MIME type, URI and size, whichever it has. Never its data."""
    kind = str(getattr(block, "type", "content"))
    ref: dict[str, Any] = {"type": kind}
    if kind in ("image", "audio"):
        ref |= {"mime_type": block.mime_type, "size": _b64_size(block.data)}
    elif kind == "resource_link":
        ref |= {
            "name": block.name,
            "title": block.title,
            "uri": str(block.uri),
            "mime_type": block.mime_type,
            "size": block.size,
            "description": (block.description or "")[:500] or None,
        }
    elif kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        ref |= {
            "uri": str(resource.uri),
            "mime_type": resource.mime_type,
            "size": len(text.encode()) if text is not None else _b64_size(resource.blob),
            "encoding": "text" if text is not None else "binary",
        }
    return {key: value for key, value in ref.items() if value is not None}


def describe_block(block: Any, n: int) -> str:
    """A content block as text the model reads: text as it is; anything else as a described
    reference (what it is, its name, MIME type, URI and size), an embedded text resource
    with its text (bounded)."""
    kind = getattr(block, "type", "content")
    if kind == "text":
        return str(block.text)
    ref = content_ref(block)
    facts = [
        f"{key}: {json.dumps(ref[key], ensure_ascii=False)}"
        for key in ("name", "title", "uri", "mime_type", "size", "description")
        if key in ref
    ]
    label = {"resource_link": "resource link", "resource": "embedded resource"}.get(kind, kind)
    text = f"[{label} {n}" + (f" ({', '.join(facts)})" if facts else "") + "]"
    if kind == "resource":
        body = getattr(block.resource, "text", None)
        if body is not None:
            cut = len(body) - MAX_EMBEDDED_TEXT_CHARS
            text += "\n" + body[:MAX_EMBEDDED_TEXT_CHARS]
            if cut > 0:
                text += f"… [truncated {cut} chars]"
    return text


def content_text(blocks: list[Any]) -> str:
    return _clip("\n".join(describe_block(b, n) for n, b in enumerate(blocks, start=1)))


def content_media(blocks: list[Any]) -> list[MediaPart]:
    """The images of a result a model that takes images sees as images (bounded)."""
    media: list[MediaPart] = []
    for block in blocks:
        if (
            getattr(block, "type", "") == "image"
            and block.mime_type in MODEL_IMAGE_TYPES
            and len(str(block.data)) <= MAX_MEDIA_BYTES
            and len(media) < MAX_MEDIA_PER_RESULT
        ):
            media.append(MediaPart(kind="image", mime_type=block.mime_type, data=str(block.data)))
    return media


def result_json(result: Any) -> Any:
    """A successful CallToolResult as the JSON the harness records and shows the model: the
    structured content when the server gives one, else a JSON text block parsed, else the text
    of its content blocks."""
    if result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        if len(text) <= MAX_RESULT_CHARS:
            return result.structured_content
        return {"text": _clip(text)}
    text = content_text(result.content)
    if len(result.content) == 1 and text[:1] in "{[":
        # Many servers return JSON as text; keep it as JSON for the ledger and the model.
        try:
            return json.loads(text)
        except ValueError:
            pass
    refs = [content_ref(b) for b in result.content if getattr(b, "type", "") != "text"]
    # Non-text blocks are described in the text and listed (with their URIs) for the record.
    return {"text": text, **({"content": refs[:MAX_REFS]} if refs else {})}
