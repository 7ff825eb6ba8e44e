"""Durable execution runs against the real parts: PostgreSQL, Redis, `rqworker` processes from
the shared `worker_pool` and the `harness_sweep --loop` command, all on fast clocks."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tasks.models import Task
from tests.conftest import WorkerPool, manage_spawn, parent_pid, wait_for
from tests.durable.private_redis import PrivateRedis
from tests.strays import group_kill_ours

# Heartbeat every 0.3 s, stale after 1.2 s, sweep every 0.3 s: recovery within ~2 s.
FAST_CLOCKS = {
    "HARNESS_HEARTBEAT_S": 0.3,
    "HARNESS_STALE_AFTER_S": 1.2,
    "HARNESS_SWEEP_INTERVAL_S": 0.3,
    "HARNESS_REQUEUE_GRACE_S": 1.0,
    "HARNESS_CAPACITY_RETRY_S": 0.3,
}

# No review rules: these tests are about execution, not about pausing for humans.
TEST_CONFIG = """
retry: {initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
"""


@pytest.fixture
def harness_config_text() -> str:
    """The harness.yaml of the test; override the fixture to change it."""
    return TEST_CONFIG


@pytest.fixture
def durable_settings(settings, harness_dirs, harness_yaml, harness_config_text: str) -> dict:
    """Fast clocks, test tools, this test's harness.yaml, workspaces and external ledger, here
    and (as environment) for the worker and sweeper processes."""
    config = harness_yaml(harness_config_text)
    for key, value in FAST_CLOCKS.items():
        setattr(settings, key, value)
    paths = {
        name: getattr(settings, name) for name in ("HARNESS_WORKSPACE_ROOT", "HARNESS_LEDGER_DIR")
    }
    return {
        "HARNESS_CONFIG": str(config),
        "HARNESS_ENABLE_TEST_TOOLS": "1",
        **{key: str(value) for key, value in {**paths, **FAST_CLOCKS}.items()},
    }


@pytest.fixture
def queue(durable_settings):
    """The default RQ queue on this test process's Redis database, emptied before and after."""
    import django_rq

    queue = django_rq.get_queue("default")
    queue.connection.flushdb()
    yield queue
    queue.connection.flushdb()


@pytest.fixture
def redis_server(settings) -> Iterator[PrivateRedis]:
    """A Redis server of this test's own, which this process, its workers and its sweepers
    use (so FLUSHALL or a restart loses nobody else's jobs)."""
    server = PrivateRedis()
    server.start()
    settings.REDIS_URL = server.url
    settings.RQ_QUEUES = {
        name: {**conf, "URL": server.url} for name, conf in settings.RQ_QUEUES.items()
    }
    yield server
    server.close()


@pytest.fixture
def private_redis(redis_server: PrivateRedis) -> str:
    """The URL of `redis_server`."""
    return redis_server.url


def process_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a killed child not yet reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Fleet:
    """The shared worker pool plus sweepers, with crash helpers."""

    def __init__(self, pool: WorkerPool, log_dir: Path) -> None:
        self.pool = pool
        self.log_dir = log_dir
        self.sweepers: list[subprocess.Popen] = []

    def worker(self, count: int = 1) -> list[subprocess.Popen]:
        return self.pool.start(count)

    def sweeper(self) -> subprocess.Popen:
        process = manage_spawn(
            ["harness_sweep", "--loop"],
            log=self.log_dir / f"sweeper-{len(self.sweepers) + 1}.log",
            env=self.pool.env,
        )
        self.sweepers.append(process)
        return process

    def kill_worker_of(self, task_id: Any, *, terminate_backends: bool = False) -> None:
        """`kill -9` the worker running the task, as if its machine died: the worker's process
        group and its work-horse's (RQ puts the horse in a process group of its own).

        `terminate_backends`: also end the horse's PostgreSQL sessions. A statement the horse
        sent just before it died still runs (and commits) in its server session otherwise:
        a test that holds a row lock to keep a write from landing must end that session
        before it lets go of the lock, or the write lands after all."""
        worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task_id)
        horse = int(worker_id.rsplit(":", 1)[1])
        worker = next(p for p in self.pool.processes if parent_pid(horse) == p.pid)
        ports = tcp_local_ports(horse) if terminate_backends else set()
        self.pool.kill(worker)
        if ports:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE client_port = ANY(%s)",
                    [sorted(ports)],
                )

    def stop(self) -> None:
        for process in self.sweepers:
            if process.poll() is None:
                _killpg(process.pid)
            else:  # its pid (and group) may be another test process's by now
                group_kill_ours(process.pid)
            process.wait(timeout=10)


@pytest.fixture
def fleet(durable_settings, worker_pool: WorkerPool, tmp_path: Path) -> Iterator[Fleet]:
    worker_pool.env.update(durable_settings)
    fleet = Fleet(worker_pool, tmp_path)
    yield fleet
    fleet.stop()
    for path in sorted(tmp_path.glob("sweeper-*.log")):
        print(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")


def tcp_local_ports(pid: int) -> set[int]:
    """The local ports of the process's TCP sockets (its database connections among them),
    from /proc: the socket inodes its descriptors point at, looked up in its tcp tables."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def task_status(task_id: Any) -> str:
    return Task.objects.values_list("status", flat=True).get(id=task_id)


def wait_status(task_id: Any, *statuses: str, timeout: float = 60) -> Task:
    wait_for(
        lambda: task_status(task_id) in statuses,
        timeout,
        message=f"task {task_id} to be {'/'.join(statuses)}",
    )
    return Task.objects.get(id=task_id)
