"""Running a command to completion in a sandbox (`sandbox_run`): its output captured (up to
MAX_OUTPUT_BYTES per stream), its wall clock, CPU time and disk quota watched, the stop event
obeyed, and nothing it started left running at the end."""

from __future__ import annotations

import functools
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent.tools.quota import DiskQuotaExceeded
from agent.tools.sandbox.limits import DISK_POLL_MIN_S, POLL_S, DiskWatch, Limits
from agent.tools.sandbox.process import sandbox_spawn

MAX_OUTPUT_BYTES = 64 * 1024


class _ExitWaiter:
    """waiter(timeout) -> whether `proc` has exited, waking as soon as it does (a pidfd), not
    at the next poll; close() releases the pidfd."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.pidfd: int | None
        try:
            self.pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def __call__(self, timeout: float) -> bool:
        if self.pidfd is not None:
            select.select([self.pidfd], [], [], timeout)
            return self.proc.poll() is not None
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class _Capture(threading.Thread):
    """Drains one pipe to EOF, keeping the first MAX_OUTPUT_BYTES and handing every chunk to
    `seen` as it arrives. Draining the rest (rather than stopping) keeps a chatty command from
    blocking on a full pipe."""

    def __init__(self, pipe: IO[bytes], seen: Callable[[bytes], None] | None = None) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.seen = seen
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        try:
            read = self.pipe.read1  # type: ignore[attr-defined]  # Popen's pipes are BufferedReaders
            while chunk := read(65536):
                if self.seen is not None:
                    self.seen(chunk)
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


@dataclass(frozen=True)
class SandboxResult:
    # "exited", "timeout" (wall clock) or "canceled" (the stop event)
    outcome: str
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    duration_ms: int
    limits_hit: list[str]
    # The command left a directory past its disk quota (what it added to a workspace was
    # taken back): the call fails with this.
    quota_error: DiskQuotaExceeded | None = None


def sandbox_run(
    *,
    argv: Sequence[str],
    workspace: Path,
    limits: Limits,
    stop: threading.Event,
    env: dict[str, str] | None = None,
    cwd: str = ".",
    network: bool = False,
    ro_paths: Sequence[Path] = (),
    shared: Path | None = None,
    output: Callable[[str, bytes], None] | None = None,
) -> SandboxResult:
    """Run `argv` to completion in a new sandbox: until it exits, its wall clock or CPU time
    runs out, the workspace outgrows its quota, or `stop` is set. Nothing it started survives
    the return. Output is kept up to MAX_OUTPUT_BYTES per stream; `output("stdout" or
    "stderr", chunk)` sees all of it as it arrives."""
    started = time.monotonic()
    proc = sandbox_spawn(
        argv=argv,
        workspace=workspace,
        limits=limits,
        env=env,
        cwd=cwd,
        network=network,
        ro_paths=ro_paths,
        shared=shared,
        stdin=subprocess.DEVNULL,
    )
    outcome = "exited"
    with proc:
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = (
            _Capture(pipe, functools.partial(output, name) if output else None)
            for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr))
        )
        stdout.start()
        stderr.start()
        deadline = None if limits.wall_s is None else started + limits.wall_s
        watch = DiskWatch(next_check=started + DISK_POLL_MIN_S)
        exited = _ExitWaiter(proc.proc)
        try:
            while True:
                if exited(POLL_S):
                    break
                if stop.is_set():
                    outcome = "canceled"
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    outcome = "timeout"
                    break
                if now >= watch.next_check:
                    crossed = proc.check_limits()
                    watch.checked(now=now, cost=time.monotonic() - now)
                    if crossed is not None:
                        proc.kill(crossed)
                        proc.wait()
                        break
        finally:
            exited.close()
            # Even after a normal exit: nothing the command started may outlive the call.
            proc.kill()
            proc.wait()
        for capture in (stdout, stderr):
            capture.join(timeout=1.0)
        quota_error, capped = proc.quota_end("the command")
        crossed = "disk" if capped else proc.cpu_crossed()
        if crossed is not None and crossed not in proc.killed_for:
            proc.killed_for.append(crossed)
        hit = proc.limits_hit()
    return SandboxResult(
        outcome=outcome,
        exit_code=proc.returncode,
        stdout=stdout.text(),
        stderr=stderr.text(),
        truncated=bool(stdout.dropped or stderr.dropped),
        duration_ms=round((time.monotonic() - started) * 1000),
        limits_hit=hit,
        quota_error=quota_error,
    )
