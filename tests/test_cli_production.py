"""The production entry points as a service manager runs them: `harness web` serves and its
`/readyz` follows the database away and back; `harness worker --burst` takes the queued job and
exits; `--queues` limits what a worker takes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

from bench.hosts import Forwarder
from tests.conftest import ROOT, database_url_for_subprocess, free_port, spawn
from tests.factories import scripted_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SECRET_KEY = "a-production-secret-for-tests-" + "k3Zq" * 10


def _get(url: str) -> tuple[int, Any]:
    """Status and JSON body; a client timeout well above the probe's own bounds, so a probe
    that hangs fails the test instead of answering late."""
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (urllib.error.URLError, OSError):
        return 0, None


def test_readyz_answers_503_naming_the_database_while_it_is_unreachable(tmp_path, wait_for):
    database = urlsplit(database_url_for_subprocess())
    upstream = (database.hostname or "127.0.0.1", database.port or 5432)
    proxy = Forwarder(listen=("127.0.0.1", 0), upstream=upstream)
    userinfo = database.netloc.rpartition("@")[0]
    through_proxy = database._replace(netloc=f"{userinfo}@127.0.0.1:{proxy.address[1]}")
    port = free_port()
    env = dict(
        os.environ,
        DATABASE_URL=through_proxy.geturl(),
        REDIS_URL=django_settings.REDIS_URL,
        SECRET_KEY=SECRET_KEY,
        HARNESS_DATA_DIR=str(tmp_path / "data"),
    )
    log = tmp_path / "web.log"
    web = spawn(
        ["web", "--port", str(port), "--processes", "1"],
        module="harness_site.cli",
        log=log,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    ready = (200, {"ready": True, "failing": []})
    database_down = (503, {"ready": False, "failing": ["database"]})
    try:
        wait_for(lambda: _get(f"{base}/readyz") == ready, timeout=180, message="web to be ready")

        proxy.close()  # PostgreSQL refuses connections
        assert _get(f"{base}/readyz") == database_down
        assert _get(f"{base}/healthz") == (200, {"ok": True})

        # Connections are accepted by the kernel and never answered (a host gone silent):
        # the probe's own timeout answers.
        with socket.create_server(proxy.address):
            assert _get(f"{base}/readyz") == database_down

        proxy = Forwarder(listen=proxy.address, upstream=upstream)
        wait_for(lambda: _get(f"{base}/readyz") == ready, timeout=30, message="ready again")
    finally:
        os.killpg(web.pid, signal.SIGKILL)
        web.wait(timeout=30)
        proxy.close()
        print(log.read_text(errors="replace"))


def _worker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness_site.cli", "worker", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_worker_burst_takes_the_queued_job_and_exits(worker_pool, task_api):
    env = dict(worker_pool.env, SECRET_KEY=SECRET_KEY)
    task = task_api.create(scripted_spec([{"final": "done"}]))

    elsewhere = _worker(env, "--queues", "low", "--burst")
    assert elsewhere.returncode == 0, elsewhere.stderr + elsewhere.stdout
    assert task_api.get(task["id"])["status"] == "queued", "a worker takes only its queues"

    burst = _worker(env, "--burst")
    assert burst.returncode == 0, burst.stderr + burst.stdout
    finished = task_api.get(task["id"])
    assert (finished["status"], finished["result"]) == ("succeeded", "done")


def test_worker_names_an_unknown_queue(worker_pool):
    result = _worker(dict(worker_pool.env, SECRET_KEY=SECRET_KEY), "--queues", "urgent")
    assert result.returncode == 2
    assert "urgent" in result.stderr


def test_each_entry_point_is_listed_in_the_help():
    result = subprocess.run(
        [sys.executable, "-m", "harness_site.cli", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert all(name in result.stdout for name in ("web", "worker", "sweep"))
