"""The allowlist (HARNESS_HTTP_ALLOWLIST): its entries parsed into origins, and whether a URL
or a host is on it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx
from django.conf import settings

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
    scheme: str | None
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
