"""The chaos suite (`./harness chaos`, `python -m bench chaos`): faults injected into real
processes, and what the harness's promises look like afterwards.

Everything runs on a stack of its own, so that faults which restart a service never touch the
system's: a private PostgreSQL (initdb in a temporary directory, its own port), a private Redis,
`rqworker` processes and `manage.py harness_sweep --loop`, all on fast clocks. Tasks are
scripted (the test tools, HARNESS_ENABLE_TEST_TOOLS=1): their side effects go through
`ledger_append`, which records every execution outside the workspaces, so effects executed
twice can be counted. Tasks are created and reviews decided over the REST API (Django's test
client against the real views); an operator answers the reviews a lost outcome opens by looking
at the ledger, as a person would look at the external system.

Each fault states its bound on recovery (the time from the fault to the task making progress
again: a new lease, a new checkpoint, a pause for a person, or the effect the approval was
for). The invariants, over every fault: no effect executed twice, no approval lost, asked twice
or consumed without a run, no task lost (every task ends `succeeded`), every recovery within
its bound. The table goes to bench/chaos.md; the exit status is non-zero when an invariant
or a bound is broken.

`--short` runs a few injections of each fault (CI: tests/durable/test_chaos_short.py).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import wait_for
from harness_base.queues import RESUME_QUEUE

ROOT = Path(__file__).resolve().parent.parent
CHAOS_MD = ROOT / "bench" / "chaos.md"
# The pool in this namespace serves `default`; the worker hosts (bench/hosts.py) serve `low`
# (hosts a and b) and `high` (host c, the one whose clock jumps): a fault's tasks go where the
# fault is by their priority. Every worker serves the `resume` lane first, as every worker must
# (harness_base/queues.py): a task resuming after a decision runs on whichever takes it.
HOST_QUEUES = {"a": "low", "b": "low", "c": "high"}

# The clocks of the suite's processes: heartbeat 0.3 s, stale after 1.2 s, sweep every 0.3 s
# (tests/durable's FAST_CLOCKS), a frozen horse killed 3 s past its call's timeout.
CLOCKS = {
    "HARNESS_HEARTBEAT_S": "0.3",
    "HARNESS_STALE_AFTER_S": "1.2",
    "HARNESS_SWEEP_INTERVAL_S": "0.3",
    "HARNESS_REQUEUE_GRACE_S": "1.0",
    "HARNESS_CAPACITY_RETRY_S": "0.3",
    "HARNESS_HORSE_GRACE_S": "3",
    # A transaction a frozen or cut-off host left open holds its locks until the server ends
    # it: this long after its last statement.
    "HARNESS_DB_IDLE_IN_TRANSACTION_S": "3",
}
STALE_S = float(CLOCKS["HARNESS_STALE_AFTER_S"])
IDLE_TX_S = float(CLOCKS["HARNESS_DB_IDLE_IN_TRANSACTION_S"])
SWEEP_S = float(CLOCKS["HARNESS_SWEEP_INTERVAL_S"])
GRACE_S = float(CLOCKS["HARNESS_HORSE_GRACE_S"])
# Room for a loaded machine (forks, imports, a busy database) on top of each formula.
SLACK_S = 6.0
TOOL_TIMEOUT_S = 3.0

HARNESS_YAML = """
retry: {initial_s: 0.2, factor: 2, max_s: 2, jitter: full, max_attempts: 6}
timeouts: {session_s: 900, turn_s: 60, tool_s: 30}
"""


class ChaosError(RuntimeError):
    """The suite cannot run here (a missing binary, a service that does not start)."""


def say(message: str) -> None:
    print(f"chaos: {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def poll(predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.05):
    return wait_for(predicate, timeout=timeout, interval=interval, what=what, error=ChaosError)


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def child_pids(pid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if parent_pid(int(p.name)) == pid]


def killpg(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def tcp_local_ports(pid: int) -> set[int]:
    """The local ports of the process's TCP sockets (its database sessions among them)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


# --- the private services ----------------------------------------------------------------------


def pg_bin() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if not found:
        raise ChaosError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    return found[-1].parent


class PrivatePostgres:
    """A PostgreSQL cluster of the suite's own (initdb in a temporary directory, its own port),
    which the suite may restart at will. Runs as the `postgres` user when started by root."""

    def __init__(self, root: Path, *, port: int, listen: str = "127.0.0.1") -> None:
        self.dir = root / "pg"
        self.port = port
        self.listen = listen
        self.bin = pg_bin()

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> None:
        self.dir.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            os.chmod(self.dir.parent, 0o755)
        self._run("initdb", "-D", str(self.dir), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync")  # fmt: skip
        with open(self.dir / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '{self.listen}'\n"
                f"unix_socket_directories = '{self.dir}'\nmax_connections = 300\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "shared_buffers = 64MB\n"
            )
        with open(self.dir / "pg_hba.conf", "a") as hba:
            hba.write("host all all 0.0.0.0/0 trust\n")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir), "-l", str(self.dir / "log"), "-w", "start")

    def restart(self) -> None:
        """A fast shutdown (every session cut) and a start."""
        self._run("pg_ctl", "-D", str(self.dir), "-m", "fast", "-w", "restart",
                  "-l", str(self.dir / "log"))  # fmt: skip

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir), "-m", "immediate", "-w", "stop", check=False)

    def url(self, host: str = "127.0.0.1") -> str:
        return f"postgres://postgres@{host}:{self.port}/chaos"

    def create_database(self) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE chaos")


