"""Shared fixtures: the cast of users, a Bearer-token API client, and real rqworker processes.

Integration tests (the `workers` fixture) run against the pytest-django test database, so they
must commit: mark them `@pytest.mark.django_db(transaction=True)` (requesting `workers` makes
the test transactional anyway). Run the suite with `./harness test`, which provides PostgreSQL,
Redis and the test tools.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from django.conf import settings as django_settings
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent
QUEUES = ("high", "default", "low")
TERMINAL = frozenset({"succeeded", "failed", "canceled"})
PASSWORD = "correct horse battery staple"
# "gw0", "gw1", ... inside a pytest-xdist process; "" otherwise.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

T = TypeVar("T")


# --- xdist: one Redis database and one ledger per test process -------------------------------


def redis_url_for_this_process(url: str) -> str:
    """Each xdist process gets its own Redis database (base index + process number): queue
    names are fixed, so this is what keeps one process's rqworkers from taking the jobs
    another process enqueued."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not XDIST_WORKER.startswith("gw"):
        return url
    index = int(parts.path.strip("/") or 0) + int(XDIST_WORKER[2:])
    return urlunsplit(parts._replace(path=f"/{index}"))


def pytest_configure(config: pytest.Config) -> None:
    if not XDIST_WORKER:
        return
    # django_rq reads RQ_QUEUES on every get_queue(), so changing settings here is enough.
    url = redis_url_for_this_process(django_settings.REDIS_URL)
    django_settings.REDIS_URL = url
    django_settings.RQ_QUEUES = {
        name: {**conf, "URL": url} for name, conf in django_settings.RQ_QUEUES.items()
    }
    # The ledger counts executions by key: keep processes from counting each other's.
    for name in ("HARNESS_WORKSPACE_ROOT", "HARNESS_LEDGER_DIR"):
        setattr(django_settings, name, Path(getattr(django_settings, name)) / XDIST_WORKER)


# --- polling ----------------------------------------------------------------------------------


def wait_for(
    predicate: Callable[[], T], timeout: float = 30.0, *, interval: float = 0.05, message: str = ""
) -> T:
    """Poll `predicate` until it returns something truthy (and return that), or fail after
    `timeout` seconds saying what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__name__", "a condition")
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> Callable[..., Any]:
    return wait_for


# --- the cast ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings) -> None:
    """The cast is created, and logs in, per test: the production hasher would dominate."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def roles(db):
    from harness_site.roles import roles_ensure

    return roles_ensure()


@pytest.fixture
def commands_allowed(db):
    """An explicit admin allow rule for run_command (otherwise every command waits for review)."""
    from review.models import ReviewRule

    return ReviewRule.objects.create(name="trust-commands", tool="run_command", action="allow")


@pytest.fixture
def operator(roles, django_user_model):
    """May decide reviews, cancel, retry and roll back."""
    user = django_user_model.objects.create_user(username="operator", password=PASSWORD)
    user.groups.add(roles["operators"])
    return user


@pytest.fixture
def viewer(roles, django_user_model):
    """May read everything, change nothing."""
    user = django_user_model.objects.create_user(username="viewer", password=PASSWORD)
    user.groups.add(roles["viewers"])
    return user


@pytest.fixture
def outsider(db, django_user_model):
    """Logged in, but in no group."""
    return django_user_model.objects.create_user(username="outsider", password=PASSWORD)


@pytest.fixture
def admin_user(db, django_user_model):
    """A superuser (replaces pytest-django's fixture of the same name)."""
    return django_user_model.objects.create_superuser(username="admin", password=PASSWORD)


# --- the API ----------------------------------------------------------------------------------


class ApiClient:
    """JSON requests as one user, authenticated by a fresh Bearer token (anonymous when the
    user is None). Paths are full paths: `/api/v1/tasks`."""

    def __init__(self, user=None) -> None:
        headers = {}
        if user is not None:
            from tasks.services import api_token_create

            headers["Authorization"] = f"Bearer {api_token_create(user=user)}"
        self.user = user
        self.client = Client(headers=headers)

    def get(self, path: str, params: dict[str, Any] | None = None):
        return self.client.get(path, params or {})

    def post(self, path: str, body: Any = None):
        return self.client.post(
            path, json.dumps({} if body is None else body), content_type="application/json"
        )


@pytest.fixture
def api_client(db) -> Callable[..., ApiClient]:
    """`api_client(operator).post("/api/v1/tasks", spec)`."""
    return ApiClient


