"""Shared fixtures: the cast of users, a Bearer-token API client, and real rqworker processes.

Integration tests (the `workers` fixture) run against the pytest-django test database, so they
must commit: mark them `@pytest.mark.django_db(transaction=True)` (requesting `workers` makes
the test transactional anyway). Run the suite with `./harness test`, which provides PostgreSQL,
Redis and the test tools.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from django.conf import settings as django_settings
from django.db import connections
from django.test import Client
from pytest_django.live_server_helper import LiveServer

from bench.common import spawn, worker_environment
from bench.common import wait_for as poll
from harness_base.config import harness_config
from harness_base.queues import WORKER_QUEUES
from review.models import ReviewRequest
from review.services import review_decide
from tasks.canonical import canonical_hash
from tests.chromium import SharedChromium
from tests.factories import PASSWORD, UserFactory, run_in_process, scripted_task
from tests.flush import flush_by_delete
from tests.nodelay import NoDelayHTTPServer, NoDelayWSGIServer
from tests.strays import group_kill_ours, harness_processes, strays_stop
from tests.template_db import setup_from_template
from tests.zygote import zygote

ROOT = Path(__file__).resolve().parent.parent
TERMINAL = frozenset({"succeeded", "failed", "canceled"})
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


def _cost_class(item: pytest.Item) -> int:
    """-1 for the short chaos suite (its own xdist group, `@pytest.mark.xdist_group("chaos")`:
    minutes of its own processes, started first), 0 for the longest tests (the API fuzzing
    shards: a minute or two each), 1 for the ones with real workers (tens of seconds; marked,
    or using the worker pool through any fixture) and the benchmark smoke runs, 2 for the
    browser ones, 3 for the rest."""
    group = item.get_closest_marker("xdist_group")
    if group is not None and (group.args or [group.kwargs.get("name")])[0] == "chaos":
        return -1
    if "schemathesis" in item.nodeid:
        return 0
    fixtures = getattr(item, "fixturenames", ())
    if (
        item.get_closest_marker("integration")
        or "worker_pool" in fixtures
        or item.nodeid.startswith("tests/bench/")  # each runs a benchmark at smoke size
    ):
        return 1
    return 2 if item.get_closest_marker("browser") else 3


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first, so that pytest-xdist's processes end together: one shard of minutes
    handed out last keeps one process busy while the others idle (`harness test` runs
    `--dist loadgroup`, which hands the tests out one by one in this order). A stable sort: the
    order within a class is the files' (the same in every xdist process, as the scheduler
    needs)."""
    items.sort(key=_cost_class)


def pytest_configure(config: pytest.Config) -> None:
    flush_by_delete()
    manifest = Path(django_settings.STATIC_ROOT) / "staticfiles.json"
    if not manifest.is_file():
        pytest.exit(
            f"no {manifest}: pages link the collected static files; run the tests with "
            "`./harness test` (it runs collectstatic) or run `manage.py collectstatic` first",
            returncode=4,
        )
    if not XDIST_WORKER:
        return
    # django_rq reads RQ_QUEUES on every get_queue(), so changing settings here is enough.
    url = redis_url_for_this_process(django_settings.REDIS_URL)
    django_settings.REDIS_URL = url
    # And for the subprocesses that inherit the environment (`manage.py ...`, `harness ...`):
    # on the first process's database they would add to its counters and take its jobs.
    os.environ["REDIS_URL"] = url
    django_settings.RQ_QUEUES = {
        name: {**conf, "URL": url} for name, conf in django_settings.RQ_QUEUES.items()
    }
    # The ledger counts executions by key: keep processes from counting each other's.
    for name in ("HARNESS_WORKSPACE_ROOT", "HARNESS_LEDGER_DIR"):
        setattr(django_settings, name, Path(getattr(django_settings, name)) / XDIST_WORKER)


@pytest.fixture(scope="session")
def django_db_setup(
    request, django_test_environment, django_db_blocker, django_db_modify_db_settings
):
    """pytest-django's test database, cloned from a migrated template rather than migrated
    in every test process (tests/template_db.py); pytest-django's own set-up elsewhere."""
    from django.test.utils import setup_databases, teardown_databases

    verbosity = request.config.option.verbose
    with django_db_blocker.unblock():
        old_config = setup_from_template(verbosity) or setup_databases(
            verbosity=verbosity, interactive=False, aliases={"default"}
        )
    yield
    with django_db_blocker.unblock():
        try:
            teardown_databases(old_config, verbosity=verbosity)
        except Exception as exc:  # noqa: BLE001 - as pytest-django: a warning, not an error
            request.node.warn(pytest.PytestWarning(f"test database teardown: {exc!r}"))


