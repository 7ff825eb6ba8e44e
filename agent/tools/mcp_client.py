"""Talking to MCP servers for one task run (the tools are described in tasks/tools/mcp.py).

One client session per server per task run, opened on first use and reused, closed when the
job ends; the SDK is async, so every session of a run lives on one event loop in a blocking
portal thread (never `asyncio.run` per call). The call id travels in the request's `_meta`
(`agent-harness/idempotency_key`, `agent-harness/call_id`) so a server can deduplicate.
`isError` results go back to the model as tool errors. A server found dead before a call (a
crashed stdio server) is restarted, once per call attempt; one that dies or times out during a
call is a transient failure for an idempotent tool and an unknown outcome otherwise.
"""

from __future__ import annotations

import base64
import configparser
import dataclasses
import functools
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal
from django.conf import settings
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp.types import PaginatedRequestParams, jsonrpc_message_adapter

from agent.retry import TIMEOUT, TRANSIENT, UNKNOWN_OUTCOME
from agent.tools.command import command_limits
from agent.tools.quota import DiskQuotaExceeded
from agent.tools.sandbox import (
    SandboxProcess,
    SandboxUnavailable,
    limit_message,
    sandbox_spawn,
)
from harness_base.config import McpServerConfig, harness_config
from tasks.agent_state import McpTool
from tasks.canonical import canonical_hash
from tasks.json_schema import json_schema_check, json_schema_validator
from tasks.models import OutputKind
from tasks.outputs import CallOutput
from tasks.tools.mcp import (
    MAX_DESCRIPTION_CHARS,
    TOOL_NAME,
    JsonSchemaArgs,
    check_tool_schema,
    content_media,
    content_text,
    mcp_name,
    mcp_server_of,
    mcp_servers_named,
    result_json,
    tool_pattern_matches,
)
from tasks.tools.registry import PermanentToolError, ToolContext, ToolError, TransientToolError

META_KEY = "agent-harness/idempotency_key"
CALL_ID_META_KEY = "agent-harness/call_id"
MAX_TOOLS_PER_SERVER = 500
MAX_LIST_PAGES = 20
PING_TIMEOUT_S = 5.0
# The longest JSON-RPC message a stdio server may send (one line).
MAX_MESSAGE_BYTES = 16 * 1024**2
# How often a running call checks its stdio server's sandbox limits (the workspace quota).
LIMIT_CHECK_S = 1.0
# The SDK's own read timeout stops a call this much before the harness's tool timeout, so the
# call ends with a classified error (timeout / unknown outcome) instead of being abandoned.
TIMEOUT_MARGIN_S = 0.5
# JSON-RPC error codes the SDK's client raises itself (mcp_types.jsonrpc).
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
# What is kept of a stdio server's stderr (a ring: its last lines) for the error that says why
# it did not start or died.
STDERR_LINES = 20
STDERR_BYTES = 4096
# How long a server that failed to start is given to finish exiting (its exit code and last
# stderr lines say why), once its stdout closed.
EXIT_WAIT_S = 2.0


class McpUnavailable(Exception):
    """A server could not be started, reached or listed. `transient`: trying again later may
    help (it did not answer); otherwise the configuration or the server's tool list is wrong."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def _headers(config: McpServerConfig) -> dict[str, str]:
    """Header values from the worker's environment; a missing variable fails closed."""
    headers = {}
    for header, var in config.headers_env.items():
        value = os.environ.get(var)
        if not value:
            raise McpUnavailable(f"environment variable {var} (for header {header}) is not set")
        headers[header] = value
    return headers


# --- stdio servers, inside the task's sandbox --------------------------------------------------


def _expand(value: str) -> str:
    """`{python}`: the worker's own interpreter; `{harness}`: the harness's base directory (so
    a shipped example server is configured without machine-specific paths)."""
    return value.replace("{python}", sys.executable).replace("{harness}", str(settings.BASE_DIR))


# Already in every sandbox (read-only): a venv whose base interpreter is here needs nothing more.
_SYSTEM_PREFIXES = (Path("/usr"), Path("/bin"), Path("/lib"), Path("/lib64"), Path("/sbin"))


