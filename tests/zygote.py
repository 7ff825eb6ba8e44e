"""A fork server for the tests' rqworkers: one Python process per test process that has
imported the third-party packages a worker and its jobs load (Django, rq, psycopg, pydantic,
the MCP client, the agent SDKs, …) and forks a worker from that warm state on request. A
worker started this way is still a real `manage.py rqworker` process, in its own session, on
the environment the test gave it; it skips only the seconds of imports every start repeated
(and an SDK task's job no longer imports its SDK in each work horse).

Nothing here touches Django's settings or the harness's code before the fork: the child reads
its settings from the environment it is given, as a fresh process would. A start whose
environment differs from the server's in anything but the harness's own variables (which no
preloaded package reads at import) is not forked: the caller spawns a fresh process instead.

Run as `python -m tests.zygote` (by `zygote()`), it answers one JSON line per request on its
standard input and output: {"op": "spawn", argv, env, cwd, log} -> {"pid"};
{"op": "poll", pid} -> {"code": exit code or null}."""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# What a worker, a work horse and an agent SDK's job import, none of which reads the settings
# or the environment at import time.
PRELOAD = (
    "django.db.models",
    "django.core.management",
    "django.http",
    "django.template",
    "django.views",
    "rq",
    "rq.cron",  # croniter, through django_rq's admin
    "redis",
    "psycopg",
    "pydantic",
    "yaml",
    "httpx",
    "httpcore",
    "dateutil.parser",
    "jsonschema",
    "cryptography",
    "prometheus_client",
    "opentelemetry.trace",
    "opentelemetry.sdk.trace",
    "slack_sdk.web",
    "mcp",
    "mcp.client.session",
    "mcp.client.streamable_http",
    "mcp.types",
    "langchain_core.runnables",
    "langgraph.graph",
    "langgraph.checkpoint.base",
    "pydantic_ai",
    "agents",
)

# The variables a forked worker may have that the server does not (or with other values):
# the harness's own and the test's, read by the harness after the fork, never at import.
OWN_PREFIXES = ("HARNESS_", "TEST_", "PYTEST_CURRENT_TEST")
OWN_KEYS = frozenset({"DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"})


def _own(key: str) -> bool:
    return key in OWN_KEYS or key.startswith(OWN_PREFIXES)


# --- the server ---------------------------------------------------------------------------------


def _child(argv: list[str], env: dict[str, str], cwd: str, log: str, started: int) -> None:
    """In the forked child: become `python <argv>` in a session of its own (said on the pipe
    `started` once it leads it); never returns."""
    code = 1
    try:
        # The server never changes a signal's handling: the child keeps what a fresh Python
        # starts with (SIGPIPE ignored, so a write to a closed pipe raises BrokenPipeError
        # instead of killing the worker's work horse, as it did when this reset SIGPIPE).
        os.setsid()
        os.write(started, b".")
        os.close(started)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own descriptors
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        sys.path[0] = str(Path(argv[0]).resolve().parent)
        import runpy

        try:
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            if isinstance(exit_.code, str):
                print(exit_.code, file=sys.stderr)
        atexit._run_exitfuncs()
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # not installed here: the worker imports it itself, if it needs it
            pass
    # The preloaded objects move to the permanent generation: a child's collections no longer
    # walk them (each full one did, ~0.1 s of a worker's start-up) nor write to their pages.
    gc.collect()
    gc.freeze()
    exits: dict[int, int] = {}
    out = sys.stdout
    # A fork copies only the forking thread: with another thread alive (holding a lock), the
    # child could hang. The client then spawns fresh processes instead.
    out.write(json.dumps({"ready": threading.active_count() == 1}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        while True:  # reap every child that ended, keeping its code for `poll`
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            exits[pid] = os.waitstatus_to_exitcode(status)
        if request["op"] == "spawn":
            # Answered once the child leads its own session and process group, as a Popen
            # with start_new_session is by the time it returns: a killpg of its pid at once
            # must reach it.
            started, told = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(started)
                _child(request["argv"], request["env"], request["cwd"], request["log"], told)
            os.close(told)
            os.read(started, 1)
            os.close(started)
            # A pid is reused within minutes (pid_max 32768): an earlier child's code is not
            # this one's.
            exits.pop(pid, None)
            reply: dict[str, Any] = {"pid": pid}
        else:
            reply = {"code": exits.get(request["pid"])}
        out.write(json.dumps(reply) + "\n")
        out.flush()


# --- the client (in the test process) -----------------------------------------------------------


class ZygoteProcess:
    """A forked worker as the tests use a subprocess.Popen: pid, poll, wait, signals."""

    def __init__(self, server: Zygote, pid: int, args: list[str]) -> None:
        self.server = server
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.call({"op": "poll", "pid": self.pid})["code"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The client's end of one server process (started by `zygote()`)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote"],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        hello = self.process.stdout.readline()
        self.ready = bool(hello) and json.loads(hello).get("ready", False)

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            return json.loads(self.process.stdout.readline())

    def fits(self, env: Mapping[str, str]) -> bool:
        """Whether a process on `env` may be forked from this server's state."""
        keys = {k for k in (*env, *self.env) if not _own(k)}
        return all(env.get(k) == self.env.get(k) for k in keys)

    def spawn(self, command: list[str], *, log: Path, env: Mapping[str, str]) -> ZygoteProcess:
        """`manage.py <command>`, forked (the caller checked `fits(env)`)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [str(ROOT / "manage.py"), *command]
        reply = self.call(
            {"op": "spawn", "argv": argv, "env": dict(env), "cwd": str(ROOT), "log": str(log)}
        )
        return ZygoteProcess(self, reply["pid"], [sys.executable, *argv])

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


_server: Zygote | None = None


def zygote(env: Mapping[str, str]) -> Zygote | None:
    """This test process's server (started on first use, with `env`), or None where forking
    is switched off (HARNESS_TEST_ZYGOTE=0) or unsafe."""
    global _server
    if os.environ.get("HARNESS_TEST_ZYGOTE", "1") == "0":
        return None
    if _server is None:
        _server = Zygote(env)
        atexit.register(_server.close)
    return _server if _server.ready and _server.process.poll() is None else None


def server_pid() -> int | None:
    """The server's pid (not a stray, though a harness process started during a test)."""
    return _server.process.pid if _server is not None else None


if __name__ == "__main__":
    serve()
