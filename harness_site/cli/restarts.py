"""How `harness up` heals a child that died (supervisord's and Celery's shape): the restart
policy (RestartPolicy: backoff doubling from 1 s to 30 s, given up after 5 restarts within
60 s), how a death is told (`exit_described`), and the status record the web process reads to
show the supervised processes on /ops/ (`status_write`; dashboard.supervised reads it)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RestartPolicy:
    """A child that dies is restarted after `initial_s`, doubling per restart within the
    window up to `cap_s`; one that died again after `max_restarts` restarts within `window_s`
    is given up on."""

    initial_s: float = 1.0
    cap_s: float = 30.0
    window_s: float = 60.0
    max_restarts: int = 5

    def backoff_s(self, *, recent_restarts: int) -> float:
        return min(self.cap_s, self.initial_s * 2**recent_restarts)


@dataclass
class RestartHistory:
    """When one child was restarted (monotonic seconds), for its backoff and its give-up."""

    policy: RestartPolicy
    times: deque[float] = field(default_factory=deque)

    def recent(self, now: float) -> int:
        while self.times and now - self.times[0] > self.policy.window_s:
            self.times.popleft()
        return len(self.times)

    def exhausted(self, now: float) -> bool:
        return self.recent(now) >= self.policy.max_restarts

    def next_backoff_s(self, now: float) -> float:
        return self.policy.backoff_s(recent_restarts=self.recent(now))

    def record(self, now: float) -> None:
        self.times.append(now)


def exit_described(returncode: int | None) -> str:
    """How a process ended, as the log and /ops/ say it: an exit code or the signal."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def status_write(path: Path, *, processes: list[dict[str, Any]]) -> None:
    """Replace the status record at `path` in one rename: a reader never sees half of one."""
    record = {"supervisor_pid": os.getpid(), "updated_at": time.time(), "processes": processes}
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(record))
    os.replace(partial, path)