class PrivateRedis:
    """A Redis of the suite's own, with an append-only file: a restart keeps the queues (as a
    production Redis would), a FLUSHALL does not."""

    def __init__(self, root: Path, *, port: int, bind: str = "127.0.0.1") -> None:
        self.dir = root / "redis"
        self.dir.mkdir(parents=True)
        self.port = port
        self.bind = bind
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ChaosError("redis-server is not installed")
        with open(self.dir / "log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    self.bind,
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "everysec",
                    "--dir",
                    str(self.dir),
                    "--protected-mode",
                    "no",
                ],  # fmt: skip
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        poll(self.ping, timeout=20, what="the private Redis to answer")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def restart(self) -> None:
        """SIGTERM (Redis writes its append-only file and exits), then a new server."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def url(self, host: str = "127.0.0.1") -> str:
        return f"redis://{host}:{self.port}/0"


# --- processes ---------------------------------------------------------------------------------


class Fleet:
    """`manage.py rqworker` processes (each in a process group of its own, so a kill takes its
    work horse too) and sweepers, on the suite's services."""

    def __init__(self, *, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.workers: list[subprocess.Popen] = []
        self.sweepers: list[subprocess.Popen] = []
        # Started without waiting: the next wait_registered() of new workers waits for them too.
        self.starting: list[subprocess.Popen] = []
        # The workers of the hosts (bench/hosts.py), which the hosts start and stop.
        self.host_workers: list[subprocess.Popen] = []
        self._count = 0

    def _spawn(self, argv: list[str], *, name: str, env: dict[str, str]) -> subprocess.Popen:
        self._count += 1
        with open(self.log_dir / f"{name}-{self._count}.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), *argv],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def spawn_workers(
        self, count: int, *, env: dict[str, str] | None = None, wait: bool = True
    ) -> list[subprocess.Popen]:
        started = [
            self._spawn(
                ["rqworker", RESUME_QUEUE, "default", "--with-scheduler"],
                name="worker",
                env=env or self.env,
            )
            for _ in range(count)
        ]
        self.workers.extend(started)
        if wait:
            self.wait_registered(started)
        else:
            self.starting.extend(started)
        return started

    def registered(self) -> set[int]:
        import django_rq
        from rq import Worker

        try:
            return {w.pid for w in Worker.all(connection=django_rq.get_connection("default"))}
        except Exception:  # Redis is being restarted: nobody counts as registered
            return set()

    def wait_registered(self, processes: list[subprocess.Popen], timeout: float = 120) -> None:
        def ready() -> bool:
            for process in processes:
                if process.poll() is not None:
                    raise ChaosError(f"rqworker {process.pid} exited with {process.returncode}")
            return {p.pid for p in processes} <= self.registered()

        processes = [*processes, *(p for p in self.starting if p.poll() is None)]
        self.starting = []
        poll(ready, timeout=timeout, what=f"{len(processes)} rqworker(s) to register", interval=0.1)

    def alive(self) -> list[subprocess.Popen]:
        return [w for w in self.workers if w.poll() is None]

    def kill(self, process: subprocess.Popen) -> None:
        """kill -9 of the worker's process group and its horse's (RQ gives the horse its own)."""
        for pgid in [*child_pids(process.pid), process.pid]:
            killpg(pgid)
        process.wait(timeout=10)
        for pool in (self.workers, self.host_workers):
            if process in pool:
                pool.remove(process)

    def worker_of_horse(self, horse: int) -> subprocess.Popen | None:
        parent = parent_pid(horse)
        return next((w for w in [*self.workers, *self.host_workers] if w.pid == parent), None)

    def start_sweeper(self) -> subprocess.Popen:
        process = self._spawn(
            ["harness_sweep", "--loop", "--interval", CLOCKS["HARNESS_SWEEP_INTERVAL_S"]],
            name="sweeper",
            env=self.env,
        )
        self.sweepers.append(process)
        return process

    def stop_sweepers(self) -> None:
        for process in self.sweepers:
            killpg(process.pid, signal.SIGTERM)
        for process in self.sweepers:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                killpg(process.pid)
                process.wait(timeout=10)
        self.sweepers = []

    def stop(self) -> None:
        self.stop_sweepers()
        for process in list(self.workers):
            for pgid in [*child_pids(process.pid), process.pid]:
                killpg(pgid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        self.workers = []


# --- bookkeeping -------------------------------------------------------------------------------


@dataclass
class Injection:
    """One fault injected into one task's run: recovered once `recovered(row)` holds."""

    task_id: str
    at: float  # time.monotonic()
    recovered: Callable[[dict[str, Any]], bool]
    recovered_after: float | None = None


@dataclass
class FaultResult:
    name: str
    title: str
    bound_s: float
    bound_text: str
    injected: int = 0
    tasks: list[str] = field(default_factory=list)
    keys: dict[str, list[str]] = field(default_factory=dict)  # task id -> ledger keys expected
    approvals: list[str] = field(default_factory=list)  # review ids approved by the scenario
    injections: list[Injection] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def recoveries(self) -> list[float]:
        return [
            i.recovered_after if i.recovered_after is not None else float("inf")
            for i in self.injections
        ]


def progress_since(row: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """Recovered: a new lease (redispatched), a new checkpoint (the run carried on), or the
    task paused for a person or finished."""
    epoch, seq = row["lease_epoch"], row["seq"]

    def recovered(now: dict[str, Any]) -> bool:
        return (
            now["lease_epoch"] > epoch
            or now["seq"] > seq
            or now["status"] in ("waiting_review", "succeeded")
        )

    return recovered


HOST_ENV = (
    "HARNESS_CONFIG",
    "HARNESS_LEDGER_DIR",
    "HARNESS_ENABLE_TEST_TOOLS",
    "HARNESS_WORKER_PRELOAD",
    "HARNESS_LOG_FORMAT",
    *CLOCKS,
)


def hosts_unavailable() -> str:
    from bench.hosts import unavailable

    return unavailable()


# Put first on PYTHONPATH of host c's processes: their wall clock is off by what the file
# HARNESS_CLOCK_OFFSET_FILE says (bench/clock_offset/sitecustomize.py).
CLOCK_OFFSET_DIR = ROOT / "bench" / "clock_offset"


class Chaos:
    """The suite's stack and the operator who drives it."""

    def __init__(self, *, root: Path, verbose: bool = False) -> None:
        self.root = root
        self.verbose = verbose
        self.pg = PrivatePostgres(root, port=free_port())
        self.redis = PrivateRedis(root, port=free_port())
        self.ledger_dir = root / "ledger"
        self.workspaces = root / "workspaces"
        self.log_dir = root / "logs"
        self.log_dir.mkdir()
        (root / "data" / "staticfiles").mkdir(parents=True)  # the API serves no static files
        config = root / "harness.yaml"
        config.write_text(HARNESS_YAML)
        self.env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="harness_site.settings",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            PYTHONUNBUFFERED="1",
            DATABASE_URL=self.pg.url(),
            REDIS_URL=self.redis.url(),
            HARNESS_CONFIG=str(config),
            HARNESS_DATA_DIR=str(root / "data"),
            HARNESS_WORKSPACE_ROOT=str(self.workspaces),
            HARNESS_LEDGER_DIR=str(self.ledger_dir),
            HARNESS_ENABLE_TEST_TOOLS="1",
            HARNESS_WORKER_PRELOAD="none",
            HARNESS_LOG_FORMAT="plain",
            **CLOCKS,
        )
        self.fleet = Fleet(env=self.env, log_dir=self.log_dir)
        self.operator: Any = None
        self.api: Any = None
        self.pool_size = 8
        self.network: Any = None
        self.network_hosts: dict[str, Any] = {}
        self.volume = root / "volume-c"
        self.clock_file = root / "clock-c"
        self.workers_died = 0
        self._decided: set[str] = set()

    # set-up

    def start(self) -> None:
        say(f"private PostgreSQL on port {self.pg.port}, Redis on {self.redis.port} in {self.root}")
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.redis.start()
        # This process is the operator: Django on the private services.
        for key in ("DATABASE_URL", "REDIS_URL", "HARNESS_CONFIG", "HARNESS_DATA_DIR",
                    "HARNESS_WORKSPACE_ROOT", "HARNESS_LEDGER_DIR", "HARNESS_ENABLE_TEST_TOOLS",
                    *CLOCKS):  # fmt: skip
            os.environ[key] = self.env[key]
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)
        self.operator, self.api = self._operator()

    def _operator(self) -> tuple[Any, Any]:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from harness_base.roles import roles_ensure
        from tasks.services import api_token_create

        groups = roles_ensure()
        user = get_user_model().objects.create_user(username="chaos-operator", password=None)
        user.groups.add(groups["operators"])
        client = Client(headers={"Authorization": f"Bearer {api_token_create(user=user)}"})
        return user, client

    def hosts(self) -> dict[str, Any]:
        """Worker hosts a, b (two workers each, queue `low`) and c (two workers and a sweeper,
        queue `high`, its wall clock steppable), made on first use."""
        if self.network is not None:
            return self.network_hosts
        from bench.hosts import Network

        shared = {k: self.env[k] for k in HOST_ENV}
        self.network = Network(
            database_url=self.pg.url(),
            redis_url=self.redis.url(),
            env=shared,
            run_dir=self.root / "hosts",
        ).__enter__()
        # Host c's workspace volume: a small tmpfs (mounted before the host's mount namespace
        # is made, which copies it).
        self.volume.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "chaos-volume", str(self.volume)],
            check=True,
        )
        self.clock_file.write_text("0\n")
        for name, queue in HOST_QUEUES.items():
            env = {}
            if name == "c":
                env = {
                    "HARNESS_WORKSPACE_ROOT": str(self.volume),
                    "HARNESS_CLOCK_OFFSET_FILE": str(self.clock_file),
                }
            self.network_hosts[name] = host = self.network.host(name, env=env)
            if name == "c":
                host.env["PYTHONPATH"] = os.pathsep.join([str(CLOCK_OFFSET_DIR), str(ROOT)])
            for _ in range(2):
                self._host_worker_spawn(host, queue)
        self.network_hosts["c"].start_sweeper()
        self.network.wait_workers(timeout=180)
        return self.network_hosts

    def _host_worker_spawn(self, host: Any, queue: str) -> None:
        process = host.spawn(
            ["rqworker", RESUME_QUEUE, queue, "--with-scheduler"],
            log_name=f"worker-{len(host.processes) + 1}",
        )
        host.workers.append(process)
        self.fleet.host_workers.append(process)

    def host_worker_replace(self, process: subprocess.Popen) -> bool:
        """A worker host's killed worker replaced on its host (False: it was the pool's)."""
        for name, host in self.network_hosts.items():
            if process in host.workers:
                host.workers.remove(process)
                self._host_worker_spawn(host, HOST_QUEUES[name])
                return True
        return False

    def stop(self) -> None:
        from django.db import connections

        if self.network is not None:
            self.network.close()
            subprocess.run(["umount", "-l", str(self.volume)], check=False, capture_output=True)
        self.fleet.stop()
        connections.close_all()
        self.redis.stop()
        self.pg.stop()

    # the API, as a client would use it

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.api.post(path, json.dumps(body), content_type="application/json")

    def task_create(
        self,
        result: FaultResult,
        *,
        script: list[dict],
        keys: list[str],
        review: list[str] | None = None,
        budget: dict | None = None,
        priority: str = "default",
    ) -> str:
        tools = sorted({turn["call"] for turn in script if "call" in turn})
        spec: dict[str, Any] = {
            "title": f"chaos {result.name}",
            "goal": "survive",
            "tools": tools,
            "model": {"kind": "scripted", "script": script},
            "budget": {"max_steps": len(script) + 2, **(budget or {})},
            "priority": priority,
        }
        if review:
            spec["review"] = {"always": review}
        response = self.post("/api/v1/tasks", spec)
        if response.status_code != 201:
            raise ChaosError(f"task create: {response.status_code} {response.content[:300]!r}")
        task_id = response.json()["id"]
        result.tasks.append(task_id)
        result.keys[task_id] = keys
        return task_id

    def approve(self, review_id: Any) -> int:
        shown = self.api.get(f"/api/v1/reviews/{review_id}")
        if shown.status_code != 200:
            return shown.status_code
        response = self.post(
            f"/api/v1/reviews/{review_id}/decision",
            {"decision": "approve", "arguments_hash": shown.json()["arguments_hash"]},
        )
        return response.status_code

    # observing

    def rows(self, task_ids: list[str]) -> dict[str, dict[str, Any]]:
        from django.db.models import Max

        from tasks.models import Task

        try:
            found = Task.objects.filter(id__in=task_ids).annotate(seq=Max("checkpoints__seq"))
            return {
                str(t.id): {"status": t.status, "lease_epoch": t.lease_epoch, "seq": t.seq or 0}
                for t in found
            }
        except Exception:  # the database is being restarted: nothing seen this time
            from django.db import connections

            connections.close_all()
            return {}

    def ledger(self) -> Counter:
        path = self.ledger_dir / "ledger.jsonl"
        if not path.exists():
            return Counter()
        return Counter(
            json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip()
        )

    def watch(self, result: FaultResult, *, timeout: float) -> None:
        """Poll until every task of the fault has succeeded (or `timeout`), noting when each
        injection recovered, and acting as the operator on the way: a call whose outcome was
        lost is marked done or run again after a look at the ledger; a second review of an
        approved call is approved again (and counted)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows(result.tasks)
            now = time.monotonic()
            for injection in result.injections:
                row = rows.get(injection.task_id)
                if injection.recovered_after is None and row and injection.recovered(row):
                    injection.recovered_after = now - injection.at
            self.operate(result)
            done = rows and all(
                rows.get(t, {}).get("status") in ("succeeded", "failed", "canceled")
                for t in result.tasks
            )
            if (done and all(i.recovered_after is not None for i in result.injections)) or (
                now > deadline
            ):
                return
            time.sleep(0.1)

    def operate(self, result: FaultResult) -> None:
        from review.models import ReviewRequest
        from review.services import review_resolve_unknown_outcome
        from tasks.canonical import canonical_hash

        try:
            pending = list(
                ReviewRequest.objects.filter(task_id__in=result.tasks, status="pending").order_by(
                    "id"
                )
            )
        except Exception:
            from django.db import connections

            connections.close_all()
            return
        ledger = None
        for review in pending:
            if review.kind == "unknown_outcome":
                ledger = ledger if ledger is not None else self.ledger()
                key = review.arguments.get("key")
                decision = "mark_done" if ledger.get(key) else "rerun"
                with contextlib.suppress(Exception):
                    review_resolve_unknown_outcome(
                        review_id=review.id,
                        user=self.operator,
                        decision=decision,
                        arguments_hash=canonical_hash(review.arguments),
                        comment="checked the ledger",
                    )
            elif str(review.id) not in self._decided and self._asked_again(review):
                # Asked again about a call already approved: counted, and approved so that the
                # task can finish.
                self._decided.add(str(review.id))
                with contextlib.suppress(Exception):
                    self.approve(review.id)

    def _asked_again(self, review: Any) -> bool:
        from review.models import ReviewRequest

        return (
            ReviewRequest.objects.filter(
                task_id=review.task_id, kind=review.kind, status="approved", id__lt=review.id
            )
            .filter(original_arguments=review.original_arguments)
            .exists()
        )

    # horses and their workers

    def horse_of(self, task_id: str) -> int | None:
        from tasks.models import Task

        worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task_id)
        return int(worker_id.rsplit(":", 1)[1]) if worker_id else None

    def in_call(self, task_id: str, tool: str, index: int = 0) -> bool:
        """The `index`-th call of `tool` was proposed and has not finished."""
        from tasks.models import TaskEvent

        proposed = [
            c["call_id"]
            for e in TaskEvent.objects.filter(task_id=task_id, type="model_decision").order_by("id")
            for c in e.payload["calls"]
            if c["tool"] == tool
        ]
        if len(proposed) <= index:
            return False
        return not TaskEvent.objects.filter(
            task_id=task_id, type="tool_finished", payload__call_id=proposed[index]
        ).exists()

    def inject(self, result: FaultResult, task_id: str, *, recovered=None) -> None:
        row = self.rows([task_id])[task_id]
        result.injections.append(
            Injection(
                task_id=task_id, at=time.monotonic(), recovered=recovered or progress_since(row)
            )
        )
        result.injected += 1


# --- faults ------------------------------------------------------------------------------------


@dataclass
class Fault:
    name: str
    title: str
    bound_s: float
    bound_text: str
    run: Callable[[Chaos, FaultResult, int], None]
    full: int
    short: int
    batch: int
    hosts: bool = False  # needs worker hosts (bench/hosts.py: root, network namespaces)


def ledger_script(
    name: str, *, sleep_s: float, extra: list[dict] | None = None, after: list[dict] | None = None
) -> tuple[list[dict], list[str]]:
    """Two ledger effects around a sleep: `extra` steps before the second, `after` after it."""
    tag = uuid.uuid4().hex[:10]
    keys = [f"{name}-{tag}-a", f"{name}-{tag}-b"]
    script = [
        {"call": "ledger_append", "args": {"key": keys[0], "value": "paid"}},
        {"call": "sleep", "args": {"seconds": sleep_s}},
        *(extra or []),
        {"call": "ledger_append", "args": {"key": keys[1], "value": "shipped"}},
        *(after or []),
        {"final": "done"},
    ]
    return script, keys


@contextlib.contextmanager
def ledger_held(chaos: Chaos) -> Iterator[None]:
    """Hold the ledger's lock: a `ledger_append` blocks inside, its intent recorded and its
    effect not yet made."""
    path = chaos.ledger_dir / "ledger.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)


def _kill_running(chaos: Chaos, result: FaultResult, task_ids: list[str]) -> None:
    for task_id in task_ids:
        horse = chaos.horse_of(task_id)
        worker = chaos.fleet.worker_of_horse(horse) if horse else None
        if worker is None:
            continue
        chaos.inject(result, task_id)
        chaos.fleet.kill(worker)


def fault_kill_mid_tool(chaos: Chaos, result: FaultResult, n: int) -> None:
    """kill -9 of the worker while its task is inside a tool call: a sleep, or (every other
    batch) a `ledger_append` held between its intent and its effect."""
    inside_effect = (result.injected // max(n, 1)) % 2 == 1 or random.random() < 0.5
    tasks = []
    for _ in range(n):
        script, keys = ledger_script(result.name, sleep_s=1.5)
        tasks.append(chaos.task_create(result, script=script, keys=keys))
    if inside_effect:
        with ledger_held(chaos):
            poll(
                lambda: all(_call_running(t, "ledger_append") for t in tasks),
                timeout=60,
                what="the side effects to start",
            )
            _kill_running(chaos, result, tasks)
    else:
        poll(
            lambda: all(chaos.in_call(t, "sleep") for t in tasks),
            timeout=60,
            what="the sleeps to start",
        )
        time.sleep(random.uniform(0.1, 0.6))
        _kill_running(chaos, result, tasks)
    chaos.fleet.spawn_workers(n, wait=False)


def _call_running(task_id: str, tool: str) -> bool:
    from tasks.models import ToolCall

    return ToolCall.objects.filter(task_id=task_id, tool=tool, status="running").exists()


def fault_kill_mid_checkpoint(chaos: Chaos, result: FaultResult, n: int) -> None:
    """kill -9 of the worker while its checkpoint write is on its way: the checkpoint table is
    locked, every run blocks in its next durable write, and the workers are killed there. Every
    other task's session is ended with it (the write is lost); the others' writes land after
    the worker died (a write in flight when a machine dies may still commit)."""
    from django.db import connection, transaction

    tasks = []
    for _ in range(n):
        script, keys = ledger_script(
            result.name,
            sleep_s=1.0,
            extra=[{"call": "noop", "args": {}}] * random.randint(0, 2),
            after=[{"call": "noop", "args": {}}] * 3,
        )
        tasks.append(chaos.task_create(result, script=script, keys=keys))
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=60, what="the sleeps")
    # The sleeps end within a second: each run blocks in one of the writes that follow.
    time.sleep(random.uniform(0.0, 0.9))
    table = _checkpoint_table()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f'LOCK TABLE "{table}" IN SHARE MODE')
        blocked = poll(
            lambda: _blocked_in_checkpoint_write(chaos, tasks, table),
            timeout=30,
            what="the runs to block in a checkpoint write",
        )
        for i, (task_id, (worker, ports)) in enumerate(blocked.items()):
            chaos.inject(result, task_id)
            chaos.fleet.kill(worker)
            if i % 2 == 0:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE client_port = ANY(%s)",
                        [sorted(ports)],
                    )
    chaos.fleet.spawn_workers(len(blocked), wait=False)


def _checkpoint_table() -> str:
    from checkpoints.models import Checkpoint

    return Checkpoint._meta.db_table


def _blocked_in_checkpoint_write(chaos: Chaos, tasks: list[str], table: str) -> dict | None:
    """{task id: (worker, horse's ports)} once every task still running is blocked in a write
    to the checkpoint table (a task that finished meanwhile is left out)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT client_port FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s",
            [f'%"{table}"%'],
        )
        waiting = {row[0] for row in cursor.fetchall()}
    blocked = {}
    rows = chaos.rows(tasks)
    for task_id in tasks:
        if rows.get(task_id, {}).get("status") != "running":
            continue
        horse = chaos.horse_of(task_id)
        worker = chaos.fleet.worker_of_horse(horse) if horse else None
        ports = tcp_local_ports(horse) if horse else set()
        if worker is None or not ports & waiting:
            return None
        blocked[task_id] = (worker, ports)
    return blocked


def fault_frozen_horse(chaos: Chaos, result: FaultResult, n: int) -> None:
    """SIGSTOP of the work horse alone (its worker stays up and heartbeats) inside a call: the
    worker must kill it past the call's timeout plus the grace, and the task run again."""
    tasks = []
    for _ in range(n):
        script, keys = ledger_script(result.name, sleep_s=1.5)
        tasks.append(
            chaos.task_create(
                result, script=script, keys=keys, budget={"tool_timeout_s": TOOL_TIMEOUT_S}
            )
        )
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=60, what="the sleeps")
    for task_id in tasks:
        horse = chaos.horse_of(task_id)
        if horse:
            chaos.inject(result, task_id)
            with contextlib.suppress(ProcessLookupError):
                os.kill(horse, signal.SIGSTOP)


