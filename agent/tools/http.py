"""`http_request`: an HTTP call to an origin on the operator's allowlist (HARNESS_HTTP_ALLOWLIST).

The allowlist names origins: `https://api.example.com` (default port), `http://127.0.0.1:8080`,
`https://*.example.com:8443`; a bare host means https on 443 and http on 80 only. The host is
resolved once, every address it resolves to is checked against loopback, private, link-local
and other special ranges (refused unless HARNESS_HTTP_ALLOW_NETWORKS lists them), and the
connection goes to the address that passed the check, never to a second lookup (no DNS
rebinding); the Host header and TLS server name stay the URL's host. A URL with userinfo
(`user@host`) or a backslash, which URL parsers (and people) read differently, and a `Host`
or framing header (`Content-Length`, `Transfer-Encoding`, `Connection`, ...) in `headers` are
invalid arguments. Redirects are never followed.

Responses the model can act on (2xx, 3xx, 4xx other than 429) are results; rate limiting, 5xx
and connection failures are transient errors so the harness retries them with backoff. Every
request carries `Idempotency-Key: <task id>:<call id>`, so a retried call is recognisable
server-side.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpcore
import httpx
from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.http_headers import retry_after_seconds
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


# Headers the request's URL and body set: a `Host` of the model's would send the checked
# address's virtual hosting to another name (an internal site behind a shared proxy), and
# framing headers could make a proxy read one request as two.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}")


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
        # URL parsers disagree on both: `http://allowed.example\@127.0.0.1/` is a request to
        # 127.0.0.1 here and a link to allowed.example in a browser (and to a reviewer).
        if "\\" in value:
            raise ValueError("must not contain a backslash")
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(f"not a valid URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("must be an absolute http:// or https:// URL")
        if url.userinfo:
            raise ValueError("must not carry a user name or password (user@host)")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name[:100]!r} is not a header name")
            if name.lower() in RESERVED_HEADERS:
                raise ValueError(f"{name} is set from the URL and the body, not by the call")
            if any(c in value for c in "\r\n\0"):
                raise ValueError(f"the value of {name} has a line break or a NUL")
        return headers


DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    scheme: str | None  # None: a bare host entry (http on 80, https on 443)
    host: str  # lower case; `*.example.com` matches subdomains, not the apex
    port: int | None

    def allows(self, scheme: str, host: str, port: int) -> bool:
        if not host_allowed(host, [self.host]):
            return False
        if self.scheme is None:
            return port == DEFAULT_PORTS[scheme]
        return scheme == self.scheme and port == (self.port or DEFAULT_PORTS[scheme])

    def __str__(self) -> str:
        if self.scheme is None:
            return self.host
        return f"{self.scheme}://{self.host}" + (f":{self.port}" if self.port else "")


_ORIGIN = re.compile(r"(?P<host>\[[0-9a-fA-F:.]+\]|[^:/\[\]@?#\s]+)(?::(?P<port>\d{1,5}))?/?")


def origin_parse(entry: str) -> Origin:
    """One HARNESS_HTTP_ALLOWLIST entry. Raises ValueError naming what is wrong."""
    entry = entry.strip()
    scheme, sep, rest = entry.partition("://")
    if not sep:
        scheme, rest = None, entry
    match = _ORIGIN.fullmatch(rest)
    if (scheme is not None and scheme not in DEFAULT_PORTS) or not match:
        raise ValueError(f"HARNESS_HTTP_ALLOWLIST entry {entry!r}: use scheme://host[:port]")
    if scheme is None and match["port"]:
        raise ValueError(f"HARNESS_HTTP_ALLOWLIST entry {entry!r}: a port needs a scheme")
    host = match["host"].strip("[]").lower().rstrip(".")
    return Origin(scheme=scheme, host=host, port=int(match["port"]) if match["port"] else None)


def allowlist() -> list[Origin]:
    return [origin_parse(e) for e in settings.HARNESS_HTTP_ALLOWLIST if e.strip()]


def origin_allowed(url: httpx.URL, origins: list[Origin]) -> bool:
    port = url.port or DEFAULT_PORTS[url.scheme]
    return any(o.allows(url.scheme, url.host, port) for o in origins)


def url_allowed(url: str) -> bool:
    """Whether `url` names an origin on HARNESS_HTTP_ALLOWLIST (False for a malformed URL)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return False
    return parsed.scheme in DEFAULT_PORTS and origin_allowed(parsed, allowlist())


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


def _special(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def address_check(host: str, port: int) -> str:
    """Resolve `host` once and return the address to connect to: the first one that is public
    or inside HARNESS_HTTP_ALLOW_NETWORKS. Raises PermanentToolError when none is (a name
    resolving to a private address is refused even if it also has public ones), and
    TransientToolError when the name does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise TransientToolError(f"cannot resolve {host!r}: {exc}") from None
    allowed_networks = [
        ipaddress.ip_network(n, strict=False) for n in settings.HARNESS_HTTP_ALLOW_NETWORKS
    ]
    addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    refused = [
        a for a in addresses if _special(a) and not any(a in net for net in allowed_networks)
    ]
    if refused or not addresses:
        raise PermanentToolError(
            f"{host!r} resolves to {', '.join(map(str, refused or addresses))}: a loopback, "
            "private or link-local address is not reachable unless HARNESS_HTTP_ALLOW_NETWORKS "
            "lists it"
        )
    return str(addresses[0])


class _PinnedBackend(httpcore.SyncBackend):
    """Connects to the address that was checked, whatever the URL's host resolves to now."""

    def __init__(self, address: str) -> None:
        self.address = address

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return super().connect_tcp(self.address, port, timeout, local_address, socket_options)


class _PinnedTransport(httpx.HTTPTransport):
    def __init__(self, address: str) -> None:
        super().__init__(trust_env=False)
        # httpx has no public hook for the network backend; the pool it builds is replaced by
        # one with the same TLS context and the pinned backend (Host header and SNI come from
        # the request URL, so they stay the name the operator allowed).
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=_PinnedBackend(address),
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
            transport=_PinnedTransport(address),
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