class TaskApi:
    """Drives tasks the way an external client does: create over the API, poll to a status."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client

    def create(self, spec: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post("/api/v1/tasks", spec)
        assert response.status_code == 201, response.content
        return response.json()

    def get(self, task_id: str) -> dict[str, Any]:
        response = self.client.get(f"/api/v1/tasks/{task_id}")
        assert response.status_code == 200, response.content
        return response.json()

    def wait(self, task_id: str, *statuses: str, timeout: float = 60.0) -> dict[str, Any]:
        """The task once it is in one of `statuses`; fails at once if it ends elsewhere."""
        wanted = set(statuses or ("succeeded",))

        def reached() -> dict[str, Any] | None:
            task = self.get(task_id)
            if task["status"] in wanted:
                return task
            if task["status"] in TERMINAL:
                raise AssertionError(
                    f"task {task_id} ended {task['status']} ({task['error_class']}: "
                    f"{task['error_message']}), expected {sorted(wanted)}"
                )
            return None

        return wait_for(
            reached, timeout, interval=0.1, message=f"task {task_id} to become {sorted(wanted)}"
        )

    def run(self, spec: dict[str, Any], *statuses: str, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait(self.create(spec)["id"], *statuses, timeout=timeout)


@pytest.fixture
def task_api(operator) -> TaskApi:
    """Tasks created and polled over the API as the operator."""
    return TaskApi(ApiClient(operator))


# --- real workers -----------------------------------------------------------------------------


def database_url_for_subprocess() -> str:
    """A DATABASE_URL naming the database this test process uses right now (pytest-django's
    `test_<name>`, with an xdist suffix), so worker subprocesses see the committed rows."""
    from django.db import connection

    conf = connection.settings_dict
    if conf["ENGINE"].endswith("sqlite3"):
        name = str(conf["NAME"])
        if "memory" in name:
            pytest.fail(
                "integration tests need a database other processes can open: "
                "run them with ./harness test (PostgreSQL)"
            )
        return f"sqlite:///{name}"
    auth = quote(conf["USER"] or "", safe="")
    if conf["PASSWORD"]:
        auth += ":" + quote(conf["PASSWORD"], safe="")
    host = conf["HOST"] or "127.0.0.1"
    port = conf["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{quote(conf['NAME'], safe='')}"


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def processes_running(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (zombies, already killed and only
    waiting to be reaped, do not count). Sandboxed commands report pids of their own PID
    namespace, so tests find their processes by a unique marker in the command line instead."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state != "Z" and "bwrap" not in cmdline.split(" ", 1)[0]:
            found.append(int(entry.name))
    return found


def child_pids(pid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if parent_pid(int(p.name)) == pid]


class WorkerPool:
    """Real `manage.py rqworker high default low --with-scheduler` processes, each in its own
    process group (so stopping one also stops its forked work horse and scheduler)."""

    def __init__(self, *, log_dir: Path) -> None:
        import redis

        self.log_dir = log_dir
        self.redis_url = django_settings.REDIS_URL
        self.redis = redis.Redis.from_url(self.redis_url)
        self.processes: list[subprocess.Popen] = []
        self.env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="harness_site.settings",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            PYTHONUNBUFFERED="1",
            DATABASE_URL=database_url_for_subprocess(),
            REDIS_URL=self.redis_url,
            HARNESS_WORKSPACE_ROOT=str(django_settings.HARNESS_WORKSPACE_ROOT),
            HARNESS_LEDGER_DIR=str(django_settings.HARNESS_LEDGER_DIR),
            HARNESS_ENABLE_TEST_TOOLS="1" if django_settings.HARNESS_ENABLE_TEST_TOOLS else "0",
        )

    def registered_pids(self) -> set[int]:
        from rq import Worker

        return {worker.pid for worker in Worker.all(connection=self.redis)}

    def start(self, count: int = 1, *, timeout: float = 60.0) -> list[subprocess.Popen]:
        """Start `count` workers and wait until each has registered with Redis."""
        started = []
        for _ in range(count):
            log = open(self.log_dir / f"worker-{len(self.processes) + 1}.log", "wb")  # noqa: SIM115
            process = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "rqworker", *QUEUES, "--with-scheduler"],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            self.processes.append(process)
            started.append(process)

        def ready() -> bool:
            for process in started:
                if process.poll() is not None:
                    raise AssertionError(
                        f"rqworker {process.pid} exited with {process.returncode}:\n" + self.logs()
                    )
            return {p.pid for p in started} <= self.registered_pids()

        wait_for(ready, timeout, interval=0.1, message=f"{count} rqworker(s) to register")
        return started

    def kill(self, process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        """Signal a worker's whole process group (SIGKILL by default: a crash). A SIGKILL also
        reaches its work horse, which RQ puts in a process group of its own; the horse is
        found before the worker dies, while it is still the worker's child."""
        horses = child_pids(process.pid) if sig == signal.SIGKILL else []
        for pgid in [*horses, process.pid]:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGKILL:
            process.wait(timeout=10)

    def stop(self, *, grace: float = 3.0) -> None:
        for process in self.processes:
            if process.poll() is None:
                self.kill(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.poll() is None for p in self.processes):
            time.sleep(0.05)
        for process in self.processes:
            if process.poll() is None:
                self.kill(process)
            else:
                # A work horse whose worker already exited keeps the worker's pid as its group.
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait(timeout=10)

    def logs(self, tail: int = 60) -> str:
        parts = []
        for path in sorted(self.log_dir.glob("worker-*.log")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)


@pytest.fixture
def worker_pool(transactional_db, tmp_path: Path) -> Iterator[WorkerPool]:
    """An empty pool on a flushed test Redis database; start (and kill) workers yourself."""
    log_dir = tmp_path / "worker-logs"
    log_dir.mkdir()
    pool = WorkerPool(log_dir=log_dir)
    pool.redis.flushdb()
    try:
        yield pool
    finally:
        pool.stop()
        # Shown by pytest only when the test failed.
        print(pool.logs())


@pytest.fixture
def workers(worker_pool: WorkerPool) -> WorkerPool:
    """Two running rqworkers on the test database and a flushed test Redis database."""
    worker_pool.start(2)
    return worker_pool


# --- headless Chromium ------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian chromium is not installed"
)


@pytest.fixture
def browser(monkeypatch):
    """Debian's Chromium driven by Playwright (never a downloaded browser)."""
    from django.db import connections
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the ORM calls the test makes
    # between browser steps are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            # ORM calls made while Playwright's loop runs get their own connection (Django's
            # connections are context-local): close it, or the test database cannot be dropped.
            connections.close_all()
