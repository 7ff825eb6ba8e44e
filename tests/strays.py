"""Processes a test left running: a `manage.py` or benchmark subprocess of this test process
still running once the test and its fixtures have ended. Such a process keeps taking jobs and
adding to counters in the next tests' Redis (a metrics test once counted 8 super-steps it
never ran), so each one is named, with the test that left it, and stopped.

A process is this test process's when its environment says so: under pytest-xdist, the
`PYTEST_XDIST_WORKER` every subprocess inherits (the other xdist processes' subprocesses share
the Redis URL of the first one, and are not ours to stop) together with this run's
`PYTEST_XDIST_TESTRUNUID` (another run on the machine, a CI run beside a developer's, has a
`gw0` of its own: its workers were killed as strays); alone, the Redis URL."""

from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path

from tests.zygote import server_pid

# What a harness subprocess's command line holds (python manage.py ..., python -m bench ...;
# a worker forked by the tests' fork server shows the server's, python -m tests.zygote).
HARNESS_COMMANDS = (b"manage.py", b"bench", b"harness_sweep", b"rqworker", b"tests.zygote")


def _marks() -> set[bytes]:
    """The environment entries that make a process this test process's (see above)."""
    keys = (
        ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID")
        if os.environ.get("PYTEST_XDIST_WORKER")
        else ("REDIS_URL",)
    )
    return {f"{key}={os.environ.get(key, '')}".encode() for key in keys}


def harness_processes() -> dict[int, str]:
    """{pid: command line} of this test process's harness subprocesses."""
    wanted = _marks()
    found: dict[int, str] = {}
    # The fork server itself lives as long as the test process (tests/zygote.py).
    own = {os.getpid(), server_pid()}
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid in own:
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if wanted <= set(environ) and any(word in arg for arg in argv for word in HARNESS_COMMANDS):
            found[pid] = b" ".join(argv).decode(errors="replace").strip()
    return found


def group_kill_ours(pgid: int) -> None:
    """SIGKILL what is left of the process group `pgid` that is this test process's (a work
    horse of a worker that already exited): only those. The pid space is small (32768 here)
    and reused within minutes, so the group of a pid this process saw exit may by now be
    another test process's new worker, which a plain killpg would kill."""
    wanted = _marks()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        if wanted <= set(environ):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def strays_stop(nodeid: str, before: dict[int, str]) -> None:
    """Warn of, and kill, this test process's harness subprocesses that were not running
    before the test `nodeid`."""
    left = {
        pid: command for pid, command in harness_processes().items() if before.get(pid) != command
    }
    for pid, command in left.items():
        warnings.warn(f"{nodeid} left pid {pid} running: {command}", stacklevel=1)
        try:  # a worker leads its own process group, with its work horse in it
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
