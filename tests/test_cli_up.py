"""`harness up` as a user runs it: everything starts, the site and its static files are served,
the demo tasks run, and Ctrl-C stops every process it started — and only those."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from harness_site.cli.up_setup import base_url_default
from tests.conftest import ROOT, free_port, spawn, wait_for

pytestmark = pytest.mark.integration

ADMIN_PASSWORD = "demo-password-123"


class Up:
    def __init__(self, process: subprocess.Popen, *, port: int, log: Path, data_dir: Path) -> None:
        self.process = process
        self.port = port
        self.log = log
        self.data_dir = data_dir

    @property
    def text(self) -> str:
        """What `harness up` printed so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_running(self) -> None:
        """Until `harness up` reports its URL (it started everything), and is still running."""
        wait_for(
            lambda: "is running at" in self.text or self.process.poll() is not None,
            180,
            interval=0.2,
            message="harness up to report its URL",
        )
        assert self.process.poll() is None, self.text


@pytest.fixture
def up() -> Iterator[Up]:
    data_dir = Path(tempfile.mkdtemp(prefix="harness-up-", dir="/tmp"))
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in (
            "DATABASE_URL",
            "REDIS_URL",
            "HARNESS_WORKSPACE_ROOT",
            "HARNESS_LEDGER_DIR",
            "HARNESS_ENABLE_TEST_TOOLS",
        )
    }
    env.update(
        HARNESS_DATA_DIR=str(data_dir),
        HARNESS_ADMIN_PASSWORD=ADMIN_PASSWORD,
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    with up_running(
        ["--port", str(free_port()), "--workers", "2"], env=env, data_dir=data_dir
    ) as handle:
        yield handle


@contextmanager
def up_running(args: list[str], *, env: dict[str, str], data_dir: Path) -> Iterator[Up]:
    """`harness up ARGS` with `env`, its output in a log file; then every process it started
    killed, its output printed (shown when the test failed), `data_dir` removed."""
    port = int(args[args.index("--port") + 1])
    log = data_dir.parent / f"{data_dir.name}.log"
    process = spawn(["up", *args], module="harness_site.cli", log=log, env=env)
    handle = Up(process, port=port, log=log, data_dir=data_dir)
    try:
        yield handle
    finally:
        if process.poll() is None:
            for child in psutil.Process(process.pid).children(recursive=True):
                child.kill()
            process.kill()
        process.wait(timeout=30)
        print(handle.text)
        shutil.rmtree(data_dir, ignore_errors=True)
        log.unlink(missing_ok=True)


def _login(client: httpx.Client) -> None:
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(
        "/accounts/login/",
        data={
            "username": "admin",
            "password": ADMIN_PASSWORD,
            "csrfmiddlewaretoken": token,
        },
    )
    assert response.status_code == 302, response.text


def test_up_serves_the_site_runs_demo_tasks_and_ctrl_c_stops_everything(up):
    up.wait_running()
    assert f"http://127.0.0.1:{up.port}/" in up.text
    assert f"links: http://127.0.0.1:{up.port} (HARNESS_BASE_URL)" in up.text
    # A fresh checkout sandboxes commands with the bubblewrap that .venv ships.
    assert "command sandbox: bubblewrap (" in up.text, up.text

    children = psutil.Process(up.process.pid).children(recursive=True)
    commands = [" ".join(child.cmdline()) for child in children]
    assert sum("rqworker resume high default low --with-scheduler" in c for c in commands) >= 2
    assert any("gunicorn" in c for c in commands)
    assert any("harness_sweep --loop" in c for c in commands)
    assert any("redis-server" in c for c in commands)

    with httpx.Client(base_url=f"http://127.0.0.1:{up.port}", timeout=10) as client:
        _login(client)
        assert client.get("/").status_code == 200
        static_files_are_hashed_compressed_and_cached_for_a_year(client)

        demo = dict(re.findall(r"created demo task (\S+): (.+)", up.text))
        assert len(demo) == 10, up.text

        def demo_settled() -> dict[str, str] | None:
            statuses = {
                title: client.get(f"/api/v1/tasks/{task_id}").json()["status"]
                for task_id, title in demo.items()
            }
            settled = all(s in ("succeeded", "waiting_review") for s in statuses.values())
            return statuses if settled else None

        # Ten tasks (one a group of four) on two workers.
        statuses = wait_for(demo_settled, 120, interval=0.2, message="the demo tasks to settle")
        # Links (API `url`, notifications) name the port `up` serves on (HARNESS_BASE_URL).
        pending = client.get("/api/v1/reviews", params={"status": "pending"}).json()
        assert pending[0]["url"] == f"http://127.0.0.1:{up.port}/reviews/{pending[0]['id']}/"
    # A task's files are in this instance's data directory.
    notes = next(task_id for task_id, title in demo.items() if "release notes" in title)
    assert (up.data_dir / "workspaces" / notes / "notes" / "RELEASE-1.2.md").is_file()
    assert statuses == {
        "Demo: write release notes": "succeeded",
        "Demo: clean up old logs": "waiting_review",
        "Demo: raise the worker limit": "waiting_review",
        # open_ticket (compensated by close_ticket) is external: the shipped rule reviews it.
        "Demo: report the outage (a tool with a compensation)": "waiting_review",
        # The bundled MCP server listed the notes, then its destructive tool paused for review.
        "Demo: tidy the notes (MCP server)": "waiting_review",
        "Demo: market survey by three sub-agents": "succeeded",
        # Both graphs run on the embedded SQLite and stop at their human-approval step.
        "Demo: cut release 1.5 (LangGraph)": "waiting_review",
        "Demo: announce the release (LangChain agent)": "waiting_review",
        # The agent SDKs' examples: a needs_approval / requires_approval tool awaits review.
        "Demo: release notes 1.5.0 (OpenAI Agents SDK)": "waiting_review",
        "Demo: publish the v1.5 changelog (Pydantic AI)": "waiting_review",
    }

    up.process.send_signal(signal.SIGINT)
    assert up.process.wait(timeout=60) == 0, up.text
    still_running = [c for c in children if c.is_running() and c.status() != "zombie"]
    assert still_running == []


def static_files_are_hashed_compressed_and_cached_for_a_year(client: httpx.Client) -> None:
    page = client.get("/tasks/").text
    links = re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
    css = next(link for link in links if re.fullmatch(r"/static/harness\.[0-9a-f]{12}\.css", link))
    assert any(re.fullmatch(r"/static/vendor/htmx\.min\.[0-9a-f]{12}\.js", x) for x in links)
    plain = client.get(css, headers={"Accept-Encoding": "identity"})
    for encoding in ("br", "gzip"):
        response = client.get(css, headers={"Accept-Encoding": encoding})
        assert response.status_code == 200
        assert response.headers["Content-Encoding"] == encoding
        assert int(response.headers["Content-Length"]) < len(plain.content) / 2
        assert response.text == plain.text  # httpx decodes both
        assert response.headers["Cache-Control"] == "max-age=315360000, public, immutable"
        assert "Accept-Encoding" in response.headers["Vary"]
    assert "Content-Encoding" not in plain.headers


def _workspace_root(env: dict[str, str]) -> Path:
    code = "from harness_site import settings as s; print(s.HARNESS_WORKSPACE_ROOT)"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return Path(run.stdout.strip())


def test_workspaces_default_to_this_instances_data_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(HARNESS_DATA_DIR=str(tmp_path / "data"), PYTHONPATH=str(ROOT))
    assert _workspace_root(env) == tmp_path / "data" / "workspaces"
    env["HARNESS_WORKSPACE_ROOT"] = str(tmp_path / "elsewhere")
    assert _workspace_root(env) == tmp_path / "elsewhere"


def test_links_name_the_host_and_port_up_serves_on():
    assert base_url_default(host="127.0.0.1", port=8765) == "http://127.0.0.1:8765"
    assert base_url_default(host="::1", port=9000) == "http://[::1]:9000"
    # A wildcard address is no place to send people: the machine's name is.
    assert base_url_default(host="0.0.0.0", port=80) == f"http://{socket.gethostname()}:80"
