"""Whether sandboxes can start on this machine: bubblewrap starts one (a probe, kept once it
worked) and a cgroup can be made for it."""

from __future__ import annotations

import subprocess

from agent.tools.sandbox.bwrap import namespace_args, system_mounts
from agent.tools.sandbox.cgroups import cgroup_layout
from agent.tools.sandbox.config import INSTALL_HINT, SandboxUnavailable, bwrap_binary, sandbox_mode

_working_binaries: set[str] = set()


def _bwrap_probe(binary: str) -> str | None:
    """None when bwrap starts a sandbox on this machine, else why not (a success is kept per
    binary; a failure is tried again next time)."""
    if binary in _working_binaries:
        return None
    try:
        done = subprocess.run(
            [binary, *namespace_args(network=False), *system_mounts(network=False), "true"],
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
    cgroup_layout()