def venv_mounts(command: str) -> list[Path]:
    """The read-only mounts a command that lives in a Python virtualenv needs: the venv (its
    `pyvenv.cfg` next to or above the command's directory) and its base interpreter's
    installation (`home =` in pyvenv.cfg, which names the base's bin directory), each at its
    real path and, when a symlink leads there, at the path the venv names. A venv's
    interpreter is a symlink to the base's: without the base the command is "not found"."""
    path = Path(command)
    if not path.is_absolute():
        return []
    candidates = [path.parent] + ([path.parent.parent] if path.parent.name == "bin" else [])
    for venv in candidates:
        cfg = venv / "pyvenv.cfg"
        if cfg.is_file():
            break
    else:
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string("[venv]\n" + cfg.read_text(errors="replace")[:10_000])
    except (OSError, configparser.Error):
        return []
    home = parser.get("venv", "home", fallback="").strip()
    mounts = [venv, venv.resolve()]
    if home and Path(home).is_absolute():
        stated = Path(home)
        prefix = stated.parent if stated.name == "bin" else stated
        mounts += [prefix, prefix.resolve()]
    return [
        m
        for m in dict.fromkeys(mounts)
        if m.is_dir()
        and m != Path("/")
        and not any(m == s or s in m.parents for s in _SYSTEM_PREFIXES)
    ]


def _clean_line(raw: bytes) -> str:
    """A line of a server's stderr as text for an error message: no colours, no control
    characters."""
    text = _ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip()
    return "".join(c if c >= " " or c == "\t" else "?" for c in text)


# A terminal escape (colours, cursor moves): npm and node colour their errors.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class StderrTail:
    """The last lines a stdio server wrote to stderr: a ring of STDERR_LINES raw lines (each
    cut at STDERR_BYTES), drained in chunks by a thread of its own so a chatty server never
    blocks on a full pipe and a flood costs only the reading. `lines()` is what an error
    message shows of it (cleaned, at most STDERR_BYTES)."""

    def __init__(self) -> None:
        self._lines: deque[bytes] = deque(maxlen=STDERR_LINES)
        self._partial = b""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def drain(self, pipe: Any) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(pipe,), daemon=True, name="mcp-stderr"
        )
        self._thread.start()

    def _run(self, pipe: Any) -> None:
        try:
            while chunk := pipe.read1(65536):
                *complete, partial = (self._partial + chunk).split(b"\n")
                with self._lock:
                    self._lines.extend(line[:STDERR_BYTES] for line in complete[-STDERR_LINES:])
                    self._partial = partial[-STDERR_BYTES:]
        except (OSError, ValueError):
            pass  # closed under us by the shutdown

    def lines(self, *, wait_s: float = 0.0) -> list[str]:
        """The kept lines, cleaned, the last STDERR_BYTES of them; `wait_s`: how long to wait
        for the server's end of the pipe to close (it exited: everything it wrote is in)."""
        if self._thread is not None and wait_s:
            self._thread.join(wait_s)
        with self._lock:
            raw = [*self._lines, self._partial]
        lines = [text for text in map(_clean_line, raw) if text.strip()]
        kept: list[str] = []
        size = 0
        for line in reversed(lines):
            size += len(line) + 1
            if size > STDERR_BYTES:
                break
            kept.append(line)
        return kept[::-1]


@dataclasses.dataclass
class _Started:
    """What a stdio server's start left to explain a failure: its process, its exit code if
    it exited before the session was up, and its stderr."""

    stderr: StderrTail = dataclasses.field(default_factory=StderrTail)
    process: SandboxProcess | None = None
    exit_code: int | None = None
    argv: list[str] = dataclasses.field(default_factory=list)
    network: bool = False


def server_argv(config: McpServerConfig) -> list[str]:
    return [_expand(part) for part in config.command or []]


