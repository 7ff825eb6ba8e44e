"""The suite's stack: start, worker hosts, stop."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from bench.chaos.clocks import (
    CLOCK_OFFSET_DIR,
    CLOCKS,
    HARNESS_YAML,
    HOST_ENV,
    HOST_QUEUES,
    ROOT,
    say,
)
from bench.chaos.fleet import Fleet
from bench.chaos.processes import PrivatePostgres, PrivateRedis, free_port
from harness_base.queues import RESUME_QUEUE


class ChaosStack:
    """The suite's stack: private PostgreSQL and Redis, the local worker fleet, the worker hosts
    made on first use."""

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
