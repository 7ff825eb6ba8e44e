"""The bubblewrap command line of a sandbox: its namespaces, the read-only system mounts, the
workspace (and a shared directory) read-write, a bounded /tmp, the environment given, and the
shell that runs as its PID 1."""

from __future__ import annotations

import functools
import os
import posixpath
from collections.abc import Sequence
from pathlib import Path

from agent.tools.sandbox.config import bwrap_binary
from agent.tools.sandbox.limits import Limits
from tasks.paths import SHARED_MOUNT

SANDBOX_UID = 65534
WORKSPACE = "/workspace"
PATH = "/usr/local/bin:/usr/bin:/bin"
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


# The sandbox's PID 1: a shell of the sandbox's own /usr that runs the command and reaps
# whatever is orphaned to it (its waits reap any child), instead of bwrap's reaper, whose
# /proc/1/cmdline, exe and maps would show the bwrap command line with the host's paths (the
# workspace, the venv, every mount). When it exits the kernel kills the whole PID namespace.
# SIGXFSZ is ignored (and so for everything it starts): a write past the per-file cap (the
# remaining disk quota) fails with EFBIG, as on a full disk, instead of killing the writer.
_INIT = ("/bin/sh", "-c", 'trap "" XFSZ; "$@"; exit $?', "init")


def namespace_args(*, network: bool) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if network:
        args.append("--share-net")
    return [*args, "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]


@functools.cache
def system_mounts(*, network: bool) -> tuple[str, ...]:
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


def bwrap_argv(
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
    args = [bwrap_binary(), *namespace_args(network=network), *system_mounts(network=network)]
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