def server_spawn(
    *, config: McpServerConfig, workspace: Path, stderr: StderrTail | None = None
) -> SandboxProcess:
    """Start a stdio server in a sandbox of its own over the task's workspace (its working
    directory): its configured environment (plus PATH and the sandbox's basics) and nothing
    else, `ro_paths` read-only, no network unless configured. The limits of `run_command`
    apply for the whole sandbox, without a wall or CPU clock: the server lives as long as the
    run and is killed, with everything it started, when the run ends. A command that lives in
    a Python venv gets the venv and its base interpreter mounted read-only (venv_mounts);
    `{python}` gets the worker's. Its stderr goes to `stderr` (the last lines are kept)."""
    argv = server_argv(config)
    ro_paths = [Path(_expand(path)) for path in config.ro_paths]
    if any("{python}" in part for part in config.command or []):
        # The interpreter needs its environment (a virtualenv) and its base installation.
        ro_paths += [Path(sys.prefix), Path(sys.base_prefix)]
    if argv:
        ro_paths += venv_mounts(argv[0])
    limits = dataclasses.replace(command_limits(1), wall_s=None, cpu_s=None)
    process = sandbox_spawn(
        argv=argv,
        workspace=workspace,
        limits=limits,
        env={
            # Without network npm can only use what is installed: say so at once (npx -y
            # would retry the registry for over a minute before it gives up).
            **({} if config.network else {"npm_config_offline": "true"}),
            **{key: _expand(value) for key, value in config.env.items()},
        },
        network=config.network,
        ro_paths=list(dict.fromkeys(ro_paths)),
        stderr=subprocess.DEVNULL if stderr is None else subprocess.PIPE,
    )
    if stderr is not None:
        stderr.drain(process.stderr)
    return process


# Why a command that exited before its session was up cannot start (a configuration to fix,
# not a server that is down): stderr patterns -> what it means and how to fix it. The first
# that matches wins.
_CANNOT_START: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (
            "ENOTCACHED",
            "EAI_AGAIN",
            "ENOTFOUND",
            "getaddrinfo",
            "npm error network",
            "npm ERR! network",
        ),
        "it needs the network to fetch a package (`npx -y` downloads it) and the sandbox has "
        "none: install the package beforehand (`npm install --prefix DIR PACKAGE`), add DIR "
        "to the server's ro_paths and run `node DIR/node_modules/PACKAGE/<its entry point>`",
    ),
    (
        ("Cannot find module", "ERR_MODULE_NOT_FOUND", "MODULE_NOT_FOUND"),
        "a Node module it loads is not there: check the script's path, install the package "
        "(`npm install --prefix DIR PACKAGE`) and add DIR to the server's ro_paths",
    ),
    (
        ("ModuleNotFoundError", "No module named"),
        "a Python module it imports is not there: install it in the server's virtualenv (the "
        "venv and its base interpreter are mounted when the command lives in it) or add its "
        "directory to ro_paths",
    ),
    (
        ("error while loading shared libraries",),
        "a shared library it needs is not inside the sandbox: add its directory to ro_paths",
    ),
    (
        ("Exec format error", "cannot execute binary file"),
        "the file is not a program this machine can run (exec format error)",
    ),
)


# Package runners that download what they run.
_FETCHERS = ("npx", "pnpx", "bunx", "uvx", "pipx")


def _interpreter_of(command: str) -> str | None:
    """The interpreter a script's `#!` line names, if the command is a script."""
    try:
        with open(command, "rb") as script:
            first = script.readline(300)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", errors="replace").split()
    return parts[0] if parts else None


def _not_found_hint(argv: list[str]) -> str:
    command = argv[0] if argv else ""
    if "/" not in command:
        return (
            f"{command!r} is not on the sandbox's PATH (/usr/bin, /bin): give its absolute "
            "path and add its directory to ro_paths"
        )
    if not Path(command).exists():
        return f"{command} does not exist on this machine"
    interpreter = _interpreter_of(command)
    if interpreter is not None:
        return (
            f"it exists, but its interpreter {interpreter} (its #! line) is not inside the "
            "sandbox: add that interpreter's installation to ro_paths (a virtualenv's base "
            "interpreter is mounted automatically when the command lives in the venv)"
        )
    return (
        "it exists, but it or the interpreter or loader it needs is not inside the sandbox: "
        "add their directories to ro_paths"
    )


def _cannot_start(started: _Started, lines: list[str]) -> str | None:
    """Why a stdio server that exited before its session was up cannot start, with how to fix
    it; None when nothing says it is more than a crash (which a retry may get past)."""
    fetcher = Path(started.argv[0]).name in _FETCHERS if started.argv else False
    if started.exit_code is None:
        # Still running at the timeout: a package runner without network waits on it.
        return _CANNOT_START[0][1] if fetcher and not started.network else None
    text = "\n".join(lines)
    for patterns, meaning in _CANNOT_START:
        if any(p in text for p in patterns):
            return meaning
    if started.exit_code == 127 or "not found" in text:
        return f"the command was not found inside the sandbox: {_not_found_hint(started.argv)}"
    if started.exit_code == 126:
        return "the command cannot be executed (permission denied or not a program)"
    return None


