"""`harness test`: lint, make sure the services exist, collect static files, run pytest (four
xdist processes unless told otherwise: on two cores, since many tests wait rather than compute)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from harness_site.cli.bootstrap import (
    chromium_ensure,
    npm_test_packages_ensure,
    postgres_ensure,
    prometheus_ensure,
    redis_ensure,
)
from harness_site.cli.common import ROOT, CliError, child_env, manage, say, static_collecting

DEFAULT_TEST_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/harness"
DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/1"
# More than the two cores of CI: many tests wait on workers, subprocesses and a browser. With
# two processes the CPUs sat 45-70 % idle through the second half of the suite, with three 17 %
# idle on average; four took a fresh clone's pytest from 981 to 909 s (10 % idle).
DEFAULT_TEST_PROCESSES = "4"


def _wants_own_processes(pytest_args: Sequence[str]) -> bool:
    return any(
        a in ("-n", "--numprocesses", "--dist")
        or a.startswith(("-n", "--numprocesses"))
        or a == "no:xdist"
        for a in pytest_args
    )


def mypy_cache_dir() -> Path:
    """Where `harness test` keeps mypy's cache: outside the checkout (HARNESS_MYPY_CACHE_DIR,
    else ~/.cache/agent-harness/mypy), so that a fresh clone's first run re-checks only what
    differs from the last one on this machine (mypy trusts a cached module whose source hash
    matches, wherever the checkout lies) instead of the whole tree cold."""
    configured = os.environ.get("HARNESS_MYPY_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "agent-harness" / "mypy"


def _say_failed(argv: Sequence[str], code: int) -> None:
    say(f"{Path(argv[0]).name} failed (exit {code}): fix it before the tests run")


class Lint:
    """The checks CI runs before any test: style, formatting and the layer contracts, while mypy
    (configured in pyproject.toml, its cache at mypy_cache_dir()) checks the types in the
    background, its output held until it ends, as the test run is prepared (services, npm
    packages, static files): the types are still checked before any test runs, without the
    run waiting for them alone."""

    def __init__(self) -> None:
        self.argv = [
            str(Path(sys.executable).parent / "mypy"),
            "--cache-dir",
            str(mypy_cache_dir()),
        ]
        say(" ".join([Path(self.argv[0]).name, *self.argv[1:]]) + " (in the background)")
        self.process = subprocess.Popen(
            self.argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def quick_checks(self) -> int:
        bin_dir = Path(sys.executable).parent
        for argv in (
            [str(bin_dir / "ruff"), "check", "."],
            [str(bin_dir / "ruff"), "format", "--check", "."],
            [str(bin_dir / "lint-imports")],
        ):
            say(" ".join([Path(argv[0]).name, *argv[1:]]))
            code = subprocess.run(argv, cwd=ROOT, check=False).returncode
            if code:
                _say_failed(argv, code)
                return code
        return 0

    def wait(self) -> int:
        output, _ = self.process.communicate()
        say("mypy: " + (output.strip().splitlines() or [""])[-1])
        if self.process.returncode:
            print(output, end="", flush=True)
            _say_failed(self.argv, self.process.returncode)
        return self.process.returncode

    def abandon(self, code: int) -> int:
        self.process.kill()
        self.process.wait()
        return code


def cmd_test(pytest_args: list[str]) -> int:
    checking = Lint() if os.environ.get("HARNESS_SKIP_LINT") != "1" else None
    if checking is not None:
        code = checking.quick_checks()
        if code:
            return checking.abandon(code)
    try:
        return _prepared_test_run(pytest_args, checking)
    finally:
        if checking is not None and checking.process.poll() is None:
            checking.abandon(1)


def _prepared_test_run(pytest_args: list[str], checking: Lint | None) -> int:
    database_url = os.environ.get("TEST_DATABASE_URL", DEFAULT_TEST_DATABASE_URL)
    redis_url = os.environ.get("TEST_REDIS_URL", DEFAULT_TEST_REDIS_URL)
    if urlsplit(database_url).scheme.startswith("postgres"):
        postgres_ensure(database_url)
    redis_ensure(redis_url)
    chromium_ensure()
    prometheus_ensure()
    npm_test_packages_ensure()

    processes = os.environ.get("HARNESS_TEST_PROCESSES", DEFAULT_TEST_PROCESSES)
    xdist = (
        []
        if _wants_own_processes(pytest_args) or processes in ("", "0", "1")
        # loadgroup hands the tests out one at a time in the order tests/conftest.py sorts
        # them (longest first), where `load` deals the first quarter round-robin up front, by
        # count rather than by length; the short chaos suite is a group of its own.
        else ["-n", processes, "--dist", "loadgroup"]
    )
    with tempfile.TemporaryDirectory(prefix="harness-test-") as tmp:
        # The pages under test link the collected (hashed, compressed) files, as in production;
        # kept in the checkout, so a run compresses only what changed since the last.
        static_root = Path(os.environ.get("HARNESS_STATIC_ROOT", ROOT / ".data" / "staticfiles"))
        (Path(tmp) / "data").mkdir()
        env = child_env(
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            HARNESS_ENABLE_TEST_TOOLS="1",
            HARNESS_DATA_DIR=str(Path(tmp) / "data"),
            HARNESS_STATIC_ROOT=str(static_root),
            HARNESS_WORKSPACE_ROOT=str(Path(tmp) / "workspaces"),
            HARNESS_LEDGER_DIR=str(Path(tmp) / "ledger"),
            # pytest-django wraps a test in a transaction that may sit idle while the test
            # waits on something; the tests that need the server's limit set it themselves.
            HARNESS_DB_IDLE_IN_TRANSACTION_S=os.environ.get(
                "HARNESS_DB_IDLE_IN_TRANSACTION_S", "0"
            ),
        )
        # The suite starts hundreds of Python processes (rqworkers, `manage.py`, benchmarks,
        # the fuzzer, the chaos suite's hosts): with PYTHONDONTWRITEBYTECODE set (some shells
        # and images set it) each compiled Django, the SDKs and the harness from source again,
        # and pytest rewrote every test module in each of its processes. The tests write the
        # bytecode caches, as Python does by default (-20 % CPU on a worker-heavy sample).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with static_collecting(static_root):
            collect = manage("collectstatic", "--noinput", "-v0")
            collected = subprocess.run(collect, cwd=ROOT, env=env, check=False)
        if collected.returncode:
            raise CliError(f"collectstatic failed (exit {collected.returncode}); see above")
        if checking is not None:
            code = checking.wait()
            if code:
                return code
        # The slowest tests are listed at the end of every run: where the suite's time goes.
        durations = [] if pytest_args else ["--durations=30", "--durations-min=5"]
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *xdist,
            *durations,
            *pytest_args,
        ]
        say(f"DATABASE_URL={database_url} REDIS_URL={redis_url}")
        say(" ".join(argv[1:]))
        process = subprocess.Popen(argv, cwd=ROOT, env=env)
        # pytest shares our terminal's process group and gets Ctrl-C itself; we just wait.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        code = process.wait()
    if code == 5:
        say("pytest collected no tests: that is a failure, not a pass")
        return 5
    return code
