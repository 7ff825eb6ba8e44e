"""The processes some benchmarks start: rqworkers (in their own sessions, stopped on exit),
and waiting for a condition."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.common.database import database_url
from bench.common.paths import REPO_ROOT, BenchError
from harness_base.queues import WORKER_QUEUES


def wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float = 60.0,
    interval: float = 0.005,
    what: str = "a condition",
    error: type[Exception] = BenchError,
) -> Any:
    """Poll `predicate` until it returns something truthy (and return it); raise `error` once
    `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise error(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def worker_environment(*, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a worker (or sweeper) subprocess of this checkout: this process's
    environment, the settings module and the repository on the path, the given database and
    Redis, plus `extra`."""
    return dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="harness_site.settings",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        **extra,
    )


def spawn(
    command: list[str],
    *,
    log: Path,
    env: Mapping[str, str],
    module: str = "",
    prefix: Sequence[str] = (),
) -> subprocess.Popen:
    """Start `manage.py <command>` (or `python -m <module> <command>`) from the repository
    root in a process group of its own, its output appended to `log`; `prefix` is a command
    that runs it (e.g. `nsenter ...`: bench/hosts/)."""
    program = ["-m", module] if module else [str(REPO_ROOT / "manage.py")]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        return subprocess.Popen(
            [*prefix, sys.executable, *program, *command],
            cwd=REPO_ROOT,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class RqWorker:
    """One real `manage.py rqworker` subprocess on this process's database, Redis, workspace
    and ledger directories (plus `env`); a context manager that stops it (and its work horse)
    on exit."""

    def __init__(self, *, log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.log_path = log_path
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> RqWorker:
        from django.conf import settings

        env = worker_environment(
            database_url=database_url(),
            redis_url=settings.REDIS_URL,
            HARNESS_WORKSPACE_ROOT=str(settings.HARNESS_WORKSPACE_ROOT),
            HARNESS_LEDGER_DIR=str(settings.HARNESS_LEDGER_DIR),
            HARNESS_ENABLE_TEST_TOOLS="1",
        )
        env.update(self.extra_env)
        self.log_path.unlink(missing_ok=True)
        self.process = spawn(["rqworker", *WORKER_QUEUES], log=self.log_path, env=env)
        wait_for(
            lambda: self.state() == "idle",
            timeout=60,
            interval=0.05,
            what=f"rqworker {self.process.pid} to register (log: {self.log_path})",
        )
        return self

    def _worker(self) -> Any:
        import django_rq
        from rq import Worker

        if self.process.poll() is not None:
            raise BenchError(f"rqworker exited with {self.process.returncode}; see {self.log_path}")
        redis = django_rq.get_connection("default")
        return next((w for w in Worker.all(connection=redis) if w.pid == self.process.pid), None)

    def state(self) -> str | None:
        worker = self._worker()
        return worker.get_state() if worker is not None else None

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.process is None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
