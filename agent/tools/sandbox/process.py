"""A running sandbox: `sandbox_spawn` starts a command in a new one (its cgroup entered and its
per-process limits set before it runs), and `SandboxProcess` is the Popen-like handle that
checks its limits and disk quotas and kills everything it started."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from agent.tools.quota import DiskQuota, DiskQuotaExceeded, survey
from agent.tools.sandbox.availability import sandbox_check
from agent.tools.sandbox.bwrap import bwrap_argv, sandbox_env
from agent.tools.sandbox.cgroups import Cgroup
from agent.tools.sandbox.config import sandbox_mode, setpriv_binary
from agent.tools.sandbox.limits import Limits, rlimits
from tasks.tools.registry import PermanentToolError

log = logging.getLogger(__name__)

# Started by the parent with vfork (fast: no copy of the worker's page tables, which a
# preexec_fn would force): enter the sandbox's cgroups, wait until the parent has set the
# per-process limits on this pid, then become bwrap (or the command, unsandboxed).
_LAUNCHER = (
    'for f in $HARNESS_CGROUP_PROCS; do echo 0 > "$f" || '
    '{ echo "sandbox: cannot enter the cgroup $f" >&2; exit 125; }; done; '
    'read -r _ < "/proc/self/fd/$HARNESS_GO_FD" || exit 125; '
    'unset HARNESS_CGROUP_PROCS HARNESS_GO_FD PWD OLDPWD; exec "$@"'
)

# Unsandboxed (HARNESS_SANDBOX=off), the command runs under this shell, which setpriv gives
# SIGTERM when the thread that started it exits (a killed horse or worker): it then kills its
# whole process group (the command and everything it forked), as bwrap's --die-with-parent
# does with the sandbox's PID namespace. `<&0` keeps stdin (a background job's is /dev/null).
_WATCH = 'trap "kill -KILL 0" TERM; "$@" <&0 & wait $!; exit $?'


@dataclass
class SandboxProcess:
    """A running sandbox: `stdin`, `stdout`, `stderr` as asked for at spawn, `poll()`,
    `wait()`, `limits_hit()`, and `close()`, which kills everything it started."""

    proc: subprocess.Popen
    cgroup: Cgroup | None
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
    started it (bwrap's --die-with-parent, or unsandboxed setpriv's --pdeathsig: the
    parent-death signal follows the creating thread), so start a long-lived server from a
    thread that lives as long as it should.
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
        command = bwrap_argv(
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
        command = [setpriv_binary(), "--pdeathsig", "TERM", "--", "/bin/sh", "-c", _WATCH]
        command, run_cwd = [*command, "watch", *argv], workspace / cwd
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
    cgroup = Cgroup(limits) if sandboxed else None
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
        for which, value in rlimits(limits, file_cap=process.file_cap()):
            resource.prlimit(proc.pid, which, (value, value))
        os.write(go_write, b"go\n")  # the read end stays open in bwrap: at EOF, harmless
    except OSError:
        proc.kill()  # it never runs without its limits
    finally:
        os.close(go_write)
    return process