def fault_postgres_restart(chaos: Chaos, result: FaultResult, n: int) -> None:
    """PostgreSQL restarted (fast shutdown: every session cut) while tasks run, with no sweeper
    to repair anything: the workers must reconnect and carry their tasks on."""
    chaos.fleet.stop_sweepers()
    try:
        for _ in range(n):
            tasks = []
            for _ in range(max(2, len(chaos.fleet.alive()) - 1)):
                # A sleep long enough for every task to be inside it at once on a loaded
                # machine (they are created one after the other), then writes.
                script, keys = ledger_script(
                    result.name, sleep_s=3.0, extra=[{"call": "noop", "args": {}}] * 10
                )
                tasks.append(chaos.task_create(result, script=script, keys=keys))
            poll(
                lambda tasks=tasks: all(chaos.in_call(t, "sleep") for t in tasks),
                timeout=60,
                what="the tasks to run",
            )
            time.sleep(random.uniform(0.0, 1.0))
            from django.db import connections

            rows = chaos.rows(tasks)
            at = time.monotonic()
            connections.close_all()
            chaos.pg.restart()
            back = time.monotonic()
            # One fault, every task it hit: recovery is counted per restart, from the moment
            # the database answers again to the slowest task's progress.
            result.injected += 1
            for task_id in tasks:
                result.injections.append(
                    Injection(task_id=task_id, at=back, recovered=progress_since(rows[task_id]))
                )
            result.figures.setdefault("restart_s", []).append(back - at)
            chaos.watch(result, timeout=60)
    finally:
        chaos.fleet.start_sweeper()


