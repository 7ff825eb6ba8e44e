"""Fixtures for the review tests: the user cast, API clients with bearer tokens, paused tasks
and real `rqworker` subprocesses.

The project-wide versions of the cast and of `workers` belong in tests/conftest.py; until they
land there, these are the review tests' own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from review.models import ReviewRequest
from tasks.models import Task
from tasks.runtime import task_run
from tasks.services import api_token_create, task_create, task_transition
from tasks.spec import TaskSpec

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.05,
             what: str = "condition") -> Any:
    """Poll until `predicate()` is truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --- directories shared with worker subprocesses ----------------------------------------------


@pytest.fixture(scope="session")
def harness_dirs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("harness")
    return {"workspaces": base / "ws", "ledger": base / "ledger"}


@pytest.fixture(autouse=True)
def _harness_settings(settings, harness_dirs) -> None:
    settings.HARNESS_WORKSPACE_ROOT = harness_dirs["workspaces"]
    settings.HARNESS_LEDGER_DIR = harness_dirs["ledger"]
    settings.HARNESS_ENABLE_TEST_TOOLS = True
    # The cast logs in with passwords; a slow hasher would dominate the test time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# --- the cast ------------------------------------------------------------------------------


def _user(username: str, *groups: str, **extra: Any) -> User:
    user = User.objects.create_user(username=username, password="pw-" + username, **extra)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def operator(db) -> User:
    return _user("olivia", "operators")


@pytest.fixture
def second_operator(db) -> User:
    return _user("oscar", "operators")


@pytest.fixture
def viewer(db) -> User:
    return _user("vera", "viewers")


@pytest.fixture
def outsider(db) -> User:
    return _user("otto")


@pytest.fixture
def decider(db) -> User:
    """Not in `operators`, but holds the review.decide_review permission."""
    user = _user("dana")
    user.user_permissions.add(Permission.objects.get(codename="decide_review"))
    return user


@pytest.fixture
def api_client(db) -> Callable[[User | None], Client]:
    """api_client(user) -> a test client sending that user's bearer token (None: anonymous)."""

    def make(user: User | None) -> Client:
        if user is None:
            return Client()
        return Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user)}")

    return make


# --- tasks that pause for review ------------------------------------------------------------


def make_task(script: list[dict], tools: list[str], *, user: User | None = None,
              enqueue: bool = False, **extra: Any) -> Task:
    spec = TaskSpec.model_validate({
        "title": extra.pop("title", "review test"), "goal": "tidy the workspace",
        "model": {"kind": "scripted", "script": script}, "tools": tools, **extra,
    })
    return task_create(spec=spec, user=user, enqueue=enqueue)


def delete_script(path: str = "old.log") -> list[dict]:
    return [{"call": "delete_file", "args": {"path": path}}, {"final": "done"}]


def run_in_process(task: Task) -> str:
    """Run the loop here (no worker) from a queued task."""
    return task_run(task_id=task.id)


@pytest.fixture
def paused_review(db) -> Callable[..., ReviewRequest]:
    """paused_review(user=..., script=..., tools=..., files=...) -> the pending review of a task
    whose loop ran in-process until the policy paused it."""

    def make(*, user: User | None = None, script: list[dict] | None = None,
             tools: list[str] | None = None, files: dict[str, str] | None = None,
             **extra: Any) -> ReviewRequest:
        task = make_task(script or delete_script(), tools or ["delete_file"], user=user,
                         workspace={"files": files or {"old.log": "stale\n"}}, **extra)
        task_transition(task_id=task.id, to="queued")
        assert run_in_process(task) == "paused"
        return ReviewRequest.objects.get(task=task, status="pending")

    return make


# --- real workers --------------------------------------------------------------------------


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    auth = quote(s["USER"] or "")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"])
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{s['NAME']}"


class Workers:
    def __init__(self, env: dict[str, str], count: int) -> None:
        self.env = env
        self.count = count
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        import django_rq
        from rq import Worker

        conn = django_rq.get_connection("default")
        conn.flushdb()
        for n in range(self.count):
            log = open(Path(self.env["HARNESS_WORKSPACE_ROOT"]).parent / f"worker-{n}.log", "ab")
            self.procs.append(subprocess.Popen(
                [sys.executable, "manage.py", "rqworker", *django_settings.HARNESS_QUEUES,
                 "--name", f"review-test-{os.getpid()}-{n}"],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            ))
        wait_for(lambda: len(Worker.all(connection=conn)) >= self.count, timeout=60,
                 what=f"{self.count} rq workers to register")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="session")
def workers(django_db_setup, django_db_blocker, harness_dirs) -> Iterator[Workers]:
    """Two `manage.py rqworker` subprocesses on the test database and this test's Redis DB."""
    harness_dirs["workspaces"].mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": django_settings.REDIS_URL,
        "HARNESS_WORKSPACE_ROOT": str(harness_dirs["workspaces"]),
        "HARNESS_LEDGER_DIR": str(harness_dirs["ledger"]),
        "HARNESS_ENABLE_TEST_TOOLS": "1",
        "HARNESS_HEARTBEAT_S": "1",
    }
    pool = Workers(env, count=2)
    with django_db_blocker.unblock():
        pool.start()
    try:
        yield pool
    finally:
        pool.stop()