@pytest.fixture(autouse=True)
def no_strays(request: pytest.FixtureRequest) -> Iterator[None]:
    """Set up first and torn down last: the harness subprocesses a test (or its fixtures) left
    running are named in a warning and killed (tests/strays.py)."""
    before = harness_processes()
    yield
    strays_stop(request.node.nodeid, before)


# --- polling ----------------------------------------------------------------------------------


def wait_for(
    predicate: Callable[[], T], timeout: float = 30.0, *, interval: float = 0.05, message: str = ""
) -> T:
    """Poll `predicate` until it returns something truthy (and return that), or fail after
    `timeout` seconds saying what was awaited."""
    what = message or getattr(predicate, "__name__", "a condition")
    return poll(predicate, timeout=timeout, interval=interval, what=what, error=AssertionError)


def run_in_threads(*targets: Callable[[], Any], timeout: float = 60.0) -> None:
    """Run each target in a thread of its own, all started together, and wait for them. Each
    thread closes its own database connections when its target returns."""

    def closing(target: Callable[[], Any]) -> None:
        try:
            target()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=closing, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


@contextlib.contextmanager
def http_serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """A loopback HTTP server (any free port) answering with `handler` in daemon threads, for
    the length of the block."""
    httpd = NoDelayHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def manage_py(*args: str) -> tuple[int, str, str]:
    """`manage.py ARGS` run as manage.py runs it once Django is set up, but in this process: on
    this test's database and settings, without a second interpreter's start-up (seconds on a
    loaded machine). Its exit code, standard output and standard error. For tests of what a
    command says and exits with; tests of the process itself start it for real."""
    from django.core.management import ManagementUtility

    argv = ["manage.py", *args]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            ManagementUtility(argv).fetch_command(args[0]).run_from_argv(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> Callable[..., Any]:
    return wait_for


# --- the cast ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _version_bodies_forgotten() -> None:
    """The version bodies a process knows to be stored (checkpoints.versions) outlive a test's
    database, which a transactional test empties: each test starts knowing none."""
    from checkpoints import versions

    versions.version_bodies_forget()


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings) -> None:
    """The cast is created, and logs in, per test: the production hasher would dominate."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def roles(db):
    from harness_base.roles import roles_ensure

    return roles_ensure()


@pytest.fixture
def commands_allowed(db):
    """An explicit admin allow rule for run_command (otherwise every command waits for review)."""
    from review.models import ReviewRule

    return ReviewRule.objects.create(name="trust-commands", tool="run_command", action="allow")


@pytest.fixture
def harness_dirs(settings, tmp_path: Path) -> Path:
    """This test's workspaces and external ledger under tmp_path, test tools on (directories
    use it in their autouse setup)."""
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"
    settings.HARNESS_LEDGER_DIR = tmp_path / "ledger"
    settings.HARNESS_ENABLE_TEST_TOOLS = True
    return tmp_path


@pytest.fixture
def harness_yaml(settings, tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """harness_yaml(text) -> its path: use this harness.yaml for the rest of the test (worker
    processes read it when their environment names it: HARNESS_CONFIG)."""

    def use(text: str) -> Path:
        path = tmp_path / "harness.yaml"
        path.write_text(text)
        settings.HARNESS_CONFIG_FILE = path
        harness_config.cache_clear()
        return path

    yield use
    harness_config.cache_clear()


@pytest.fixture
def quiet_watchdog(settings) -> None:
    """No heartbeat during the test: in-process runs live inside the test's transaction, which
    the watchdog's own connection cannot see."""
    settings.HARNESS_HEARTBEAT_S = 3600


@pytest.fixture
def operator(roles):
    """May decide reviews, cancel, retry and roll back."""
    return UserFactory(username="operator", roles=["operators"])


@pytest.fixture
def second_operator(roles):
    """Another operator, for four-eyes rules."""
    return UserFactory(username="operator2", roles=["operators"])


@pytest.fixture
def creator(roles):
    """May create tasks (and read); may not operate or decide."""
    return UserFactory(username="creator", roles=["creators"])


@pytest.fixture
def viewer(roles):
    """May read everything, change nothing."""
    return UserFactory(username="viewer", roles=["viewers"])


@pytest.fixture
def decider(db):
    """In no group, but holding the `review.decide_review` permission."""
    return UserFactory(username="decider", permissions=["decide_review"])


@pytest.fixture
def outsider(db):
    """Logged in, but in no group."""
    return UserFactory(username="outsider")


