"""`harness up` heals (real processes): a worker killed with SIGKILL in the middle of a sandboxed
command takes nothing down — the web server answers throughout, the worker is restarted within
its backoff, its work horse, sandbox and command die with it within seconds, and the task goes
on (an unknown outcome for the interrupted command, which a person marks done) and pays once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import ROOT, free_port, wait_for
from tests.test_cli_up import ADMIN_PASSWORD, Up, up_running

pytestmark = pytest.mark.integration

CONFIG = """
review_rules:
  - {name: sleeps, tool: run_command, command_regex: "^sleep [0-9]+$", action: allow}
timeouts: {session_s: 600, turn_s: 200, tool_s: 120}
"""

SCRIPT = [
    {"call": "run_command", "args": {"command": "sleep 60"}},
    {"call": "ledger_append", "args": {"key": "heal", "value": "paid"}},
    {"final": "done"},
]


@pytest.fixture
def up_fast(tmp_path: Path) -> Iterator[Up]:
    """`harness up --no-demo` with two workers, test tools and fast heartbeats and sweeps."""
    data_dir = Path(tempfile.mkdtemp(prefix="harness-up-", dir="/tmp"))
    config = tmp_path / "harness.yaml"
    config.write_text(CONFIG)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "HARNESS_WORKSPACE_ROOT")
    }
    env.update(
        HARNESS_DATA_DIR=str(data_dir),
        HARNESS_ADMIN_PASSWORD=ADMIN_PASSWORD,
        HARNESS_CONFIG=str(config),
        HARNESS_ENABLE_TEST_TOOLS="1",
        HARNESS_LEDGER_DIR=str(tmp_path / "ledger"),
        HARNESS_HEARTBEAT_S="0.5",
        HARNESS_STALE_AFTER_S="2",
        HARNESS_SWEEP_INTERVAL_S="0.5",
        HARNESS_WORKER_PRELOAD="none",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    args = ["--port", str(free_port()), "--workers", "2", "--no-demo"]
    with up_running(args, env=env, data_dir=data_dir) as handle:
        handle.env = env
        yield handle


class WebProbe(threading.Thread):
    """Asks the web server for its login page every 0.2 s until stopped; counts failures."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.answered = 0
        self.failures: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self.done.wait(0.2):
                try:
                    status = client.get(self.url).status_code
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                    continue
                if status == 200:
                    self.answered += 1
                else:
                    self.failures.append(str(status))


def _token(up: Up) -> str:
    run = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "createapitoken", "admin"],
        env=up.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout.strip().split()[-1]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_worker_killed_mid_command_is_restarted_and_leaves_nothing_running(up_fast):
    up = up_fast
    up.wait_running()
    base = f"http://127.0.0.1:{up.port}"
    probe = WebProbe(base + "/accounts/login/")
    probe.start()
    api = httpx.Client(base_url=base, timeout=10, headers={"Authorization": f"Bearer {_token(up)}"})
    spec = {
        "title": "heal",
        "goal": "pay once",
        "model": {"kind": "scripted", "script": SCRIPT},
        "tools": ["run_command", "ledger_append"],
    }
    created = api.post("/api/v1/tasks", json=spec)
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]

    def command_running() -> int | None:
        calls = api.get(f"/api/v1/tasks/{task_id}/tool-calls").json()
        worker_id = api.get(f"/api/v1/tasks/{task_id}").json()["worker_id"]
        if not calls or calls[0]["status"] != "running" or not worker_id:
            return None
        horse = int(worker_id.rsplit(":", 1)[1])
        sleeping = [
            p for p in psutil.Process(horse).children(recursive=True) if "sleep" in p.name()
        ]
        return horse if sleeping else None

    horse = wait_for(command_running, 60, interval=0.1, message="the command to run")
    left = [horse, *(p.pid for p in psutil.Process(horse).children(recursive=True))]
    worker = psutil.Process(horse).ppid()
    # "worker-N | ... started with PID 123, ...": RQ logs its pid as it starts.
    name = next(
        line.split("|")[0].strip()
        for line in up.text.splitlines()
        if f"started with PID {worker}," in line
    )

    os.kill(worker, signal.SIGKILL)

    # The horse, its bubblewrap sandbox and the command in it die with the worker.
    wait_for(lambda: not any(_alive(pid) for pid in left), 10, message="the worker's leftovers")
    # The worker is back within its first backoff (1 s), under the same name.
    wait_for(lambda: f"{name} restarted (pid" in up.text, 20, message=f"{name} restarted")
    assert f"{name} (pid {worker} killed by SIGKILL) exited unexpectedly; restarting it in 1s" in (
        up.text
    )
    new_pid = int(re.search(rf"{name} restarted \(pid (\d+)", up.text).group(1))
    assert _alive(new_pid) and psutil.Process(new_pid).ppid() == up.process.pid

    # Redispatched from its checkpoint; the interrupted command's outcome is unknown (it is
    # not idempotent): a person says it is done, and the task goes on to pay, once.
    wait_for(
        lambda: api.get(f"/api/v1/tasks/{task_id}").json()["status"] == "waiting_review",
        60,
        interval=0.2,
        message="the unknown-outcome review",
    )
    (review,) = api.get("/api/v1/reviews", params={"status": "pending", "task": task_id}).json()
    decided = api.post(
        f"/api/v1/reviews/{review['id']}/decision",
        json={"decision": "mark_done", "comment": "the sleep ended", "result": {"exit_code": 0}},
    )
    assert decided.status_code == 200, decided.text
    wait_for(
        lambda: api.get(f"/api/v1/tasks/{task_id}").json()["status"] == "succeeded",
        60,
        interval=0.2,
        message="the task to succeed",
    )
    ledger = (Path(up.env["HARNESS_LEDGER_DIR"]) / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["key"] for line in ledger] == ["heal"]

    events = api.get(f"/api/v1/tasks/{task_id}/events").json()
    (lost,) = [e for e in events if e["type"] == "worker_lost"]
    assert lost["payload"]["outcome"] == "redispatched"
    assert [(c["tool"], c["fate"]) for c in lost["payload"]["calls"]] == [
        ("run_command", "unknown_outcome_review")
    ]

    # /ops/ shows the worker restarted: its new pid running, how the old one ended.
    web = httpx.Client(base_url=base, timeout=10)
    page = web.get("/accounts/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    web.post(
        "/accounts/login/",
        data={"username": "admin", "password": ADMIN_PASSWORD, "csrfmiddlewaretoken": csrf},
    )
    ops = web.get("/ops/").text
    assert f'data-testid="supervised-pid-{name}">{new_pid}<' in ops
    assert f'data-testid="supervised-exit-{name}">pid {worker} killed by SIGKILL<' in ops

    probe.done.set()
    probe.join()
    assert probe.failures == [] and probe.answered > 0
