"""`http_request`'s arguments (HttpRequestArgs): an absolute http(s) URL with no userinfo or
backslash, headers the call may set (never `Host` or a framing header), a bounded body and
timeout."""

from __future__ import annotations

import re
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

TOOL_TIMEOUT_S = 30.0
MAX_REQUEST_BODY_CHARS = 1024 * 1024


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