@pytest.fixture
def admin_user(db):
    """A superuser (replaces pytest-django's fixture of the same name)."""
    return UserFactory(username="admin", is_superuser=True)


def delete_script(path: str = "old.log") -> list[dict]:
    return [{"call": "delete_file", "args": {"path": path}}, {"final": "done"}]


@pytest.fixture
def paused_review(db) -> Callable[..., Any]:
    """paused_review(script, tools, files, user=, ...) -> the pending review of a task whose
    loop ran in-process until the policy paused it (default: delete_file on old.log)."""

    def make(
        script: list[dict] | None = None,
        tools: list[str] | None = None,
        files: dict[str, str] | None = None,
        *,
        user=None,
        **extra: Any,
    ):
        task = scripted_task(
            script or delete_script(),
            tools or ["delete_file"],
            user=user,
            workspace={"files": files or {"old.log": "stale\n"}},
            **extra,
        )
        assert run_in_process(task) == "paused"
        return ReviewRequest.objects.get(task=task, status="pending")

    return make


def approve(review, user, **extra: Any):
    """Approve `review` as `user` through the review service, naming the hash of the arguments
    the review shows right now (`extra`: edited arguments, a comment)."""
    shown = ReviewRequest.objects.get(pk=review.pk).arguments
    return review_decide(
        review_id=review.id,
        user=user,
        decision="approve",
        arguments_hash=canonical_hash(shown),
        **extra,
    )


def page_client(user) -> Client:
    """A test client logged in as `user` (anonymous for None)."""
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def as_user(db) -> Callable[[Any], Client]:
    """`as_user(operator)` -> a test client logged in as that user (None: anonymous)."""
    return page_client


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

    def decide(self, review_id: Any, **body: Any):
        """POST a decision; an approval without an explicit `arguments_hash` sends the one the
        review shows right now (what a client that just read it would send)."""
        if body.get("decision") == "approve" and "arguments_hash" not in body:
            shown = self.get(f"/api/v1/reviews/{review_id}")
            if shown.status_code == 200:
                body["arguments_hash"] = shown.json()["arguments_hash"]
        return self.post(f"/api/v1/reviews/{review_id}/decision", body)


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


def unique_sleep() -> str:
    """A long `sleep` whose command line no other process has, to find it from outside
    (`processes_running`)."""
    return f"sleep 3{uuid.uuid4().int % 10**6:06d}"


def child_pids(pid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if parent_pid(int(p.name)) == pid]


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage_spawn(
    command: list[str], *, log: Path, env: dict[str, str], module: str = "", prefix: Any = ()
) -> Any:
    """`manage.py <command>` in a session of its own (bench.common.spawn), forked from this
    test process's warm server where its environment allows (tests/zygote.py): the same
    process without its seconds of imports. A subprocess.Popen or a ZygoteProcess. A module
    or a prefix command (bench.common.spawn's) is always started afresh.

    A manage.py command skips Django's system checks: they took 0.7 of the 2 CPU-seconds a
    forked worker needed to register, paid by every worker and sweeper of the suite (hundreds),
    while the suite runs them itself (tests/security/test_deploy.py)."""
    if not module:
        command = [command[0], "--skip-checks", *command[1:]]
    server = None if module or prefix else zygote(env)
    if server is not None and server.fits(env):
        return server.spawn(command, log=log, env=env)
    return spawn(command, log=log, env=env, module=module, prefix=prefix)


@pytest.fixture
def bench_processes_forked(monkeypatch) -> None:
    """The rqworkers and sweepers a benchmark starts (bench.common.spawn: RqWorker, the
    recovery benchmark's sweeper) forked as the worker pool's are (manage_spawn), instead of
    each importing Django, RQ and the agent SDKs afresh: a benchmark at smoke size starts
    several. They run the benchmark's code as before: only how the process begins differs."""
    import bench.common
    import bench.common.processes

    monkeypatch.setattr(bench.common.processes, "spawn", manage_spawn)
    monkeypatch.setattr(bench.common, "spawn", manage_spawn)


