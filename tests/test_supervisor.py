"""`harness up`'s supervisor heals (real processes, a fast restart policy): a child that dies is
restarted with backoff while the others keep serving; one that keeps crashing is given up on
and shown down; only a critical child (web, embedded Redis) given up on stops everything."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_site.cli.restarts import RestartPolicy, exit_described
from harness_site.cli.supervisor import Supervisor
from tests.conftest import free_port, wait_for

# The policy of `harness up` with its waits cut a hundredfold: 5 restarts within 60 s.
FAST = RestartPolicy(initial_s=0.01, cap_s=0.3, window_s=60, max_restarts=5)
CRASHER = ["/bin/sh", "-c", "exit 3"]


class Running:
    """A supervisor supervising in a thread, its exit code once it returns."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.code = self.supervisor.supervise()

    def child(self, name: str):
        return next(c for c in self.supervisor.children if c.name == name)

    def status(self) -> dict[str, dict]:
        record = json.loads(self.supervisor.status_path.read_text())
        return {p["name"]: p for p in record["processes"]}

    def stop(self) -> int | None:
        self.supervisor.stop_signal = signal.SIGTERM
        self.supervisor._wake.set()
        self.thread.join(timeout=30)
        return self.code


@pytest.fixture
def web_port() -> int:
    return free_port()


@pytest.fixture
def supervisor(tmp_path: Path, web_port: int) -> Iterator[Supervisor]:
    supervisor = Supervisor(policy=FAST, status_path=tmp_path / "supervisor.json", stop_grace_s=5)
    env = dict(os.environ)
    web = [sys.executable, "-m", "http.server", str(web_port), "--bind", "127.0.0.1"]
    supervisor.start("web", web, env=env, critical=True)
    yield supervisor
    supervisor.stop_all()


def _serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_backoff_doubles_from_one_second_to_thirty():
    policy = RestartPolicy()
    waits = [policy.backoff_s(recent_restarts=n) for n in range(7)]
    assert waits == [1, 2, 4, 8, 16, 30, 30]
    assert exit_described(-9) == "killed by SIGKILL" and exit_described(3) == "exit code 3"


def test_a_killed_worker_is_restarted_and_the_web_server_keeps_serving(supervisor, web_port, capfd):
    supervisor.start("worker-1", ["/bin/sleep", "600"], env=dict(os.environ))
    wait_for(lambda: _serves(web_port), 30, message="the web server")
    running = Running(supervisor)
    try:
        worker = running.child("worker-1")
        first = worker.process.pid
        os.kill(first, signal.SIGKILL)
        wait_for(
            lambda: (
                worker.process.pid != first and running.status()["worker-1"]["state"] == "running"
            ),
            10,
            message="worker-1 to be restarted",
        )
        assert _serves(web_port)
        status = running.status()
        assert status["worker-1"]["restarts"] == 1
        assert status["worker-1"]["last_exit"] == f"pid {first} killed by SIGKILL"
        assert status["web"]["state"] == "running" and status["web"]["restarts"] == 0
    finally:
        assert running.stop() == 0
    err = capfd.readouterr().err
    assert f"worker-1 (pid {first} killed by SIGKILL) exited unexpectedly; restarting it" in err
    assert "worker-1 restarted (pid" in err
    # Stopped cleanly: the record of what is supervised is gone with the supervisor.
    assert not supervisor.status_path.exists()


def test_a_crash_loop_is_given_up_after_five_restarts_while_web_keeps_serving(
    supervisor, web_port, capfd
):
    supervisor.start("sweeper", CRASHER, env=dict(os.environ))
    wait_for(lambda: _serves(web_port), 30, message="the web server")
    running = Running(supervisor)
    try:
        wait_for(lambda: running.status()["sweeper"]["state"] == "down", 30, message="the give-up")
        assert running.child("sweeper").restarts == 5
        assert running.code is None and running.thread.is_alive()  # everything else goes on
        assert _serves(web_port)
        assert running.status()["sweeper"]["last_exit"].endswith("exit code 3")
    finally:
        assert running.stop() == 0
    err = capfd.readouterr().err
    assert "crashed again after 5 restarts within 60s; giving up on it" in err
    assert "the rest keeps running" in err


def test_a_critical_child_given_up_on_stops_everything(supervisor, web_port, capfd):
    supervisor.start("redis", CRASHER, env=dict(os.environ), critical=True, stop_last=True)
    running = Running(supervisor)
    running.thread.join(timeout=30)
    assert running.code == 1
    assert "redis" in capfd.readouterr().err
    web = running.child("web")
    assert web.process.poll() is not None and not _serves(web_port)
