"""The `mcp_servers` section: one MCP server, over stdio or streamable HTTP."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints, field_validator, model_validator

from harness_base.config.compensations import McpCompensation, McpToolName
from harness_base.config.fields import EnvName, Strict

# A server name joins its tools' names as `<server>__<tool>`, which must stay a name every model
# API accepts (`^[a-zA-Z0-9_-]{1,64}$`): no double underscore inside, short enough to leave room.
McpServerName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$", max_length=30)
]


def ro_paths_checked(paths: list[str]) -> list[str]:
    """Read-only mounts of a sandboxed server: absolute paths (or under `{harness}/`)."""
    for path in paths:
        if not path.startswith(("/", "{harness}/")) or "\0" in path:
            raise ValueError(
                f"{path!r}: read-only mounts must be absolute paths (or start {{harness}}/)"
            )
    return paths


class AgentMcpServer(Strict):
    """How the harness runs one MCP server of a registered OpenAI agent
    (`Agent(mcp_servers=[...])`), named as the SDK names it (`server.name`). A stdio server
    (`MCPServerStdio`) always runs in the task's sandbox, as a harness.yaml stdio server does:
    its command, args and env as the agent gives them, the workspace as its root and working
    directory (a `cwd` must lie inside it), `ro_paths` mounted read-only, no network unless
    `network: true`. A remote server (SSE, streamable HTTP) is connected from the worker only
    when `remote: true` says the operator allows its URL, as a harness.yaml `url` server."""

    ro_paths: list[str] = []
    network: bool = False
    remote: bool = False

    @field_validator("ro_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        return ro_paths_checked(paths)


class McpServerConfig(Strict):
    """One MCP server whose tools join the registry as `<server>__<tool>` (tasks/tools/mcp/).

    stdio (`command`): started per task run inside the task's sandbox, the workspace as its
    working directory, `env` (plus PATH) as its whole environment, `ro_paths` mounted read-only,
    no network unless `network: true`. Streamable HTTP (`url`): shared; `headers_env` maps a
    header to the environment variable of the worker that holds its value (never the value).
    In `command`, `env` and `ro_paths`, `{python}` stands for the worker's own interpreter (its
    virtualenv and base installation are then mounted read-only) and `{harness}` for the
    harness's base directory, so a server shipped with the harness needs no machine paths.
    `compensations` maps a tool to the one that undoes it (harness_base.config.compensations)."""

    command: list[Annotated[str, StringConstraints(min_length=1)]] | None = Field(
        default=None, min_length=1
    )
    env: dict[EnvName, str] = {}
    ro_paths: list[str] = []
    network: bool = False
    url: str | None = None
    headers_env: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]+$", max_length=100)], EnvName
    ] = {}
    # How long connecting and listing the tools may take.
    connect_timeout_s: float = Field(default=20, gt=0, le=600)
    # A tool of this server -> the tool of this server that undoes its calls in a rollback.
    compensations: dict[McpToolName, McpCompensation] = Field(default_factory=dict, max_length=200)

    @field_validator("ro_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        return ro_paths_checked(paths)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL, e.g. http://127.0.0.1:8765/mcp")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        if self.url is not None and (self.env or self.ro_paths or self.network):
            raise ValueError("'env', 'ro_paths' and 'network' apply to stdio servers ('command')")
        if self.command is not None and self.headers_env:
            raise ValueError("'headers_env' applies to HTTP servers ('url')")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"
