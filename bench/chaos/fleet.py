"""The local worker fleet: `rqworker` processes and `harness_sweep --loop` sweepers on the
suite's fast clocks, spawned, watched, killed and replaced."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

from bench.chaos.clocks import CLOCKS, ROOT, ChaosError
from bench.chaos.processes import child_pids, killpg, parent_pid, poll
from harness_base.queues import RESUME_QUEUE


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
        # The workers of the hosts (bench/hosts/), which the hosts start and stop.
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
