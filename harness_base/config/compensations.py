"""Compensations named in configuration: an MCP server's tool undone by another of its tools
(`mcp_servers.<name>.compensations`), an HTTP request undone by another request
(`http.compensations`). Their arguments are templates (harness_base.arg_templates) over the
original call's arguments (`args`) and its result (`result`), checked here at start-up."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, StringConstraints, field_validator

from harness_base.arg_templates import TemplateError, template_check
from harness_base.config.fields import Strict, compile_pattern

TEMPLATE_ROOTS = ("args", "result")

# An MCP tool's name as its server lists it (joined as `<server>__<tool>`).
McpToolName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", max_length=64)
]
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]

T = TypeVar("T")


def _template(value: T) -> T:
    try:
        template_check(value, roots=TEMPLATE_ROOTS)
    except TemplateError as exc:
        raise ValueError(f"template: {exc}") from None
    return value


class McpCompensation(Strict):
    """`create_issue: {tool: close_issue, args: {id: "{{ result.id }}"}}`: the server's tool
    that undoes a call, its arguments as templates over `args` and `result` (the structured
    content the server returned)."""

    tool: McpToolName
    args: dict[str, Any] = {}

    @field_validator("args")
    @classmethod
    def _args(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _template(value)


class HttpMatch(Strict):
    """The requests a compensation undoes: this method, and a URL equal to `url` where each
    `*` stands for any run of characters other than `/`, `?` and `#`."""

    method: HttpMethod
    url: str = Field(min_length=8, max_length=2000, pattern=r"^https?://")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value.count("*") > 8:
            raise ValueError("at most 8 '*' in a URL pattern")
        compile_pattern(url_pattern_regex(value))
        return value

    def matches(self, *, method: str, url: str) -> bool:
        return method.upper() == self.method and bool(
            compile_pattern(url_pattern_regex(self.url)).fullmatch(url)
        )


def url_pattern_regex(pattern: str) -> str:
    """`https://t.example/issues/*` as an RE2 pattern (each `*` one or more characters of a
    path segment)."""
    return "[^/?#]+".join(re.escape(part) for part in pattern.split("*"))


class HttpRequestTemplate(Strict):
    """The compensating request: `url` starts with its fixed origin and its first `/` (values
    may fill in the path and the query, each escaped as one path segment); `headers` and
    `json` (the body, sent as JSON) are templates. The HTTP allowlist still applies."""

    method: HttpMethod
    url: str = Field(min_length=8, max_length=2000)
    headers: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,100}$")], str] = Field(
        default_factory=dict, max_length=20
    )
    json_body: Any = Field(default=None, alias="json")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        origin, slash, _path = rest.partition("/")
        if scheme not in ("http", "https") or not sep or not slash or not origin:
            raise ValueError(
                "must be an absolute http(s) URL with a path, e.g. "
                "https://tracker.example/issues/{{ result.json.id }}"
            )
        if "{" in origin or "}" in origin or "@" in origin or "\\" in value:
            raise ValueError("the scheme and host are fixed text: templates fill in the path only")
        return _template(value)

    @field_validator("headers", "json_body")
    @classmethod
    def _templates(cls, value: Any) -> Any:
        return _template(value)


class HttpCompensation(Strict):
    match: HttpMatch
    request: HttpRequestTemplate


class HttpConfig(Strict):
    """`http:`: what `http_request` calls a rollback undoes, and how (the first match wins)."""

    compensations: list[HttpCompensation] = Field(default_factory=list, max_length=200)
