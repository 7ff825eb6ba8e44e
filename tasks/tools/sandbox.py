"""`run_command`: a shell command in the task's workspace, as a sandboxed subprocess.

The sandbox is a process-level one, not a container: a scrubbed environment (no secrets from the
worker's environment), the workspace as cwd and HOME, resource limits, its own session (so the
whole process group can be killed), a wall-clock timeout and prompt cancellation. It does not
isolate the network or the filesystem outside the workspace; review rules (`command_regex`) are
the guard for what a command may try.
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict, Field

from tasks.tools.registry import PermanentToolError, ToolContext, ToolError, tool

TOOL_TIMEOUT_S = 60.0
MAX_COMMAND_CHARS = 10_000
MAX_OUTPUT_BYTES = 64 * 1024
MEMORY_LIMIT_BYTES = 1024**3
FILE_SIZE_LIMIT_BYTES = 100 * 1024**2
OPEN_FILES_LIMIT = 256
# RLIMIT_NPROC counts every process of the worker's user, not only the command's, so it has to
# leave room for the worker itself and its siblings; root is not subject to it at all.
PROCESS_LIMIT = 1024
KILL_GRACE_S = 2.0
POLL_S = 0.05
PATH = "/usr/local/bin:/usr/bin:/bin"


class RunCommandArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        min_length=1,
        max_length=MAX_COMMAND_CHARS,
        description="a /bin/sh command line, run in the workspace",
    )
    timeout_s: float | None = Field(
        default=None, gt=0, le=TOOL_TIMEOUT_S, description="wall-clock limit in seconds"
    )


def _timeout(ctx: ToolContext, args: RunCommandArgs) -> float:
    if args.timeout_s is None:
        return ctx.timeout_s
    return min(args.timeout_s, ctx.timeout_s)


def _rlimits(timeout_s: float) -> list[tuple[int, int]]:
    cpu_s = math.ceil(timeout_s) + 1
    limits = [
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_AS, MEMORY_LIMIT_BYTES),
        (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT_BYTES),
        (resource.RLIMIT_NOFILE, OPEN_FILES_LIMIT),
        (resource.RLIMIT_NPROC, PROCESS_LIMIT),
        (resource.RLIMIT_CORE, 0),
    ]
    capped = []
    for which, value in limits:
        # Never ask for more than the worker's own hard limit: setrlimit would fail in the child.
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        capped.append((which, value))
    return capped


def _preview(ctx: ToolContext, args: RunCommandArgs) -> str:
    timeout_s = _timeout(ctx, args)
    return (
        f"$ {args.command}\n"
        f"cwd: the task workspace (HOME is the workspace; environment scrubbed)\n"
        f"limits: wall clock {timeout_s:g}s, cpu {math.ceil(timeout_s) + 1}s, "
        f"memory {MEMORY_LIMIT_BYTES // 1024**2} MiB, "
        f"file size {FILE_SIZE_LIMIT_BYTES // 1024**2} MiB, open files {OPEN_FILES_LIMIT}, "
        f"processes {PROCESS_LIMIT}; output kept: {MAX_OUTPUT_BYTES // 1024} KiB per stream"
    )


class _Capture(threading.Thread):
    """Drains one pipe to EOF, keeping the first MAX_OUTPUT_BYTES. Draining the rest (rather
    than stopping) keeps a chatty command from blocking on a full pipe."""

    def __init__(self, pipe: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        try:
            while chunk := self.pipe.read1(65536):
                room = MAX_OUTPUT_BYTES - len(self.kept)
                self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - room)
        except (OSError, ValueError):
            pass  # the pipe was closed under us after a kill

    def text(self) -> str:
        text = bytes(self.kept).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[truncated: {self.dropped} more bytes]"
        return text


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs. Zombies do not count: an orphaned job's
    zombie waits for PID 1 to reap it, which may be slow in a container, and it would make
    `killpg(pgid, 0)` report the group alive for the whole grace period."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the command's process group, then SIGKILL whatever is left after a grace. The
    group id is the shell's pid (its own session); the shell is reaped here as it dies so its
    zombie does not keep the group looking alive."""
    pgid = proc.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline:
        proc.poll()
        if not _group_alive(pgid):
            return
        time.sleep(POLL_S)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@tool(risk="write", side_effect=True, idempotent=False, timeout_s=TOOL_TIMEOUT_S, preview=_preview)
def run_command(ctx: ToolContext, args: RunCommandArgs) -> dict:
    """Run a shell command (/bin/sh -c) in the workspace with a timeout and resource limits.
    Returns exit_code, stdout, stderr (each truncated at 64 KiB) and duration_ms; a non-zero
    exit code is a normal result. The environment is minimal: PATH, HOME (the workspace), LANG."""
    workspace = Path(ctx.workspace).resolve()
    if not workspace.is_dir():
        raise PermanentToolError("the task workspace does not exist")
    timeout_s = _timeout(ctx, args)
    limits = _rlimits(timeout_s)

    def apply_limits() -> None:
        # Runs in the forked child before exec: only setrlimit calls, no Python-level locks,
        # so it cannot deadlock on a lock another worker thread held at fork time.
        for which, value in limits:
            resource.setrlimit(which, (value, value))

    # Scratch space beside the workspace, not in it, so temporary files never reach a snapshot.
    tmpdir = tempfile.mkdtemp(prefix=f".{workspace.name}-tmp-", dir=workspace.parent)
    env = {"PATH": PATH, "HOME": str(workspace), "LANG": "C.UTF-8", "TMPDIR": tmpdir}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", args.command],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=apply_limits,
            close_fds=True,
        )
        stdout, stderr = _Capture(proc.stdout), _Capture(proc.stderr)
        stdout.start()
        stderr.start()
        outcome = "exited"
        deadline = started + timeout_s
        try:
            while True:
                try:
                    proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if ctx.stop.is_set():
                    outcome = "canceled"
                    break
                if time.monotonic() >= deadline:
                    outcome = "timeout"
                    break
        finally:
            # The session's pgid is the shell's pid. Kill the group even after a normal exit
            # (or an error in this thread): background jobs must not outlive the call, nor
            # hold the output pipes open.
            _kill_group(proc)
            proc.wait()
        for capture in (stdout, stderr):
            # A process that left the group (its own setsid) may still hold a pipe; stop
            # waiting for it rather than hang, and let the reader finish when it exits.
            capture.join(timeout=1.0)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    if outcome == "timeout":
        raise ToolError(f"command timed out after {timeout_s:g}s", error_class="timeout")
    if outcome == "canceled":
        raise ToolError("command stopped: task canceled", error_class="canceled")
    return {
        "exit_code": proc.returncode,
        "stdout": stdout.text(),
        "stderr": stderr.text(),
        "truncated": bool(stdout.dropped or stderr.dropped),
        "duration_ms": round((time.monotonic() - started) * 1000),
    }
