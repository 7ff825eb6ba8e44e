"""The `http_request` tool: its review preview and target fingerprint, the request (allowlist,
checked address, Idempotency-Key, no redirects, no proxy from the environment) and its bounded
answer."""

from __future__ import annotations

import time
from typing import Any

import httpx

from agent.http_headers import retry_after_seconds
from agent.tools.http.addresses import PinnedTransport, address_check
from agent.tools.http.args import TOOL_TIMEOUT_S, HttpRequestArgs
from agent.tools.http.origins import DEFAULT_PORTS, allowlist, origin_allowed
from tasks.tools.registry import (
    PermanentToolError,
    ToolContext,
    ToolError,
    TransientToolError,
    tool,
)

MAX_BODY_BYTES = 64 * 1024
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


def _preview(ctx: ToolContext, args: HttpRequestArgs) -> str:
    lines = [f"{args.method} {args.url}"]
    lines += [f"{name}: {value}" for name, value in args.headers.items()]
    if args.body is not None:
        body = args.body[:PREVIEW_BODY_CHARS]
        if len(args.body) > PREVIEW_BODY_CHARS:
            body += f"\n[… {len(args.body) - PREVIEW_BODY_CHARS} more characters]"
        lines += ["", body]
    return "\n".join(lines)


def _fingerprint(ctx: ToolContext, args: HttpRequestArgs) -> list[dict[str, Any]]:
    """The method, the origin and the address the request would connect to now."""
    url = httpx.URL(args.url)
    port = url.port or DEFAULT_PORTS[url.scheme]
    origin = f"{url.scheme}://{url.host}:{port}"
    target: dict[str, Any] = {"kind": "http", "key": origin, "method": args.method}
    try:
        return [{**target, "address": address_check(url.host, port)}]
    except PermanentToolError as exc:
        return [{**target, "refused": str(exc)}]
    except TransientToolError as exc:
        return [{**target, "unverified": str(exc)}]


@tool(
    risk="external",
    side_effect=True,
    idempotent=False,
    timeout_s=TOOL_TIMEOUT_S,
    preview=_preview,
    fingerprint=_fingerprint,
)
def http_request(ctx: ToolContext, args: HttpRequestArgs) -> dict:
    """Make an HTTP request to an allowlisted host. Returns status, selected headers and the
    body (truncated at 64 KiB). Redirects are not followed: a 3xx comes back with its Location."""
    url = httpx.URL(args.url)
    origins = allowlist()
    if not origin_allowed(url, origins):
        raise PermanentToolError(
            f"host {url.host!r} (port {url.port or DEFAULT_PORTS[url.scheme]}) is not allowed: "
            "add its origin to HARNESS_HTTP_ALLOWLIST"
            + ("" if origins else " (the allowlist is empty, so no host is allowed)")
        )
    address = address_check(url.host, url.port or DEFAULT_PORTS[url.scheme])
    if ctx.stop.is_set():
        raise ToolError("request not sent: task canceled", error_class="canceled")
    headers = {k: v for k, v in args.headers.items() if k.lower() != "idempotency-key"}
    headers["Idempotency-Key"] = ctx.idempotency_key
    timeout_s = ctx.timeout_s if args.timeout_s is None else min(args.timeout_s, ctx.timeout_s)
    deadline = time.monotonic() + timeout_s

    # trust_env=False: no proxy settings or ~/.netrc credentials from the worker's environment
    # may ride along on a request the model composed.
    try:
        with httpx.Client(
            timeout=timeout_s,
            follow_redirects=False,
            trust_env=False,
            transport=PinnedTransport(address),
        ) as client:
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
    ctx.output.attach(name=f"HTTP {status} body", data=body)
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
