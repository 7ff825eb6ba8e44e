"""What hosts need of this machine: root, `ip netns`, `unshare`, a free subnet; the
leftovers of a run that died, removed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common import BenchError

# Subnets 10.231.N.0/24: N is picked at random among those no interface of this machine uses,
# under a lock, so two Networks (two test processes) never share one.
SUBNET_PREFIX = "10.231"


FIRST_HOST = 11


_LOCK = Path(tempfile.gettempdir()) / "harness-hosts.lock"


# One file per open Network, named by its suffix, holding the pid of the process that made it.
_OWNERS = Path(tempfile.gettempdir()) / "harness-hosts"


TCP_RTO_MAX_MS = 44  # linux/tcp.h (6.15): a socket's cap on its retransmission back-off


def unavailable() -> str:
    """Why hosts cannot be made here ("" when they can): for a test's skip reason."""
    if os.geteuid() != 0:
        return "worker hosts need root (network and mount namespaces: ip netns, mount)"
    for program in ("ip", "nsenter", "unshare", "mount"):
        if shutil.which(program) is None:
            return f"worker hosts need `{program}` (iproute2 / util-linux)"
    return ""


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if done.returncode:
        raise BenchError(f"`{' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def _quiet(*args: str) -> None:
    """Tear-down: the thing may already be gone."""
    subprocess.run(args, capture_output=True, timeout=30)


def _signal_all(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _remove_leftovers() -> None:
    """Remove what Networks whose process died without closing them (SIGKILL, a CI job's
    timeout) left behind: their hosts' processes, namespaces, links and bridge. Under _LOCK."""
    _OWNERS.mkdir(exist_ok=True)
    for owner in _OWNERS.iterdir():
        pid = owner.read_text().strip()
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue
        suffix = owner.name
        for line in _run("ip", "netns", "list").splitlines():
            netns = line.split(" ", 1)[0]
            if netns.startswith(f"hn{suffix}"):
                pids = _run("ip", "netns", "pids", netns).split()
                _signal_all([int(p) for p in pids], signal.SIGKILL)
                _quiet("ip", "netns", "del", netns)
        for line in _run("ip", "-o", "link", "show").splitlines():
            link = line.split(":")[1].strip().split("@")[0]
            if link.startswith((f"hv{suffix}", f"hb{suffix}")):
                _quiet("ip", "link", "del", link)
        owner.unlink(missing_ok=True)