def fault_redis_restart(chaos: Chaos, result: FaultResult, n: int, *, flush: bool = False) -> None:
    """Redis restarted (SIGTERM, its append-only file kept) or flushed (FLUSHALL: every queued
    job and worker registration gone) while tasks are queued and running."""
    import django_rq

    for _ in range(n):
        tasks = []
        for _ in range(len(chaos.fleet.alive()) + 2):  # some wait in the queue
            script, keys = ledger_script(result.name, sleep_s=1.0)
            tasks.append(chaos.task_create(result, script=script, keys=keys))
        poll(
            lambda tasks=tasks: (
                sum(r["status"] == "running" for r in chaos.rows(tasks).values()) >= 2
            ),
            timeout=60,
            what="the tasks to run",
        )
        rows = chaos.rows(tasks)
        result.injected += 1
        at = time.monotonic()
        if flush:
            django_rq.get_connection("default").flushall()
        else:
            chaos.redis.restart()
        for task_id in tasks:
            result.injections.append(
                Injection(task_id=task_id, at=at, recovered=progress_since(rows[task_id]))
            )
        chaos.watch(result, timeout=60)


def fault_redis_flushall(chaos: Chaos, result: FaultResult, n: int) -> None:
    fault_redis_restart(chaos, result, n, flush=True)