def scheduler_kill(worker_pid: int) -> None:
    """End the RQ scheduler a stopping worker runs (its child in its process group: horses,
    standby or running, have groups of their own) at once. The scheduler looks for its stop
    only between runs, a second apart (RQScheduler's interval), and the worker waits for it:
    a pool's stop took 0.3-1.7 s instead of the 0.05 s a worker without it takes, on every
    test with workers. What it holds (its locks, the scheduled jobs) is in this test's Redis
    database, which the next test flushes."""
    for pid in child_pids(worker_pid):
        try:
            if os.getpgid(pid) == worker_pid:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class WorkerPool:
    """Real `manage.py rqworker resume high default low --with-scheduler` processes, each in its own
    process group (so stopping one also stops its forked work horse and scheduler)."""

    def __init__(self, *, log_dir: Path) -> None:
        import redis

        self.log_dir = log_dir
        self.redis_url = django_settings.REDIS_URL
        self.redis = redis.Redis.from_url(self.redis_url)
        self.processes: list[Any] = []  # subprocess.Popen or tests.zygote.ZygoteProcess
        self.env = worker_environment(
            database_url=database_url_for_subprocess(),
            redis_url=self.redis_url,
            HARNESS_WORKSPACE_ROOT=str(django_settings.HARNESS_WORKSPACE_ROOT),
            HARNESS_LEDGER_DIR=str(django_settings.HARNESS_LEDGER_DIR),
            HARNESS_ENABLE_TEST_TOOLS="1" if django_settings.HARNESS_ENABLE_TEST_TOOLS else "0",
            # Most tests run the harness's own loop: a worker does not load the agent SDKs
            # (seconds each) before it registers; a graph or SDK task's job imports its runner.
            # `./harness up` (tests/test_cli_up.py) runs the default, preloading them.
            HARNESS_WORKER_PRELOAD=os.environ.get("HARNESS_WORKER_PRELOAD", "none"),
        )

    def registered_pids(self) -> set[int]:
        from rq import Worker

        return {worker.pid for worker in Worker.all(connection=self.redis)}

    def start(self, count: int = 1, *, timeout: float = 60.0) -> list[Any]:
        """Start `count` workers and wait until each has registered with Redis."""
        started = []
        for _ in range(count):
            process = manage_spawn(
                ["rqworker", *WORKER_QUEUES, "--with-scheduler"],
                log=self.log_dir / f"worker-{len(self.processes) + 1}.log",
                env=self.env,
            )
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
                scheduler_kill(process.pid)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.poll() is None for p in self.processes):
            time.sleep(0.05)
        for process in self.processes:
            if process.poll() is None:
                self.kill(process)
            else:
                # A work horse whose worker already exited keeps the worker's pid as its group
                # (only this process's: the pid may be another's by now).
                group_kill_ours(process.pid)
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
# `pytestmark = BROWSER` (or `[*BROWSER, pytest.mark.integration]` with real workers): the
# live server's requests commit, so these tests are transactional.
BROWSER = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]


@pytest.fixture(scope="session")
def _chromium() -> Iterator[SharedChromium]:
    shared = SharedChromium(executable=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def browser(_chromium: SharedChromium, monkeypatch):
    """Debian's Chromium driven by Playwright (never a downloaded browser): this test process's
    one browser (tests/chromium.py), whose contexts the test opens are closed when it ends."""
    # Playwright's sync API keeps an event loop on this thread; the ORM calls the test makes
    # between browser steps are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    try:
        yield _chromium.take()
    finally:
        try:
            # ORM calls made while Playwright's loop runs get their own connection (Django's
            # connections are context-local): close it while the loop still counts as
            # running, or the test database cannot be dropped.
            connections.close_all()
        finally:
            _chromium.give_back()


@pytest.fixture(scope="session")
def live_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """pytest-django's live server, serving static files as production does: WhiteNoise (in the
    middleware) from the collected files under their hashed names, compressed. pytest-django's
    own static handler would look the hashed names up in the finders and answer 404."""
    address = (
        request.config.getvalue("liveserver")
        or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS")
        or "localhost"
    )
    server = LiveServer(address, start=False)
    server.thread.static_handler = lambda handler: handler
    server.thread.server_class = NoDelayWSGIServer
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def open_page(browser, live_server) -> Callable[..., Any]:
    """open_page(user, path) -> a Chromium page on `path` of the live server, logged in as
    `user` through the login form the anonymous visit is sent to. `timeout_ms` leaves room for
    a loaded machine; `init_script` runs in every document of the page (e.g. a recorder);
    other keywords are Playwright context options (`java_script_enabled=False`)."""

    def open_(
        user,
        path: str = "/",
        *,
        timeout_ms: float = 20_000,
        init_script: str = "",
        **context: Any,
    ):
        page = browser.new_page(**context)
        page.set_default_timeout(timeout_ms)
        if init_script:
            page.add_init_script(init_script)
        page.goto(f"{live_server.url}{path}")
        assert "/accounts/login/" in page.url, page.url
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}{path}")
        return page

    return open_
