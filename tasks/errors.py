"""Error vocabulary shared by every layer: the tool error classes (how a tool reports a
failure, and whether it is worth retrying) and error fingerprints.

Error fingerprints: the error class plus the message with its volatile parts (ids, numbers,
paths, hashes) replaced, so that "the same failure" groups together across tasks.

Computed when an error is recorded (`tasks.services.task_transition`) and stored in
`Task.error_fingerprint`, so failure groups are a plain SQL GROUP BY."""

from __future__ import annotations

import hashlib
import re

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
# 8+ hex digits mixing letters and digits (hashes, job ids), or any 0x literal.
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b|\b0x[0-9a-f]+\b", re.I)
_PATH = re.compile(
    r"(?<![\w<])(?:[A-Za-z]:)?(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]*|"
    r"(?<![\w<])/[\w.-]+"
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_SPACE = re.compile(r"\s+")


def error_normalise(message: str) -> str:
    """The message with volatile parts replaced by placeholders (`<uuid>`, `<url>`, `<path>`,
    `<hex>`, `<n>`); quoted values keep their quotes but lose their content."""
    text = message[:2000]
    text = _URL.sub("<url>", text)
    text = _QUOTED.sub(lambda m: m.group(0)[0] + "…" + m.group(0)[0], text)
    text = _PATH.sub("<path>", text)
    text = _UUID.sub("<uuid>", text)
    text = _HEX.sub("<hex>", text)
    text = _NUMBER.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()[:500]


def error_fingerprint(error_class: str, message: str) -> str:
    """16 hex digits identifying (error class, normalised message); "" when there is no error."""
    if not error_class and not message:
        return ""
    key = f"{error_class}\n{error_normalise(message)}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


# The error class of a tool call (and a task) stopped because an operator canceled the task: an
# operator's decision, never counted as the tool's failure (tasks.rollups.settled_calls).
CANCELED_ERROR = "canceled"


class ToolError(Exception):
    """A tool's own failure. `error_class` classifies it for retry decisions:
    `transient` (worth retrying: timeouts, rate limits, connection errors, 5xx) or
    `permanent` (bad arguments, 4xx, the tool's own refusal)."""

    error_class = "permanent"

    def __init__(
        self, message: str, *, error_class: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        if error_class is not None:
            self.error_class = error_class
        self.retry_after_s = retry_after_s


class TransientToolError(ToolError):
    error_class = "transient"


class PermanentToolError(ToolError):
    error_class = "permanent"


class NotFound(LookupError):
    """A selector's answer for an unknown, malformed or unreadable id. Selectors raise it (or
    return None); the web layer maps it to 404 (`harness_site.api` for the API,
    `tasks.web.notfound.NotFoundMiddleware` for pages)."""
