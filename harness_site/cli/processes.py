"""The command lines of the long-running processes, written once: `harness up` supervises them
all on one machine; `harness web`, `harness worker` and `harness sweep` (production.py) each run
one of them in the foreground, as a service manager or a container runtime expects."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness_site.cli.common import manage


def worker_command(*, queues: Sequence[str], burst: bool = False) -> list[str]:
    """An rqworker serving `queues` in that order (highest priority first), with RQ's
    scheduler (retries and delayed jobs); `burst` exits once the queues are empty."""
    return manage("rqworker", *queues, "--with-scheduler", *(["--burst"] if burst else []))


def sweep_command(*, interval: float | None = None) -> list[str]:
    """The sweeper loop: stalled tasks redispatched, vanished jobs re-enqueued, reviews expired
    (every HARNESS_SWEEP_INTERVAL_S unless `interval` says otherwise)."""
    every = [] if interval is None else ["--interval", f"{interval:g}"]
    return manage("harness_sweep", "--loop", *every)


def web_command(*, host: str, port: int, processes: int = 1, threads: int = 4) -> list[str]:
    """gunicorn serving the site; GUNICORN_CMD_ARGS (gunicorn's own variable) adds options."""
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "harness_site.wsgi",
        "--bind",
        bind,
        "--workers",
        str(processes),
        "--threads",
        str(threads),
        "--graceful-timeout",
        "5",
        "--access-logfile",
        "-",
        "--no-control-socket",
    ]
