"""Durable execution runs against the real parts: PostgreSQL, Redis, `rqworker` processes
(each in its own process group, so `kill -9` of a worker also takes its forked work-horse) and
the `harness_sweep --loop` command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection

from harness_site.config import harness_config
from tasks.models import Task
from tasks.services import task_create
from tasks.spec import TaskSpec

ROOT = Path(__file__).resolve().parents[2]

# Fast clocks for the whole suite: heartbeat 0.3 s, stale after 1.2 s, sweep every 0.3 s.
TEST_ENV = {
    "HARNESS_HEARTBEAT_S": "0.3",
    "HARNESS_STALE_AFTER_S": "1.2",
    "HARNESS_SWEEP_INTERVAL_S": "0.3",
    "HARNESS_REQUEUE_GRACE_S": "1",
    "HARNESS_CAPACITY_RETRY_S": "0.3",
    "HARNESS_ENABLE_TEST_TOOLS": "1",
}

# No review rules: these tests are about execution, not about pausing for humans.
TEST_CONFIG = """
retry: {initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
"""


def wait_for(predicate: Callable[[], Any], *, timeout: float = 30, what: str = "condition"
             ) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def task_status(task_id: Any) -> str:
    return Task.objects.values_list("status", flat=True).get(id=task_id)


def wait_status(task_id: Any, *statuses: str, timeout: float = 30) -> Task:
    wait_for(lambda: task_status(task_id) in statuses, timeout=timeout,
             what=f"task {task_id} to be {'/'.join(statuses)}")
    return Task.objects.get(id=task_id)


def process_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a killed child not yet reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def harness_dirs(settings, tmp_path: Path) -> dict[str, str]:
    """Workspace, ledger and harness.yaml for this test, in this process and for workers."""
    config = tmp_path / "harness.yaml"
    config.write_text(TEST_CONFIG)
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"
    settings.HARNESS_LEDGER_DIR = tmp_path / "ledger"
    settings.HARNESS_ENABLE_TEST_TOOLS = True
    settings.HARNESS_CONFIG_FILE = config
    for key, value in TEST_ENV.items():
        if key.endswith("_S"):
            setattr(settings, key, float(value))
    harness_config.cache_clear()
    yield {"HARNESS_WORKSPACE_ROOT": str(tmp_path / "ws"),
           "HARNESS_LEDGER_DIR": str(tmp_path / "ledger"), "HARNESS_CONFIG": str(config)}
    harness_config.cache_clear()


@pytest.fixture
def redis_url() -> Iterator[str]:
    url = settings.REDIS_URL
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


class Proc:
    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        self.process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log.open("ab"),
            stderr=subprocess.STDOUT, start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group: the worker, its work-horse and its scheduler."""
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        # No warm shutdown: the test is over, and the database is flushed next.
        self.kill(signal.SIGKILL)
        self.process.wait()

    def owns(self, pid: int) -> bool:
        """True when `pid` is this process or its child (RQ's work-horse, which runs in a
        session of its own)."""
        return pid == self.pid or _parent_pid(pid) == self.pid


def _parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None


class Fleet:
    """Worker and sweeper processes for one test; all stopped at teardown."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: list[Proc] = []

    def _start(self, name: str, args: list[str], **env: str) -> Proc:
        proc = Proc(name, [sys.executable, str(ROOT / "manage.py"), *args],
                    {**self.env, **env}, self.log_dir / f"{name}-{len(self.procs)}.log")
        self.procs.append(proc)
        return proc

    def worker(self, **env: str) -> Proc:
        return self._start("worker", ["rqworker", *settings.HARNESS_QUEUES,
                                      "--with-scheduler"], **env)

    def sweeper(self, **env: str) -> Proc:
        return self._start("sweeper", ["harness_sweep", "--loop"], **env)

    def kill_worker_of(self, task_id: Any) -> Proc:
        """`kill -9` the worker running the task, as if its machine died: the worker's process
        group and its work-horse's (RQ starts the horse in a session of its own)."""
        worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task_id)
        horse = int(worker_id.rsplit(":", 1)[1])
        proc = next(p for p in self.procs if p.owns(horse))
        proc.kill()
        try:
            os.killpg(horse, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.log.name}\n{p.log.read_text()[-4000:]}" for p in self.procs)


@pytest.fixture
def fleet(transactional_db, harness_dirs, redis_url, tmp_path: Path, request) -> Iterator[Fleet]:
    env = {
        **os.environ, **TEST_ENV, **harness_dirs,
        "DATABASE_URL": _database_url(), "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "harness_site.settings", "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
    }
    fleet = Fleet(env, tmp_path)
    yield fleet
    fleet.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(fleet.logs())


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def make_task(script: list[dict], tools: list[str], *, enqueue: bool = True, **extra: Any) -> Task:
    spec = TaskSpec.model_validate({
        "title": extra.pop("title", "durable"), "goal": "exercise durable execution",
        "model": {"kind": "scripted", "script": script}, "tools": tools, **extra,
    })
    return task_create(spec=spec, user=None, enqueue=enqueue)
