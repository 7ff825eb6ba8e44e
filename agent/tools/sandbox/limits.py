"""The limits of a sandbox: `Limits` (for the whole sandbox), what the model is told when one
ended its command, the clocks they are checked by (how often, how long a kill may take), and the
per-process rlimits set under the cgroup's whole-sandbox ones."""

from __future__ import annotations

import resource
from dataclasses import dataclass

from agent.tools.sandbox.config import sandbox_mode

POLL_S = 0.02
# The workspace quota is checked by walking the workspace: at most every DISK_POLL_S, sooner
# while it grows fast (see DiskWatch), never more often than DISK_POLL_MIN_S.
DISK_POLL_S = 0.2
DISK_POLL_MIN_S = 0.02
# A walk may cost at most this share of the time between walks (a big workspace is walked
# less often than a small one).
DISK_WALK_SHARE = 0.1
KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class Limits:
    """Whole-sandbox limits. `None` switches a clock off (a long-lived server has no wall or
    CPU limit; its caller decides when to close it)."""

    wall_s: float | None = 60.0
    cpu_s: float | None = 60.0
    memory_bytes: int = 1024**3
    processes: int = 256
    # The disk quota: how much the workspace may hold in all, and separately a group's
    # shared directory (bytes on disk, across calls; agent/tools/quota.py).
    disk_bytes: int = 512 * 1024**2
    file_bytes: int = 100 * 1024**2
    tmp_bytes: int = 256 * 1024**2
    open_files: int = 256

    def describe(self) -> str:
        parts = []
        if self.wall_s is not None:
            parts.append(f"wall clock {self.wall_s:g}s")
        if self.cpu_s is not None:
            parts.append(f"cpu {self.cpu_s:g}s")
        parts += [
            f"memory {self.memory_bytes // 1024**2} MiB",
            f"processes {self.processes}",
            f"disk quota {self.disk_bytes // 1024**2} MiB for the whole workspace",
            f"file size {self.file_bytes // 1024**2} MiB",
            f"/tmp {self.tmp_bytes // 1024**2} MiB",
            f"open files {self.open_files}",
        ]
        return ", ".join(parts) + " (for the whole sandbox)"


# What the model is told when a limit ended (or hampered) the command.
LIMIT_MESSAGES = {
    "memory": "the sandbox reached its memory limit of {memory} MiB; the kernel killed a process",
    "processes": "the sandbox reached its limit of {processes} processes; fork failed",
    "cpu": "the sandbox used its {cpu}s of CPU time and was killed",
    "disk": "the workspace reached its disk quota of {disk} MiB (harness.yaml sandbox.disk_mb): "
    "a write past it failed with 'File too large'",
}


def limit_message(name: str, limits: Limits) -> str:
    return LIMIT_MESSAGES[name].format(
        memory=limits.memory_bytes // 1024**2,
        processes=limits.processes,
        cpu=f"{limits.cpu_s:g}" if limits.cpu_s is not None else "?",
        disk=limits.disk_bytes // 1024**2,
    )


@dataclass
class DiskWatch:
    """When to walk the workspace next. The quota is polled, not enforced by the filesystem,
    so what a command can write past it is its write rate times the time between walks: walk
    as often as DISK_POLL_MIN_S while walking is cheap, with the walks taking at most
    DISK_WALK_SHARE of the time (a workspace of many files is walked less often), and never
    less often than DISK_POLL_S."""

    next_check: float

    def checked(self, *, now: float, cost: float) -> None:
        interval = min(DISK_POLL_S, max(DISK_POLL_MIN_S, cost / DISK_WALK_SHARE))
        self.next_check = now + interval


def rlimits(limits: Limits, *, file_cap: int) -> list[tuple[int, int]]:
    """Per-process limits under the cgroup's whole-sandbox ones: no single file larger than
    `file_cap` (the file limit, or the disk quota left), no core dumps, a bounded descriptor
    table."""
    wanted = [
        (resource.RLIMIT_FSIZE, file_cap),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if limits.cpu_s is not None:
        wanted.append((resource.RLIMIT_CPU, int(limits.cpu_s) + 1))
    if sandbox_mode() == "off":
        wanted.append((resource.RLIMIT_AS, limits.memory_bytes))
        wanted.append((resource.RLIMIT_NPROC, max(limits.processes, 1024)))
    capped = []
    for which, value in wanted:
        # Never ask for more than the worker's own hard limit: setrlimit would fail in the child.
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        capped.append((which, value))
    return capped