def fault_approval_while_killed(chaos: Chaos, result: FaultResult, n: int) -> None:
    """An approval posted while the worker that picks up the resumed task is being killed
    (kill -9 at a random moment from the decision to a little after the worker took the job):
    the approved call must run once, never be asked about again, never be consumed unrun."""
    from review.models import ReviewRequest

    tasks = []
    for _ in range(n):
        tag = uuid.uuid4().hex[:10]
        keys = [f"{result.name}-{tag}-a"]
        script = [
            {"call": "noop", "args": {}},
            {"call": "ledger_append", "args": {"key": keys[0], "value": "approved"}},
            {"call": "sleep", "args": {"seconds": 0.3}},
            {"final": "done"},
        ]
        tasks.append(chaos.task_create(result, script=script, keys=keys, review=["ledger_append"]))
    poll(
        lambda: (
            all(r["status"] == "waiting_review" for r in chaos.rows(tasks).values())
            and len(chaos.rows(tasks)) == len(tasks)
        ),
        timeout=60,
        what="the tasks to wait for review",
    )
    killed: set[int] = set()
    killed_in_pool = 0
    for task_id in tasks:
        review = ReviewRequest.objects.get(task_id=task_id, status="pending")
        key = review.arguments["key"]
        delay = random.uniform(0.0, 0.4)
        status = chaos.approve(review.id)
        if status != 200:
            raise ChaosError(f"approval of review {review.id}: HTTP {status}")
        result.approvals.append(str(review.id))
        chaos.inject(result, task_id, recovered=lambda row, key=key: chaos.ledger().get(key, 0) > 0)
        # The worker that takes the resumed task: the first one busy with it, killed after
        # `delay` (or when found, if later). Every worker serves the resume lane, so it may be
        # a worker host's: that one is replaced on its host.
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline + 2:
            horse = chaos.horse_of(task_id)
            worker = chaos.fleet.worker_of_horse(horse) if horse else None
            if worker is not None and time.monotonic() >= deadline:
                if worker.pid not in killed:
                    killed.add(worker.pid)
                    chaos.fleet.kill(worker)
                    killed_in_pool += not chaos.host_worker_replace(worker)
                break
            time.sleep(0.01)
    chaos.fleet.spawn_workers(killed_in_pool, wait=False)


def fault_rollback_while_review(chaos: Chaos, result: FaultResult, n: int) -> None:
    """A rollback (with resume) requested while a review is pending: the pending review is
    withdrawn, an approval of it afterwards is refused, the task asks again from the restored
    state and the approved call runs once."""
    from checkpoints.models import Checkpoint
    from review.models import ReviewRequest

    tasks = []
    for _ in range(n):
        tag = uuid.uuid4().hex[:10]
        keys = [f"{result.name}-{tag}-a"]
        script = [
            {"call": "noop", "args": {}},
            {"call": "ledger_append", "args": {"key": keys[0], "value": "approved"}},
            {"final": "done"},
        ]
        tasks.append(chaos.task_create(result, script=script, keys=keys, review=["ledger_append"]))
    poll(
        lambda: (
            len(chaos.rows(tasks)) == len(tasks)
            and all(r["status"] == "waiting_review" for r in chaos.rows(tasks).values())
        ),
        timeout=60,
        what="the tasks to wait for review",
    )
    for task_id in tasks:
        old = ReviewRequest.objects.get(task_id=task_id, status="pending")
        target = Checkpoint.objects.filter(task_id=task_id, step_index=1).order_by("seq").first()
        target = target or Checkpoint.objects.filter(task_id=task_id).order_by("seq").first()
        chaos.inject(
            result,
            task_id,
            recovered=lambda row, task_id=task_id, old=old.id: (
                ReviewRequest.objects.filter(task_id=task_id, status="pending", id__gt=old).exists()
                or row["status"] == "succeeded"
            ),
        )
        response = chaos.post(
            f"/api/v1/tasks/{task_id}/rollback",
            {"checkpoint_id": str(target.id), "resume": True, "reason": "chaos: roll back"},
        )
        if response.status_code != 200:
            raise ChaosError(f"rollback of {task_id}: {response.status_code} {response.content!r}")
        late = chaos.approve(old.id)
        result.figures.setdefault("late_approval_status", []).append(late)
        if late == 200:
            result.approvals.append(str(old.id))
    # Approve what each task asks after its rollback.
    deadline = time.monotonic() + 60
    waiting = set(tasks)
    while waiting and time.monotonic() < deadline:
        for review in ReviewRequest.objects.filter(task_id__in=waiting, status="pending"):
            if chaos.approve(review.id) == 200:
                result.approvals.append(str(review.id))
                chaos._decided.add(str(review.id))
                waiting.discard(str(review.task_id))
        time.sleep(0.1)


