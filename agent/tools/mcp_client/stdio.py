"""The SDK's stdio transport over a sandboxed process: newline-delimited JSON-RPC on the
server's stdin and stdout, bounded lines, and a close that kills everything the server started."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from agent.tools.mcp_client.launch import EXIT_WAIT_S, Started, server_argv, server_spawn
from agent.tools.sandbox import SandboxProcess
from harness_base.config import McpServerConfig

# The longest JSON-RPC message a stdio server may send (one line).
MAX_MESSAGE_BYTES = 16 * 1024**2


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
    *, config: McpServerConfig, workspace: Path, started: Started | None = None, cwd: str = "."
) -> AsyncIterator[tuple[Any, Any, SandboxProcess]]:
    """The SDK's stdio transport, over a sandboxed process: newline-delimited JSON-RPC on its
    stdin and stdout (blocking pipe I/O in worker threads), and at the end a `close()` that
    kills everything the server started. Yields the streams and the process. `started` gets
    the process, its stderr's last lines and, when the session fails, its exit code if it
    exited (given EXIT_WAIT_S once its stdout closed). `cwd`: its working directory, relative
    to the workspace."""
    started = started or Started()
    started.argv, started.network = server_argv(config), config.network
    process = await anyio.to_thread.run_sync(
        functools.partial(
            server_spawn, config=config, workspace=workspace, stderr=started.stderr, cwd=cwd
        )
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
