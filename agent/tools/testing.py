"""Test tools (DESIGN §6), available only with HARNESS_ENABLE_TEST_TOOLS.

Their state lives under HARNESS_LEDGER_DIR, outside every workspace, so it survives worker
crashes, restarts and rollbacks: that is what lets tests see what really happened. Files are
guarded with `fcntl.flock` because several worker processes use them at once.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from tasks.tools.registry import (
    PermanentToolError,
    ToolContext,
    ToolError,
    TransientToolError,
    tool,
)

MAX_SLEEP_S = 3600.0


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FlakyArgs(_Args):
    key: str = Field(min_length=1, max_length=200)
    fail_times: int = Field(ge=0, le=1000)
    error: Literal["transient", "permanent"] = "transient"


class SleepArgs(_Args):
    seconds: float = Field(ge=0, le=MAX_SLEEP_S)
    # Recorded as the call starts (`started`): a test acts once the call is certainly running.
    mark: str | None = Field(default=None, min_length=1, max_length=200)


class LedgerAppendArgs(_Args):
    key: str = Field(min_length=1, max_length=200)
    value: str = Field(default="", max_length=10_000)


class NoopArgs(_Args):
    pass


def _ledger_dir() -> Path:
    return Path(settings.HARNESS_LEDGER_DIR)


def ledger_path() -> Path:
    return _ledger_dir() / "ledger.jsonl"


@contextmanager
def _locked(path: Path, flags: int) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, flags | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def ledger_records(*, key: str | None = None) -> list[dict]:
    """Every `ledger_append` execution recorded so far (optionally for one key), oldest first."""
    path = ledger_path()
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if key is None or r["key"] == key]


def _mark_path(mark: str) -> Path:
    return _ledger_dir() / "marks" / hashlib.sha256(mark.encode()).hexdigest()


def started(mark: str) -> bool:
    """A `sleep` call given `mark` has started (in any worker)."""
    return _mark_path(mark).exists()


@tool(risk="read", test_only=True, timeout_s=10, reports_changes=True)
def flaky(ctx: ToolContext, args: FlakyArgs) -> dict:
    """Fail `fail_times` times for `key` (with a transient or permanent error), then succeed.
    The count is shared by all workers and survives restarts."""
    digest = hashlib.sha256(args.key.encode()).hexdigest()
    with _locked(_ledger_dir() / "flaky" / digest, os.O_RDWR) as fd:
        raw = os.read(fd, 64).strip()
        attempt = int(raw or 0) + 1
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(attempt).encode())
        os.fsync(fd)
    if attempt <= args.fail_times:
        error = TransientToolError if args.error == "transient" else PermanentToolError
        raise error(f"flaky {args.key!r}: failure {attempt} of {args.fail_times}")
    return {"key": args.key, "attempt": attempt, "ok": True}


# A write, so its ToolCall row is committed as running before it starts (tests wait for that).
@tool(risk="write", side_effect=True, test_only=True, timeout_s=MAX_SLEEP_S, reports_changes=True)
def hold_interpreter(ctx: ToolContext, args: SleepArgs) -> dict:
    """Block for `seconds` inside one C call that keeps the interpreter lock, like a
    catastrophic regex in the `re` module: no other thread of the process runs meanwhile (not
    the heartbeat, not the loop's timeout) and the call cannot be stopped from inside."""
    # PyDLL calls keep the GIL (CDLL would release it).
    ctypes.PyDLL(None).sleep(int(args.seconds))
    return {"held_s": int(args.seconds)}


@tool(risk="read", test_only=True, timeout_s=MAX_SLEEP_S, reports_changes=True)
def sleep(ctx: ToolContext, args: SleepArgs) -> dict:
    """Sleep for `seconds`; stops early when the call is canceled or times out."""
    if args.mark:
        path = _mark_path(args.mark)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    started = time.monotonic()
    end = started + args.seconds
    deadline = started + ctx.timeout_s
    while (now := time.monotonic()) < end:
        if now >= deadline:
            raise ToolError(f"sleep timed out after {ctx.timeout_s:g}s", error_class="timeout")
        # Event.wait returns as soon as the harness sets the event, so slices can be long.
        if ctx.stop.wait(min(end, deadline) - now):
            raise ToolError("sleep stopped: task canceled", error_class="canceled")
    return {"slept_s": round(time.monotonic() - started, 3)}


@tool(
    risk="external",
    side_effect=True,
    idempotent=False,
    test_only=True,
    timeout_s=10,
    reports_changes=True,  # it writes outside the workspace only
)
def ledger_append(ctx: ToolContext, args: LedgerAppendArgs) -> dict:
    """Record `key`/`value` in the external ledger: a non-idempotent side effect that tests
    count per idempotency key to detect duplicate executions."""
    record = {
        "key": args.key,
        "value": args.value,
        "idempotency_key": ctx.idempotency_key,
        "task_id": ctx.task_id,
        "call_id": ctx.call_id,
        "pid": os.getpid(),
        "at": datetime.now(UTC).isoformat(),
    }
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    with _locked(ledger_path(), os.O_WRONLY | os.O_APPEND) as fd:
        os.write(fd, line)
        os.fsync(fd)
    return {"recorded": True, "key": args.key, "idempotency_key": ctx.idempotency_key}


@tool(risk="read", test_only=True, timeout_s=5, reports_changes=True)
def noop(ctx: ToolContext, args: NoopArgs) -> dict:
    """Do nothing (for benchmarks of the loop's own overhead)."""
    return {"ok": True}