def _start_failure(server: str, started: _Started | None, reason: str) -> McpUnavailable:
    """The error of a server that did not start: its last stderr lines, and permanent when
    the command cannot start (a retry would fail the same way) with how to fix it."""
    if started is None or started.process is None:
        return McpUnavailable(reason, transient=True)
    lines = started.stderr.lines(wait_s=EXIT_WAIT_S if started.exit_code is not None else 0)
    cause = _cannot_start(started, lines)
    if started.exit_code is not None:
        reason += f" (it exited with code {started.exit_code} before the session was up)"
    if cause is not None:
        reason += f"; it cannot start: {cause}"
    if lines:
        reason += "\nits last stderr lines:\n" + "\n".join(f"  {line}" for line in lines)
    return McpUnavailable(reason, transient=cause is None)


def _readline(pipe: Any) -> bytes:
    try:
        return pipe.readline(MAX_MESSAGE_BYTES)
    except (OSError, ValueError):  # closed under us by the shutdown
        return b""


def _write(pipe: Any, data: bytes) -> None:
    pipe.write(data)
    pipe.flush()


def _exit_code(process: SandboxProcess, wait_s: float) -> int | None:
    try:
        return process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None


@asynccontextmanager
async def sandboxed_stdio(
    *, config: McpServerConfig, workspace: Path, started: _Started | None = None
) -> AsyncIterator[tuple[Any, Any, SandboxProcess]]:
    """The SDK's stdio transport, over a sandboxed process: newline-delimited JSON-RPC on its
    stdin and stdout (blocking pipe I/O in worker threads), and at the end a `close()` that
    kills everything the server started. Yields the streams and the process. `started` gets
    the process, its stderr's last lines and, when the session fails, its exit code if it
    exited (given EXIT_WAIT_S once its stdout closed)."""
    started = started or _Started()
    started.argv, started.network = server_argv(config), config.network
    process = await anyio.to_thread.run_sync(
        functools.partial(server_spawn, config=config, workspace=workspace, stderr=started.stderr)
    )
    started.process = process
    stdout_closed = anyio.Event()
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        async with read_writer:
            while line := await anyio.to_thread.run_sync(
                _readline, process.stdout, abandon_on_cancel=True
            ):
                try:
                    item: SessionMessage | Exception = SessionMessage(
                        jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except ValueError as exc:
                    item = exc
                try:
                    await read_writer.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
            stdout_closed.set()

    async def stdin_writer() -> None:
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await anyio.to_thread.run_sync(
                        _write, process.stdin, (data + "\n").encode(), abandon_on_cancel=True
                    )
                except (OSError, ValueError):
                    # The server is gone: end the session's reads instead of hanging.
                    await read_writer.aclose()
                    return

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(stdout_reader)
            tasks.start_soon(stdin_writer)
            try:
                yield read_stream, write_stream, process
            except BaseException:
                # The session failed (before it was up, or while it was used): an exit says
                # why. A server whose stdout closed is given EXIT_WAIT_S to finish exiting.
                wait_s = EXIT_WAIT_S if stdout_closed.is_set() else 0.0
                with anyio.CancelScope(shield=True):
                    started.exit_code = await anyio.to_thread.run_sync(_exit_code, process, wait_s)
                raise
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(process.close)


class _ClientSession(ClientSession):
    """The SDK's session, checking a tool's structured results against its `outputSchema` on
    RE2 (tasks/json_schema.py): the SDK's own validator runs the server's patterns on Python's
    backtracking `re`, in this worker, where `^(a+)+$` pins a CPU for hours. Overrides the
    SDK's (pinned) validator factory; its RuntimeError is the SDK's "answered unusably"."""

    def _output_schema_validator(self, name: str, output_schema: dict[str, Any]) -> Any:
        validator = self._tool_output_validators.get(name)
        if validator is None:
            try:
                json_schema_check(schema=output_schema)
            except ValueError as exc:
                raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from None
            validator = json_schema_validator(schema=output_schema)
            self._tool_output_validators[name] = validator
        return validator


@asynccontextmanager
async def _session(
    *, server: str, config: McpServerConfig, workspace: Path, started: _Started | None = None
) -> AsyncIterator[tuple[Any, SandboxProcess | None]]:
    """(an initialized client session, the sandboxed server process for a stdio server)."""
    if config.url is not None:
        http = create_mcp_http_client(headers=_headers(config))
        async with (
            http,
            streamable_http_client(config.url, http_client=http) as (read, write),
            _ClientSession(read, write) as session,
        ):
            with anyio.fail_after(config.connect_timeout_s):
                await session.initialize()
            yield session, None
    else:
        async with (
            sandboxed_stdio(config=config, workspace=workspace, started=started) as (
                read,
                write,
                process,
            ),
            _ClientSession(read, write) as session,
        ):
            with anyio.fail_after(config.connect_timeout_s):
                await session.initialize()
            yield session, process


def _limit_text(crossed: str, connection: _Connection) -> str:
    assert connection.process is not None
    if crossed == "disk":
        connection.process.wait()  # killed: nothing writes while its additions are taken back
        error, _ = connection.process.quota_end("the MCP server's call")
        if error is not None:
            return f"the MCP server was stopped: {error}"
    return (
        f"the MCP server was stopped: {limit_message(crossed, connection.process.limits)}; "
        "what it wrote so far stays in the workspace (a rollback undoes it)"
    )


def _describe_error(exc: BaseException) -> str:
    """A one-line reason, unwrapping anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


class _Connection:
    def __init__(
        self,
        context: AbstractContextManager[Any],
        session: Any,
        process: SandboxProcess | None,
        started: _Started | None = None,
    ) -> None:
        self.context = context
        self.session = session
        # A stdio server's stderr (its last lines explain a crash).
        self.started = started
        # A stdio server's sandbox (its limits are checked while calls run); None over HTTP.
        self.process = process
        self.dead = False

    def limit_crossed(self) -> str | None:
        """The sandbox limit a stdio server has crossed (its workspace quota), which also
        stops it; None while within its limits."""
        if self.process is None:
            return None
        crossed = self.process.check_limits()
        if crossed is not None:
            self.process.kill(crossed)
            self.dead = True
        return crossed


class _LimitCrossed(Exception):
    def __init__(self, message: str, crossed: str) -> None:
        super().__init__(message)
        self.error = (
            DiskQuotaExceeded(message) if crossed == "disk" else PermanentToolError(message)
        )


class McpConnections:
    """The MCP sessions of one task run, on one event loop (a blocking portal thread) that
    starts with the first session and stops in `close()` at the end of the job."""

    def __init__(self, *, task_id: Any, workspace: Path) -> None:
        self.task_id = task_id
        self.workspace = workspace
        self.servers = harness_config().mcp_servers
        self._portal_context: AbstractContextManager[Any] | None = None
        self._portal: Any = None
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        # server -> the last connection or call error seen by this run (for /ops/).
        self.errors: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------

    def _portal_started(self) -> Any:
        if self._portal is None:
            self._portal_context = start_blocking_portal()
            self._portal = self._portal_context.__enter__()
        return self._portal

    def _connect(self, server: str) -> _Connection:
        config = self.servers.get(server)
        if config is None:
            raise McpUnavailable(f"MCP server {server!r} is not configured in harness.yaml")
        portal = self._portal_started()
        started = _Started() if config.command is not None else None
        context = portal.wrap_async_context_manager(
            _session(server=server, config=config, workspace=self.workspace, started=started)
        )
        try:
            session, process = context.__enter__()
        except TimeoutError:
            reason = f"MCP server {server!r} did not answer within {config.connect_timeout_s:g}s"
            error = _start_failure(server, started, reason)
            self.errors[server] = str(error)
            raise error from None
        except McpUnavailable as exc:
            self.errors[server] = str(exc)
            raise
        except SandboxUnavailable as exc:
            # No sandbox on this machine will not fix itself.
            reason = f"could not start MCP server {server!r}: {_describe_error(exc)}"
            self.errors[server] = reason
            raise McpUnavailable(reason) from None
        except BaseException as exc:
            # A server that is down may come up; one whose command cannot start will not.
            reason = f"could not start MCP server {server!r}: {_describe_error(exc)}"
            error = _start_failure(server, started, reason)
            self.errors[server] = str(error)
            raise error from None
        return _Connection(context, session, process, started)

    def _disconnect(self, connection: _Connection) -> None:
        with suppress(BaseException):
            connection.context.__exit__(None, None, None)

    def connection(self, server: str) -> _Connection:
        with self._lock:
            current = self._connections.get(server)
            if current is not None and not current.dead:
                return current
            if current is not None:
                self._disconnect(current)
                del self._connections[server]
            fresh = self._connect(server)
            self._connections[server] = fresh
            return fresh

    def close(self) -> None:
        """End every session (stdio servers are stopped) and the event loop."""
        with self._lock:
            for connection in self._connections.values():
                self._disconnect(connection)
            self._connections.clear()
            if self._portal_context is not None:
                with suppress(BaseException):
                    self._portal_context.__exit__(None, None, None)
            self._portal_context = self._portal = None

    # -- discovery ---------------------------------------------------------------------

    def list_tools(self, server: str) -> tuple[list[McpTool], list[str]]:
        """All of a server's tools (paginated) -> (tools, names skipped with the reason)."""
        connection = self.connection(server)
        tools: list[McpTool] = []
        skipped: list[str] = []
        cursor = None
        for _page in range(MAX_LIST_PAGES):
            try:
                result = self._portal.call(self._list_page, connection.session, cursor)
            except BaseException as exc:
                connection.dead = True
                reason = f"listing the tools of {server!r} failed: {_describe_error(exc)}"
                self.errors[server] = reason
                raise McpUnavailable(reason, transient=True) from None
            for item in result.tools:
                name = mcp_name(server, item.name)
                problem = None if TOOL_NAME.match(name) else "name not accepted by model APIs"
                problem = (
                    problem
                    or check_tool_schema(schema=item.input_schema, field="inputSchema")
                    or (
                        None
                        if item.output_schema is None
                        else check_tool_schema(schema=item.output_schema, field="outputSchema")
                    )
                )
                task_support = item.execution.task_support if item.execution else None
                if not problem and task_support == "required":
                    # Runs only as an MCP task (create, poll, result), which this client does
                    # not do: offered, it would always fail with "method not found".
                    problem = (
                        "requires MCP task augmentation (execution.taskSupport: required), "
                        "which the harness does not support; not offered to the model"
                    )
                if problem:
                    skipped.append(f"{item.name[:80]}: {problem}")
                    continue
                annotations = (
                    item.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
                    if item.annotations is not None
                    else {}
                )
                tools.append(
                    McpTool(
                        server=server,
                        tool=item.name,
                        description=(item.description or "")[:MAX_DESCRIPTION_CHARS],
                        input_schema=item.input_schema,
                        annotations=annotations,
                    )
                )
            cursor = result.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS_PER_SERVER:
                break
        return tools[:MAX_TOOLS_PER_SERVER], skipped

    @staticmethod
    async def _list_page(session: Any, cursor: str | None) -> Any:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        return await session.list_tools(params=params)

    # -- calls -------------------------------------------------------------------------

    def fingerprinter(self, tool: McpTool) -> Callable[[ToolContext, Any], list[dict[str, Any]]]:
        """The call's target (tasks.fingerprint): the server's tool list and this tool's entry
        in it, as the server lists them now (a server that changed a tool after a review
        opened does not run it on that approval)."""

        def fingerprint(ctx: ToolContext, args: Any) -> list[dict[str, Any]]:
            target: dict[str, Any] = {"kind": "mcp", "key": tool.name}
            try:
                listed, _skipped = self.list_tools(tool.server)
            except McpUnavailable as exc:
                return [{**target, "unverified": str(exc)}]
            entries = [t.model_dump(mode="json") for t in listed]
            mine = next((e for e in entries if e["tool"] == tool.tool), None)
            return [
                {
                    **target,
                    "tool_list": canonical_hash(entries),
                    "schema": canonical_hash(mine) if mine is not None else None,
                }
            ]

        return fingerprint

    def caller(self, tool: McpTool, *, idempotent: bool) -> Callable[[ToolContext, Any], Any]:
        def call(ctx: ToolContext, args: JsonSchemaArgs) -> Any:
            return self.call(tool, ctx, args.arguments(), idempotent=idempotent)

        return call

    def _alive(self, connection: _Connection) -> bool:
        try:
            self._portal.call(self._ping, connection.session)
        except BaseException:
            return False
        return True

    @staticmethod
    async def _ping(session: Any) -> None:
        with anyio.fail_after(PING_TIMEOUT_S):
            await session.send_ping()

    def call(
        self, tool: McpTool, ctx: ToolContext, arguments: dict[str, Any], *, idempotent: bool
    ) -> Any:
        server = tool.server
        try:
            connection = self.connection(server)
            if not self._alive(connection):
                # Dead before this call was sent (a crashed stdio server): restart it, once.
                connection.dead = True
                self.errors[server] = "the server had stopped answering; restarted for a call"
                connection = self.connection(server)
        except McpUnavailable as exc:
            if not exc.transient:
                # Its command cannot start (or it is configured wrongly): no retry helps.
                raise ToolError(str(exc), error_class="mcp_unavailable") from None
            # Nothing was sent: another attempt cannot duplicate anything.
            raise TransientToolError(str(exc)) from None
        if connection.process is not None:
            # The quota is the workspace's, across calls: this call gets what is left.
            connection.process.quota_restart()
        read_timeout = max(ctx.timeout_s - TIMEOUT_MARGIN_S, ctx.timeout_s * 0.9)
        meta = {META_KEY: ctx.idempotency_key, CALL_ID_META_KEY: ctx.call_id}
        future = self._portal.start_task_soon(
            self._call_tool,
            connection.session,
            tool.tool,
            arguments,
            read_timeout,
            meta,
            _progress_writer(ctx.output),
        )
        try:
            result = self._wait(future, ctx, connection)
        except CancelledError:
            raise ToolError("stopped: the call was canceled", error_class="canceled") from None
        except _LimitCrossed as exc:
            self.errors[server] = str(exc)
            raise exc.error from None
        except BaseException as exc:
            raise self._call_failure(server, connection, exc, idempotent=idempotent) from None
        _show_content(ctx.output, result.content)
        ctx.media.extend(content_media(result.content))
        self._quota_end(tool, connection, result)
        if result.is_error:
            raise PermanentToolError(
                f"{tool.name} reported an error: {content_text(result.content) or '(no text)'}"
            )
        return result_json(result)

    @staticmethod
    def _quota_end(tool: McpTool, connection: _Connection, result: Any) -> None:
        """After a stdio server answered: fail the call if it left the workspace past its
        quota (its limit check found it within just now: a late write) or the kernel refused
        a write at what was left of it."""
        if connection.process is None:
            return
        error, capped = connection.process.quota_end(tool.name)
        if error is not None:
            raise error
        if capped:
            said = f" ({content_text(result.content)[:200]})" if result.is_error else ""
            quota = connection.process.limits.disk_bytes // 1024**2
            raise DiskQuotaExceeded(
                f'disk quota reached (limits_hit: ["disk"]): {tool.name} wrote up to what was '
                f"left of the workspace's quota of {quota} MiB (harness.yaml sandbox.disk_mb) "
                f"and a write past it failed with 'File too large'{said}"
            )

    @staticmethod
    async def _call_tool(
        session: Any,
        name: str,
        arguments: dict[str, Any],
        timeout: float,
        meta: dict[str, Any],
        progress: Callable[..., Any],
    ) -> Any:
        # A progress callback makes the SDK send a progressToken: the server's progress
        # notifications for this call arrive there.
        return await session.call_tool(
            name, arguments, read_timeout_seconds=timeout, meta=meta, progress_callback=progress
        )

    @staticmethod
    def _wait(future: Future, ctx: ToolContext, connection: _Connection) -> Any:
        """The call's result; a stop (cancel, lease lost, the harness's timeout) cancels it. A
        stdio server's sandbox limits are checked as it runs and once it answered: crossing
        one stops the server (it is restarted for the next call)."""
        checked = time.monotonic()
        while True:
            try:
                result = future.result(timeout=0.05)
                break
            except FutureTimeout:
                if ctx.stop.is_set():
                    future.cancel()
                    raise CancelledError() from None
                if time.monotonic() - checked >= LIMIT_CHECK_S:
                    checked = time.monotonic()
                    if (crossed := connection.limit_crossed()) is not None:
                        future.cancel()
                        raise _LimitCrossed(_limit_text(crossed, connection), crossed) from None
        if (crossed := connection.limit_crossed()) is not None:
            raise _LimitCrossed(_limit_text(crossed, connection), crossed)
        return result

    def _call_failure(
        self, server: str, connection: _Connection, exc: BaseException, *, idempotent: bool
    ) -> ToolError:
        reason = _describe_error(exc)
        if isinstance(exc, MCPError) and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
            # The server answered with an error (unknown tool, invalid params): permanent.
            return PermanentToolError(f"MCP server {server!r} refused the call: {exc.message}")
        if type(exc) is RuntimeError:
            # The SDK's own verdict on an answer (structured content against the tool's
            # outputSchema, an input request this client does not take): the server answered.
            return PermanentToolError(f"MCP server {server!r} answered unusably: {reason}")
        timed_out = isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT
        if timed_out and connection.process is not None:
            # A stdio server that let a call time out may be stuck in it for good, and would
            # time out every later call: it is killed now, with all it started, and the next
            # call starts a fresh one. (An HTTP server is shared; the SDK cancels the request.)
            connection.process.kill()
        if not timed_out or connection.process is not None:
            connection.dead = True
            self.errors[server] = reason
        what = "timed out" if timed_out else f"lost its connection ({reason})"
        if not timed_out and connection.started is not None:
            lines = connection.started.stderr.lines()[-5:]
            if lines:
                what += "; its last stderr lines: " + " | ".join(lines)
        if idempotent:
            # Safe to send again with the same idempotency key.
            return ToolError(
                f"MCP server {server!r} {what} during the call",
                error_class=TIMEOUT if timed_out else TRANSIENT,
            )
        return ToolError(
            f"MCP server {server!r} {what} during the call; the tool is not idempotent, so "
            "whether it took effect is unknown",
            error_class=UNKNOWN_OUTCOME,
        )


# The progress stream of a call: one line per notification (the task page shows its tail
# live while the call runs; the whole, bounded, is kept with the call's outputs).
PROGRESS_STREAM = "progress"
MAX_PROGRESS_MESSAGE_CHARS = 300


def progress_line(progress: float, total: float | None, message: str | None) -> str:
    """`3/5 (60%): message` -- a server's progress notification as a line of text."""
    done = f"{progress:g}"
    if total:
        done += f"/{total:g} ({min(100.0, 100 * progress / total):.0f}%)"
    text = _clean_line(str(message or "").encode())[:MAX_PROGRESS_MESSAGE_CHARS]
    return f"{done}: {text}" if text else done


def _progress_writer(output: CallOutput) -> Callable[..., Any]:
    async def progress(progress: float, total: float | None, message: str | None) -> None:
        output.write(PROGRESS_STREAM, (progress_line(progress, total, message) + "\n").encode())

    return progress


def _decoded(data: Any) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (ValueError, TypeError):
        return b""


def _show_content(output: CallOutput, blocks: list[Any]) -> None:
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


# --- a task's MCP tools ---------------------------------------------------------------------


def mcp_tools_discover(
    *, connections: McpConnections, names: list[str]
) -> tuple[list[McpTool], list[dict[str, Any]]]:
    """List the servers a spec names -> (the tools it may use, one report per server for the
    `mcp_tools_listed` event). A tool named one by one that the server does not offer fails
    closed (McpUnavailable names it)."""
    chosen: list[McpTool] = []
    reports: list[dict[str, Any]] = []
    for server in mcp_servers_named(names):
        tools, skipped = connections.list_tools(server)
        patterns = [n for n in names if mcp_server_of(n) == server]
        offered = {t.name for t in tools}
        missing = [p for p in patterns if not p.endswith("*") and p not in offered]
        if missing:
            raise McpUnavailable(
                f"MCP server {server!r} does not offer {', '.join(missing)}; it offers: "
                + (", ".join(sorted(offered))[:1000] or "(no tools)")
            )
        mine = [t for t in tools if any(tool_pattern_matches(p, t.name) for p in patterns)]
        chosen.extend(mine)
        reports.append(
            {
                "server": server,
                "transport": connections.servers[server].transport,
                "tool_count": len(tools),
                "tools": [t.model_dump(mode="json") for t in mine],
                **({"skipped": skipped[:20]} if skipped else {}),
            }
        )
    return chosen, reports
