"""The cgroup of each sandbox (v2, or the v1 `pids`, `memory` and `cpuacct` hierarchies): where
new ones are made, their process and memory limits, their CPU time and the limits they hit, and
killing everything in one."""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from agent.tools.sandbox.config import SandboxUnavailable
from agent.tools.sandbox.limits import KILL_WAIT_S, POLL_S, Limits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Layout:
    version: int
    # controller -> the directory new sandbox cgroups are made in
    parents: dict[str, Path]


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for cgroup v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            own[name.removeprefix("name=")] = path
    return own


def _cgroup_mounts() -> dict[str, tuple[Path, str]]:
    """controller (or "" for cgroup v2) -> (mount point, mount root)."""
    mounts: dict[str, tuple[Path, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, point, fstype, options = fields[3], Path(fields[4]), tail[0], tail[2]
        if fstype == "cgroup2":
            mounts.setdefault("", (point, root))
        elif fstype == "cgroup":
            for option in options.split(","):
                mounts.setdefault(option, (point, root))
    return mounts


def _cgroup_dir(mount: tuple[Path, str], own_path: str) -> Path:
    point, root = mount
    relative = own_path
    if root != "/" and own_path.startswith(root):
        relative = own_path[len(root) :]
    return point / relative.lstrip("/")


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


@functools.cache
def cgroup_layout() -> _Layout:
    own, mounts = _own_cgroups(), _cgroup_mounts()
    if "" in mounts and "" in own:
        parent = _cgroup_dir(mounts[""], own[""])
        try:
            available = (parent / "cgroup.controllers").read_text().split()
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            missing = [c for c in ("pids", "memory") if c not in enabled]
            if {"pids", "memory"} <= set(available) and missing and _writable_dir(parent):
                (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
                missing = []
            if not missing and _writable_dir(parent):
                return _Layout(version=2, parents={"": parent})
        except OSError:
            pass
    parents = {}
    for controller in ("pids", "memory", "cpuacct"):
        if controller in mounts and controller in own:
            path = _cgroup_dir(mounts[controller], own[controller])
            if _writable_dir(path):
                parents[controller] = path
    if "pids" in parents and "memory" in parents:
        return _Layout(version=1, parents=parents)
    raise SandboxUnavailable(
        "the command sandbox needs a cgroup it can write for its whole-sandbox process and "
        "memory limits (cgroup v2 with the pids and memory controllers delegated to the "
        "worker, or the cgroup v1 pids and memory hierarchies). Run the workers as root, or in "
        "a delegated cgroup: `systemd-run --user --scope -p Delegate=yes ./harness up`"
    )


class Cgroup:
    """One sandbox's cgroup (a directory per v1 hierarchy, one directory for v2)."""

    def __init__(self, limits: Limits) -> None:
        self.layout = cgroup_layout()
        name = f"harness-sandbox-{uuid.uuid4().hex[:16]}"
        self.dirs: dict[str, Path] = {}
        try:
            for controller, parent in self.layout.parents.items():
                path = parent / name
                path.mkdir()
                self.dirs[controller] = path
            if self.layout.version == 2:
                self._write("", "pids.max", limits.processes)
                self._write("", "memory.max", limits.memory_bytes)
                self._write("", "memory.swap.max", 0, optional=True)
            else:
                self._write("pids", "pids.max", limits.processes)
                self._write("memory", "memory.limit_in_bytes", limits.memory_bytes)
                self._write("memory", "memory.memsw.limit_in_bytes", limits.memory_bytes, True)
        except OSError as exc:
            self.remove()
            raise SandboxUnavailable(f"could not set up the sandbox's cgroup: {exc}") from None

    def _write(self, controller: str, name: str, value: int, optional: bool = False) -> None:
        try:
            (self.dirs[controller] / name).write_text(str(value))
        except OSError:
            if not optional:
                raise

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.dirs[controller] / name).read_text()
        except (OSError, KeyError):
            return ""

    def procs_files(self) -> list[Path]:
        return [path / "cgroup.procs" for path in self.dirs.values()]

    @property
    def _main(self) -> str:
        return "" if self.layout.version == 2 else "pids"

    def pids(self) -> list[int]:
        return [int(p) for p in self._read(self._main, "cgroup.procs").split()]

    def cpu_s(self) -> float | None:
        if self.layout.version == 2:
            for line in self._read("", "cpu.stat").splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
            return None
        usage = self._read("cpuacct", "cpuacct.usage").strip()
        return int(usage) / 1e9 if usage else None

    def _event_count(self, controller: str, name: str, key: str) -> int:
        for line in self._read(controller, name).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
        return 0

    def limits_hit(self) -> list[str]:
        hit = []
        if self.layout.version == 2:
            oom = self._event_count("", "memory.events", "oom_kill")
            pids = self._event_count("", "pids.events", "max")
        else:
            oom = self._event_count("memory", "memory.oom_control", "oom_kill")
            pids = self._event_count("pids", "pids.events", "max")
        if oom:
            hit.append("memory")
        if pids:
            hit.append("processes")
        return hit

    def kill(self) -> None:
        """SIGKILL everything in the cgroup until it is empty (a fork racing the kill is
        caught on the next round)."""
        if self.layout.version == 2:
            self._write("", "cgroup.kill", 1, optional=True)
        deadline = time.monotonic() + KILL_WAIT_S
        pause = 0.001
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(pause)
            pause = min(pause * 2, POLL_S)
        if pids:
            log.error("sandbox cgroup %s still holds processes %s", self.dirs, pids)

    def remove(self) -> None:
        for path in self.dirs.values():
            pause = 0.001
            for _ in range(60):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(pause)  # the last exits are still being reaped
                    pause = min(pause * 2, POLL_S)
            else:
                log.error("could not remove the sandbox cgroup %s", path)
