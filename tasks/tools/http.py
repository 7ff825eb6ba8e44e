"""`http_request`: an HTTP call to a host on the operator's allowlist (HARNESS_HTTP_ALLOWLIST).

Responses the model can act on (2xx, 3xx, 4xx other than 429) are results; rate limiting, 5xx
and connection failures are transient errors so the harness retries them with backoff. Every
request carries `Idempotency-Key: <task id>:<call id>`, so a retried call is recognisable
server-side.
"""

from __future__ import annotations

import time
from typing import Literal

import httpx
from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tasks.http_headers import retry_after_seconds
from tasks.tools.registry import (
    PermanentToolError,
    ToolContext,
    ToolError,
    TransientToolError,
    tool,
)

TOOL_TIMEOUT_S = 30.0
MAX_BODY_BYTES = 64 * 1024
MAX_REQUEST_BODY_CHARS = 1024 * 1024
PREVIEW_BODY_CHARS = 4000
RESULT_HEADERS = (
    "content-type",
    "content-length",
    "location",
    "retry-after",
    "etag",
    "last-modified",
    "cache-control",
    "date",
)


class HttpRequestArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "GET"
    url: str = Field(max_length=8000, description="an http:// or https:// URL")
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = Field(default=None, max_length=MAX_REQUEST_BODY_CHARS)
    timeout_s: float | None = Field(default=None, gt=0, le=TOOL_TIMEOUT_S)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(f"not a valid URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("must be an absolute http:// or https:// URL")
        return value


def host_allowed(host: str, allowlist: list[str]) -> bool:
    """Exact host match, or `*.example.com` for any subdomain of example.com (not the apex)."""
    host = host.lower().rstrip(".")
    for entry in allowlist:
        entry = entry.strip().lower().rstrip(".")
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and host != entry[2:]:
                return True
        elif entry and host == entry:
            return True
    return False


def _preview(ctx: ToolContext, args: HttpRequestArgs) -> str:
    lines = [f"{args.method} {args.url}"]
    lines += [f"{name}: {value}" for name, value in args.headers.items()]
    if args.body is not None:
        body = args.body[:PREVIEW_BODY_CHARS]
        if len(args.body) > PREVIEW_BODY_CHARS:
            body += f"\n[… {len(args.body) - PREVIEW_BODY_CHARS} more characters]"
        lines += ["", body]
    return "\n".join(lines)


@tool(
    risk="external", side_effect=True, idempotent=False, timeout_s=TOOL_TIMEOUT_S, preview=_preview
)
def http_request(ctx: ToolContext, args: HttpRequestArgs) -> dict:
    """Make an HTTP request to an allowlisted host. Returns status, selected headers and the
    body (truncated at 64 KiB). Redirects are not followed: a 3xx comes back with its Location."""
    url = httpx.URL(args.url)
    allowlist = list(settings.HARNESS_HTTP_ALLOWLIST)
    if not host_allowed(url.host, allowlist):
        raise PermanentToolError(
            f"host {url.host!r} is not allowed: add it to HARNESS_HTTP_ALLOWLIST"
            + ("" if allowlist else " (the allowlist is empty, so no host is allowed)")
        )
    if ctx.stop.is_set():
        raise ToolError("request not sent: task canceled", error_class="canceled")
    headers = {k: v for k, v in args.headers.items() if k.lower() != "idempotency-key"}
    headers["Idempotency-Key"] = ctx.idempotency_key
    timeout_s = ctx.timeout_s if args.timeout_s is None else min(args.timeout_s, ctx.timeout_s)
    deadline = time.monotonic() + timeout_s

    # trust_env=False: no proxy settings or ~/.netrc credentials from the worker's environment
    # may ride along on a request the model composed.
    try:
        with httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False) as client:
            with client.stream(
                args.method,
                url,
                headers=headers,
                content=args.body.encode() if args.body is not None else None,
            ) as response:
                body, truncated = _read_body(ctx, response, deadline)
    except httpx.TimeoutException as exc:
        raise TransientToolError(f"{args.method} {url}: timed out ({type(exc).__name__})") from None
    except httpx.TransportError as exc:
        raise TransientToolError(f"{args.method} {url}: connection failed: {exc}") from None

    status = response.status_code
    if status == 429 or status >= 500:
        raise TransientToolError(
            f"{args.method} {url}: HTTP {status} {response.reason_phrase}: {body[:500]}",
            retry_after_s=retry_after_seconds(response.headers.get("retry-after")),
        )
    return {
        "status": status,
        "headers": {k: response.headers[k] for k in RESULT_HEADERS if k in response.headers},
        "body": body,
        "truncated": truncated,
    }


def _read_body(ctx: ToolContext, response: httpx.Response, deadline: float) -> tuple[str, bool]:
    """At most MAX_BODY_BYTES of the body; httpx's timeouts are per read, so the overall
    deadline and the stop event are checked between chunks."""
    data = bytearray()
    truncated = False
    for chunk in response.iter_bytes():
        if ctx.stop.is_set():
            raise ToolError("request stopped: task canceled", error_class="canceled")
        if time.monotonic() > deadline:
            raise TransientToolError(
                f"{response.request.method} {response.request.url}: "
                "response body took longer than the timeout"
            )
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            truncated = True
            break
    encoding = response.encoding or "utf-8"
    try:
        text = bytes(data[:MAX_BODY_BYTES]).decode(encoding, errors="replace")
    except LookupError:
        text = bytes(data[:MAX_BODY_BYTES]).decode("utf-8", errors="replace")
    if truncated:
        text += "\n[truncated at 64 KiB]"
    return text, truncated