def _host_tasks(chaos: Chaos, result: FaultResult, *, count: int, priority: str) -> list[str]:
    tasks = []
    for _ in range(count):
        script, keys = ledger_script(result.name, sleep_s=1.5)
        tasks.append(chaos.task_create(result, script=script, keys=keys, priority=priority))
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=90, what="the sleeps")
    return tasks


def _on_host(chaos: Chaos, host: Any, task_ids: list[str]) -> list[str]:
    mine = {p.pid for p in host.workers}
    return [t for t in task_ids if parent_pid(chaos.horse_of(t) or 0) in mine]


def _host_fault(chaos: Chaos, result: FaultResult, n: int, *, cut: str) -> None:
    """A whole host frozen (every process SIGSTOPped) or cut off (its link down) while its
    workers run tasks, past the lease, until the other host has taken the tasks over; then
    woken or healed: its runs find their lease gone and stop, without another write."""
    hosts = chaos.hosts()
    victim = hosts["a"] if (result.injected // 2) % 2 == 0 else hosts["b"]
    tasks = _host_tasks(chaos, result, count=4, priority="low")
    hit = _on_host(chaos, victim, tasks)
    rows = chaos.rows(hit)
    at = time.monotonic()
    victim.freeze() if cut == "freeze" else victim.partition()
    try:
        for task_id in hit:
            result.injections.append(
                Injection(task_id=task_id, at=at, recovered=progress_since(rows[task_id]))
            )
            result.injected += 1
        chaos.watch(result, timeout=60)
    finally:
        victim.thaw() if cut == "freeze" else victim.heal()


def fault_frozen_host(chaos: Chaos, result: FaultResult, n: int) -> None:
    _host_fault(chaos, result, n, cut="freeze")


def fault_partition(chaos: Chaos, result: FaultResult, n: int) -> None:
    _host_fault(chaos, result, n, cut="partition")


def fault_clock_jump(chaos: Chaos, result: FaultResult, n: int) -> None:
    """Host c's wall clock steps two hours ahead or back (alternately) while its workers are
    inside a call and its sweeper sweeps: leases, heartbeats and session timeouts go by the
    database's clock, so nothing is stalled, redispatched or timed out for it. Stepped back to
    the true time after each batch (a second jump)."""
    chaos.hosts()
    offset = 7200 if (result.injected // max(n, 1)) % 2 == 0 else -7200
    tasks = []
    for _ in range(n):
        script, keys = ledger_script(result.name, sleep_s=2.0)
        tasks.append(chaos.task_create(result, script=script, keys=keys, priority="high"))
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=90, what="the sleeps")
    rows = chaos.rows(tasks)
    at = time.monotonic()
    chaos.clock_file.write_text(f"{offset:+d}\n")
    for task_id in tasks:
        result.injections.append(
            Injection(task_id=task_id, at=at, recovered=progress_since(rows[task_id]))
        )
        result.injected += 1
    try:
        chaos.watch(result, timeout=60)
    finally:
        chaos.clock_file.write_text("0\n")
    result.figures["spurious_redispatches"] = _redispatches(result.tasks)


def _redispatches(task_ids: list[str]) -> int:
    from tasks.models import Task

    return Task.objects.filter(id__in=task_ids, redispatch_count__gt=0).count()


def fault_disk_full(chaos: Chaos, result: FaultResult, n: int) -> None:
    """Host c's workspace volume (a small tmpfs) is full when tasks start on it and write a
    file: whatever fails for want of space fails cleanly (a failed call the model is told
    about, a retry, a redispatch), then the operator frees the space; every task finishes,
    each effect once."""
    chaos.hosts()
    filler = chaos.volume / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    at = time.monotonic()
    tasks = []
    for _ in range(n):
        tag = uuid.uuid4().hex[:10]
        keys = [f"{result.name}-{tag}-a", f"{result.name}-{tag}-b"]
        script = [
            {"call": "ledger_append", "args": {"key": keys[0], "value": "paid"}},
            {"call": "write_file", "args": {"path": "report.txt", "content": "x" * 100_000}},
            {"call": "ledger_append", "args": {"key": keys[1], "value": "shipped"}},
            {"final": "done"},
        ]
        task_id = chaos.task_create(result, script=script, keys=keys, priority="high")
        tasks.append(task_id)
        result.injections.append(
            Injection(task_id=task_id, at=at, recovered=lambda row: row["status"] == "succeeded")
        )
        result.injected += 1
    time.sleep(2.0)
    filler.unlink()
    chaos.watch(result, timeout=60)


FAULTS: list[Fault] = [
    Fault(
        "kill_mid_tool",
        "kill -9 of a worker mid-tool (a sleep; or a side effect held after its intent)",
        STALE_S + SWEEP_S + SLACK_S,
        "stale-after + sweep + slack",
        fault_kill_mid_tool,
        full=24,
        short=3,
        batch=4,
    ),
    Fault(
        "kill_mid_checkpoint",
        "kill -9 of a worker mid-checkpoint-write (write lost, or landing after the death)",
        STALE_S + SWEEP_S + SLACK_S,
        "stale-after + sweep + slack",
        fault_kill_mid_checkpoint,
        full=24,
        short=3,
        batch=4,
    ),
    Fault(
        "frozen_horse",
        "frozen work horse (SIGSTOP; its worker stays up)",
        TOOL_TIMEOUT_S + GRACE_S + SLACK_S,
        "tool timeout + horse grace + slack",
        fault_frozen_horse,
        full=30,
        short=3,
        batch=5,
    ),
    Fault(
        "frozen_host",
        "frozen whole host (SIGSTOP of all its processes) past its lease, then woken",
        max(STALE_S, IDLE_TX_S) + SWEEP_S + SLACK_S + 3,
        "max(stale-after, idle-in-transaction timeout) + sweep + the other host's current call"
        " + slack",
        fault_frozen_host,
        full=16,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "partition",
        "network partition of one worker host mid-call (its link down), then healed",
        max(STALE_S, IDLE_TX_S) + SWEEP_S + SLACK_S + 3,
        "max(stale-after, idle-in-transaction timeout) + sweep + the other host's current call"
        " + slack",
        fault_partition,
        full=16,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "disk_full",
        "disk full in one host's workspace volume, then space freed",
        2.0 + SLACK_S + 6,
        "full for 2 s + retry + slack (to the task's success)",
        fault_disk_full,
        full=10,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "clock_jump",
        "clock jump (±2 h) on one worker host mid-call (its workers and sweeper)",
        2.0 + SLACK_S,
        "the call's 2 s + slack (the next checkpoint after the jump)",
        fault_clock_jump,
        full=10,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "postgres_restart",
        "PostgreSQL restart mid-run, no sweeper running",
        SLACK_S + 10,
        "reconnect + slack (from the database answering again)",
        fault_postgres_restart,
        full=8,
        short=1,
        batch=1,
    ),
    Fault(
        "redis_restart",
        "Redis restart (append-only file kept)",
        STALE_S + SWEEP_S + SLACK_S + 5,
        "reconnect + requeue grace + sweep + slack",
        fault_redis_restart,
        full=8,
        short=1,
        batch=1,
    ),
    Fault(
        "redis_flushall",
        "Redis FLUSHALL (every job and registration gone)",
        float(CLOCKS["HARNESS_REQUEUE_GRACE_S"]) + SWEEP_S + SLACK_S + 5,
        "requeue grace + sweep + slack",
        fault_redis_flushall,
        full=8,
        short=1,
        batch=1,
    ),
    Fault(
        "approval_while_killed",
        "approval posted while the worker resuming it is killed",
        STALE_S + SWEEP_S + SLACK_S + 5,
        "stale-after + sweep + slack (decision to effect)",
        fault_approval_while_killed,
        full=18,
        short=2,
        batch=3,
    ),
    Fault(
        "rollback_while_review",
        "rollback requested while a review is pending",
        SLACK_S + 4,
        "pickup + slack (rollback to the new review)",
        fault_rollback_while_review,
        full=40,
        short=2,
        batch=8,
    ),
]


# --- running and reporting ---------------------------------------------------------------------


def fault_run(chaos: Chaos, fault: Fault, *, count: int) -> FaultResult:
    result = FaultResult(fault.name, fault.title, fault.bound_s, fault.bound_text)
    started = time.monotonic()
    died_before = chaos.workers_died
    say(f"{fault.name}: {count} injection(s)")
    while result.injected < count:
        before = result.injected
        fault.run(chaos, result, min(fault.batch, count - result.injected))
        chaos.watch(result, timeout=90)
        if result.injected == before:
            raise ChaosError(f"{fault.name}: a batch injected nothing")
        _keep_workers(chaos)
    chaos.watch(result, timeout=120)
    _keep_workers(chaos)
    result.seconds = time.monotonic() - started
    result.figures.update(fault_figures(chaos, result))
    result.figures["workers_died"] = chaos.workers_died - died_before
    say(f"{fault.name}: {json.dumps(summary_row(result))}")
    return result


def _keep_workers(chaos: Chaos) -> None:
    """Replace the workers the fault killed (or that died: counted), and wait for the new ones
    to register (a FLUSHALL forgets the registrations of the others, which keep working)."""
    for process in [w for w in chaos.fleet.workers if w.poll() is not None]:
        chaos.workers_died += 1
        say(f"worker {process.pid} exited on its own with {process.returncode}")
        chaos.fleet.workers.remove(process)
    missing = chaos.pool_size - len(chaos.fleet.alive())
    chaos.fleet.spawn_workers(max(0, missing))


def fault_figures(chaos: Chaos, result: FaultResult) -> dict[str, Any]:
    """The invariants, from the database and the ledger."""
    from review.models import ReviewRequest
    from tasks.models import Task, TaskEvent

    ledger = chaos.ledger()
    expected = [key for keys in result.keys.values() for key in keys]
    statuses = dict(Task.objects.filter(id__in=result.tasks).values_list("id", "status"))
    lost = [str(t) for t, s in statuses.items() if s != "succeeded"]
    approvals = list(ReviewRequest.objects.filter(id__in=result.approvals).select_related())
    approvals_lost = consumed_unrun = asked_twice = 0
    for review in approvals:
        if review.status != "approved":
            continue
        key = review.arguments.get("key")
        if not ledger.get(key):
            approvals_lost += 1
        ran = TaskEvent.objects.filter(
            task_id=review.task_id,
            type="status",
            payload__to="running",
            created_at__gte=review.decided_at,
        ).exists()
        if not ran:
            consumed_unrun += 1
        asked_twice += ReviewRequest.objects.filter(
            task_id=review.task_id,
            kind=review.kind,
            id__gt=review.id,
            original_arguments=review.original_arguments,
        ).count()
    return {
        "tasks": len(result.tasks),
        "effects_expected": len(expected),
        "effects_executed": sum(1 for key in expected if ledger.get(key)),
        "effects_duplicated": sum(max(0, ledger.get(key, 0) - 1) for key in expected),
        "approvals_given": len(result.approvals),
        "approvals_lost": approvals_lost,
        "approvals_asked_twice": asked_twice,
        "approvals_consumed_without_run": consumed_unrun,
        "tasks_lost": len(lost),
        "lost_task_ids": lost[:10],
        "lost_statuses": dict(Counter(statuses[t] for t in statuses if str(t) in lost)),
    }


def summary_row(result: FaultResult) -> dict[str, Any]:
    recoveries = result.recoveries()
    finite = [r for r in recoveries if r != float("inf")]
    return {
        "fault": result.name,
        "injected": result.injected,
        **{k: v for k, v in result.figures.items() if not isinstance(v, list)},
        "recovery_median_s": round(statistics.median(recoveries), 2) if recoveries else None,
        "recovery_p95_s": round(_p95(recoveries), 2) if recoveries else None,
        "recovery_max_s": round(max(finite), 2) if finite else None,
        "unrecovered": len(recoveries) - len(finite),
        "bound_s": round(result.bound_s, 1),
        "seconds": round(result.seconds, 1),
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


INVARIANTS = (
    "workers_died",
    "spurious_redispatches",
    "effects_duplicated",
    "approvals_lost",
    "approvals_asked_twice",
    "approvals_consumed_without_run",
    "tasks_lost",
)


def violations(result: FaultResult) -> list[str]:
    found = [f"{k}={result.figures[k]}" for k in INVARIANTS if result.figures.get(k)]
    if result.figures.get("effects_executed") != result.figures.get("effects_expected"):
        found.append(
            f"effects executed {result.figures.get('effects_executed')} of "
            f"{result.figures.get('effects_expected')}"
        )
    over = [r for r in result.recoveries() if r > result.bound_s]
    if over:
        found.append(f"{len(over)} recoveries over the {result.bound_s:g}s bound")
    return found


def render(results: list[FaultResult], *, meta: dict[str, Any]) -> str:
    head = (
        "| fault | injected | tasks | effects expected / executed / duplicated | approvals "
        "given / lost / asked twice / consumed unrun | tasks lost | recovery median / p95 (s) "
        "| bound (s) | ok |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    total = Counter()
    all_recoveries: list[float] = []
    for r in results:
        f = r.figures
        rec = r.recoveries()
        all_recoveries += rec
        for key in ("tasks", "effects_expected", "effects_executed", "effects_duplicated",
                    "approvals_given", "approvals_lost", "approvals_asked_twice",
                    "approvals_consumed_without_run", "tasks_lost"):  # fmt: skip
            total[key] += f.get(key, 0)
        total["injected"] += r.injected
        lines.append(
            f"| {r.title} | {r.injected} | {f['tasks']} | {f['effects_expected']} / "
            f"{f['effects_executed']} / {f['effects_duplicated']} | {f['approvals_given']} / "
            f"{f['approvals_lost']} / {f['approvals_asked_twice']} / "
            f"{f['approvals_consumed_without_run']} | {f['tasks_lost']} | "
            f"{_fmt(statistics.median(rec) if rec else None)} / {_fmt(_p95(rec) if rec else None)}"
            f" | ≤ {r.bound_s:g} ({r.bound_text}) | {'yes' if not violations(r) else 'NO'} |"
        )
    ok = all(not violations(r) for r in results)
    lines.append(
        f"| **total** | **{total['injected']}** | {total['tasks']} | {total['effects_expected']}"
        f" / {total['effects_executed']} / {total['effects_duplicated']} | "
        f"{total['approvals_given']} / {total['approvals_lost']} / "
        f"{total['approvals_asked_twice']} / {total['approvals_consumed_without_run']} | "
        f"{total['tasks_lost']} | {_fmt(_median(all_recoveries))}"
        f" / {_fmt(_p95(all_recoveries) if all_recoveries else None)} | | "
        f"{'yes' if ok else 'NO'} |"
    )
    notes = []
    for r in results:
        for v in violations(r):
            notes.append(f"- {r.name}: {v}")
    return (
        "# Chaos suite\n\n"
        f"`./harness chaos{' --short' if meta.get('short') else ''}` on commit "
        f"`{meta.get('commit', '?')}`{' (dirty tree)' if meta.get('dirty') else ''}, "
        f"{meta.get('date')}, {meta.get('cpus')} CPUs, load average {meta.get('load')} at the "
        f"start; {meta.get('seconds', 0):.0f} s in all. {meta.get('note', '')}\n\n"
        + head
        + "\n".join(lines)
        + "\n\n"
        + ("Violations:\n" + "\n".join(notes) + "\n\n" if notes else "")
        + CLOCKS_NOTE
    )


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    return "∞" if value == float("inf") else f"{value:.2f}"


CLOCKS_NOTE = (
    "Clocks: heartbeat {HARNESS_HEARTBEAT_S} s, stale after {HARNESS_STALE_AFTER_S} s, sweep "
    "every {HARNESS_SWEEP_INTERVAL_S} s, requeue grace {HARNESS_REQUEUE_GRACE_S} s, horse grace "
    "{HARNESS_HORSE_GRACE_S} s, idle-in-transaction timeout {HARNESS_DB_IDLE_IN_TRANSACTION_S} "
    "s; slack for a loaded machine {slack} s. Recovery: from the fault "
    "to the task's next progress (a new lease, a new checkpoint, a pause for a person, or, for "
    "an approval, its effect), polled every 0.1 s. Effects are `ledger_append` executions "
    "counted per key in the external ledger; an outcome lost with its worker is settled by the "
    "operator after a look at the ledger (mark done / run again), as the product asks.\n"
).format(slack=SLACK_S, **CLOCKS)


def git_state() -> tuple[str, bool]:
    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    dirty = [
        line
        for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
        if not line.endswith("bench/chaos.md")
    ]
    return git("rev-parse", "--short", "HEAD"), bool(dirty)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="harness chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--short", action="store_true", help="a few of each fault (CI)")
    parser.add_argument("--only", action="append", metavar="FAULT", help="run only this fault")
    parser.add_argument("--workers", type=int, default=8, help="local rqworkers (default 8)")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="where the table goes (default bench/chaos.md; with --short: nowhere)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the run's directory and logs")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    faults = [f for f in FAULTS if not args.only or f.name in args.only]
    if args.only and len(faults) != len(set(args.only)):
        known = ", ".join(f.name for f in FAULTS)
        print(f"error: unknown fault in {args.only}; known: {known}", file=sys.stderr)
        return 2
    commit, dirty = git_state()
    meta = {
        "short": args.short,
        "commit": commit,
        "dirty": dirty,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load": round(os.getloadavg()[0], 2),
    }
    started = time.monotonic()
    results: list[FaultResult] = []
    tmp = tempfile.mkdtemp(prefix="harness-chaos-")
    os.chmod(tmp, 0o755)  # the private PostgreSQL runs as the postgres user
    try:
        chaos = Chaos(root=Path(tmp))
        chaos.pool_size = args.workers
        try:
            chaos.start()
            chaos.fleet.start_sweeper()
            chaos.fleet.spawn_workers(args.workers)
            for fault in faults:
                reason = hosts_unavailable() if fault.hosts else ""
                if reason:
                    say(f"{fault.name}: skipped ({reason})")
                    meta.setdefault("skipped", {})[fault.name] = reason
                    continue
                count = fault.short if args.short else fault.full
                results.append(fault_run(chaos, fault, count=count))
        except ChaosError as exc:
            say(f"error: {exc}")
            _dump_logs(chaos)
            meta["error"] = str(exc)
        finally:
            if any(violations(r) for r in results):
                _dump_logs(chaos)
            chaos.stop()
    finally:
        if args.keep:
            say(f"kept {tmp} (logs in {tmp}/logs)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    meta["seconds"] = time.monotonic() - started
    meta["note"] = (f"**The run stopped early: {meta['error']}.** " if "error" in meta else "") + (
        "".join(f"Skipped {name}: {why}. " for name, why in meta.get("skipped", {}).items())
    )
    table = render(results, meta=meta)
    print(table)
    output = args.output or (None if args.short else CHAOS_MD)
    if output is not None:
        output.write_text(table)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"meta": meta, "faults": [summary_row(r) for r in results]}, indent=2, default=str
            )
        )
    if "error" in meta:
        return 2
    return 1 if any(violations(r) for r in results) else 0


def _dump_logs(chaos: Chaos) -> None:
    for path in sorted(chaos.log_dir.glob("*.log"))[-12:]:
        text = path.read_text(errors="replace")
        if "Traceback" in text or "Error" in text:
            say(f"--- {path.name}\n{text[-3000:]}")


if __name__ == "__main__":
    sys.exit(main())
