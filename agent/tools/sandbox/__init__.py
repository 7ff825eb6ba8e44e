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
environment and limits only), logged loudly on every run; its process group still dies with
the thread that started it (util-linux `setpriv`, else SandboxUnavailable).

The modules, from the bottom: `config` (mode, bwrap binary, SandboxUnavailable), `limits`
(Limits, their messages and clocks, the per-process rlimits), `cgroups`, `bwrap` (the command
line), `availability` (sandbox_check), `process` (sandbox_spawn, SandboxProcess) and `run`
(sandbox_run). Callers import from this package.
"""

from __future__ import annotations

from agent.tools.sandbox.availability import sandbox_check
from agent.tools.sandbox.bwrap import PATH, WORKSPACE, sandbox_env
from agent.tools.sandbox.config import SandboxUnavailable, bwrap_binary, sandbox_mode
from agent.tools.sandbox.limits import LIMIT_MESSAGES, Limits, limit_message
from agent.tools.sandbox.process import SandboxProcess, sandbox_spawn
from agent.tools.sandbox.run import MAX_OUTPUT_BYTES, SandboxResult, sandbox_run

__all__ = [
    "LIMIT_MESSAGES",
    "MAX_OUTPUT_BYTES",
    "PATH",
    "WORKSPACE",
    "Limits",
    "SandboxProcess",
    "SandboxResult",
    "SandboxUnavailable",
    "bwrap_binary",
    "limit_message",
    "sandbox_check",
    "sandbox_env",
    "sandbox_mode",
    "sandbox_run",
    "sandbox_spawn",
]
