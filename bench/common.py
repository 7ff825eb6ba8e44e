"""Shared pieces of the benchmarks: Django set-up, timing, statistics, result files and the
results table. The convention every `bench/<name>.py` follows is in bench/README.md."""

from __future__ import annotations

import cProfile
import json
import math
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness_base.queues import WORKER_QUEUES

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
RESULTS_MD = BENCH_DIR / "results.md"
SIZES = ("smoke", "full")


class BenchError(RuntimeError):
    """A benchmark cannot run here (wrong database, missing service): the message says why."""


# --- set-up ---------------------------------------------------------------------------------


def setup_django() -> None:
    """Configure Django for a benchmark process (the test suite has already done this)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
    os.environ.setdefault("HARNESS_ENABLE_TEST_TOOLS", "1")
    import django

    django.setup()
    require_postgresql()


def require_postgresql() -> None:
    from django.db import OperationalError, connection

    if connection.vendor == "postgresql":
        try:
            connection.ensure_connection()
        except OperationalError as exc:
            reason = str(exc).strip().splitlines()[-1]
            raise BenchError(
                f"cannot connect to DATABASE_URL's database ({reason}); create a scratch "
                "database for the benchmarks, e.g. `createdb harness_bench`"
            ) from None
    if connection.vendor != "postgresql":
        raise BenchError(
            "the benchmarks compare against LangGraph's PostgresSaver and raw psycopg on the "
            "same server: set DATABASE_URL to a PostgreSQL database "
            "(e.g. postgres://postgres@127.0.0.1:5432/harness_bench)"
        )


def pg_conninfo(**extra: str) -> str:
    """A libpq connection string for the database Django uses (the test database inside
    pytest), so raw psycopg and LangGraph write to the very same PostgreSQL."""
    from django.db import connection
    from psycopg.conninfo import make_conninfo

    s = connection.settings_dict
    params = {
        "dbname": s["NAME"],
        "user": s.get("USER"),
        "password": s.get("PASSWORD"),
        "host": s.get("HOST"),
        "port": str(s.get("PORT") or ""),
    }
    return make_conninfo(**{k: v for k, v in params.items() if v}, **extra)


def database_url() -> str:
    """DATABASE_URL for subprocesses (workers) that must use the same database."""
    from django.db import connection

    s = connection.settings_dict
    auth = s.get("USER") or ""
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    return f"postgres://{auth}{'@' if auth else ''}{host}:{port}/{s['NAME']}"


# --- timing and statistics ------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of `fn` takes (perf_counter)."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def sample_interleaved(
    contenders: Mapping[str, Callable[[], Any]], *, n: int, warmup: int = 0
) -> dict[str, list[float]]:
    """`n` timed calls of each contender, round-robin with the order rotated every round, so a
    slow moment of the disk or the scheduler falls on every contender alike."""
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(warmup + n):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            elapsed = timed(contenders[name])
            if i >= warmup:
                samples[name].append(elapsed)
    return samples


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def stats(values: Iterable[float], *, scale: float = 1.0) -> dict[str, float]:
    """{median, p95, n} of the samples, each multiplied by `scale` (e.g. 1000 for s -> ms)."""
    values = list(values)
    return {
        "median": statistics.median(values) * scale,
        "p95": percentile(values, 95) * scale,
        "n": len(values),
    }


def rate_stats(seconds: Iterable[float], *, count: float) -> dict[str, float]:
    """Throughput ({median, p95, n} of count/second). For a rate, `p95` is the rate of the
    95th-percentile (slow) run, so it is the lower figure."""
    seconds = list(seconds)
    return {
        "median": count / statistics.median(seconds),
        "p95": count / percentile(seconds, 95),
        "n": len(seconds),
    }


def figure(
    *,
    figure: str,
    unit: str,
    ours: Mapping[str, float],
    reference: Mapping[str, float] | None = None,
    reference_label: str = "",
    target: str = "",
    met: bool | None = None,
    note: str = "",
) -> dict[str, Any]:
    """One row of the results table. `ratio` is always ours ÷ reference (medians); whether
    higher or lower is better is said by the target."""
    ratio = None
    if reference is not None and reference.get("median"):
        ratio = ours["median"] / reference["median"]
    return {
        "figure": figure,
        "unit": unit,
        "ours": dict(ours),
        "reference": dict(reference) if reference is not None else None,
        "reference_label": reference_label,
        "ratio": ratio,
        "target": target,
        "met": met,
        "note": note,
    }


# --- profiles -------------------------------------------------------------------------------


def profile_top(fn: Callable[[], Any], *, limit: int = 15, repeat: int = 1) -> list[dict]:
    """cProfile `fn` (called `repeat` times): the entries with the most own time, which is
    where a missed target's time goes (socket waits show up as psycopg's wait functions)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        fn()
    profiler.disable()
    raw = pstats.Stats(profiler).stats  # {(file, line, func): (cc, nc, tottime, cumtime, callers)}
    total = sum(entry[2] for entry in raw.values()) or 1.0
    rows = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:limit]
    out = []
    for (path, line, func), (_cc, calls, tottime, cumtime, _callers) in rows:
        where = func if path == "~" else f"{_short_path(path)}:{line}({func})"
        out.append(
            {
                "function": where,
                "calls_per_run": calls / repeat,
                "own_ms_per_run": tottime * 1000 / repeat,
                "cum_ms_per_run": cumtime * 1000 / repeat,
                "own_share": tottime / total,
            }
        )
    return out


def _short_path(path: str) -> str:
    for marker in ("site-packages/", str(BENCH_DIR.parent) + "/", "lib/python"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


# --- results ---------------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
        cursor.execute("SELECT current_setting('synchronous_commit'), current_setting('fsync')")
        synchronous_commit, fsync = cursor.fetchone()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "postgresql": pg_version,
        "postgresql_synchronous_commit": synchronous_commit,
        "postgresql_fsync": fsync,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "git_commit": _git_commit(),
        "git_dirty": bool(_dirty_or_unknown()),
        "versions": _versions(),
    }


# Paths a run itself writes: they do not make the tree dirty for the next run.
_RESULT_PATHS = ("bench/results/", "bench/results.md")


def git_dirty() -> list[str]:
    """Paths with uncommitted changes (besides the result files), or [] for a clean tree."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=BENCH_DIR.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise BenchError(f"cannot tell whether the tree is clean: {exc}") from None
    paths = [line[3:] for line in out.stdout.splitlines()]
    return [p for p in paths if not p.startswith(_RESULT_PATHS)]


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=BENCH_DIR,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _dirty_or_unknown() -> list[str]:
    try:
        return git_dirty()
    except BenchError:
        return ["?"]


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in (
        "django",
        "psycopg",
        "pydantic",
        "langgraph",
        "langgraph-checkpoint-postgres",
        "langchain-core",
        "rq",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def result_write(
    *, name: str, size: str, result: Mapping[str, Any], results_dir: Path = RESULTS_DIR
) -> Path:
    """Write bench/results/<name>.json: the script's result plus name, size and environment."""
    results_dir.mkdir(parents=True, exist_ok=True)
    document = {"name": name, "size": size, "environment": environment(), **result}
    path = results_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)
    return path


def results_load(results_dir: Path = RESULTS_DIR) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(results_dir.glob("*.json"))]


# --- harness fixtures -----------------------------------------------------------------------


def scripted_task(
    *,
    script: list[dict[str, Any]],
    tools: list[str],
    title: str = "bench",
    max_steps: int | None = None,
    queue: bool = True,
) -> Any:
    """A task with a scripted model, created (and queued, without enqueueing a job) through
    the real services."""
    from tasks.services import task_create, task_transition
    from tasks.spec import TaskSpec

    spec = TaskSpec.model_validate(
        {
            "title": title,
            "goal": "benchmark",
            "tools": tools,
            "model": {"kind": "scripted", "script": script},
            "budget": {"max_steps": max_steps or len(script) + 1},
        }
    )
    task = task_create(spec=spec, user=None, enqueue=False)
    if queue:
        task_transition(task_id=task.id, to="queued", reason="bench")
    return task


def tasks_delete(task_ids: Iterable[Any]) -> None:
    """Remove the benchmark's tasks (their checkpoints, events and tool calls cascade)."""
    from tasks.models import Task

    Task.objects.filter(id__in=list(task_ids)).update(head_checkpoint=None)
    Task.objects.filter(id__in=list(task_ids)).delete()


def reference_schema() -> str:
    """The schema holding the reference implementations' tables (LangGraph, the raw-INSERT
    floor) in the same database; created empty for a run and dropped after it."""
    return "bench_reference"


def reference_conninfo() -> str:
    return pg_conninfo(options=f"-c search_path={reference_schema()}")


def reference_schema_reset(*, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {reference_schema()} CASCADE")
        if not drop_only:
            conn.execute(f"CREATE SCHEMA {reference_schema()}")


def wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float = 60.0,
    interval: float = 0.005,
    what: str = "a condition",
    error: type[Exception] = BenchError,
) -> Any:
    """Poll `predicate` until it returns something truthy (and return it); raise `error` once
    `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise error(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


REPO_ROOT = BENCH_DIR.parent
# The queues every worker serves, in order (harness_base/queues.py, settings.HARNESS_QUEUES).
QUEUES = WORKER_QUEUES


def worker_environment(*, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a worker (or sweeper) subprocess of this checkout: this process's
    environment, the settings module and the repository on the path, the given database and
    Redis, plus `extra`."""
    return dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="harness_site.settings",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        **extra,
    )


def spawn(
    command: list[str],
    *,
    log: Path,
    env: Mapping[str, str],
    module: str = "",
    prefix: Sequence[str] = (),
) -> subprocess.Popen:
    """Start `manage.py <command>` (or `python -m <module> <command>`) from the repository
    root in a process group of its own, its output appended to `log`; `prefix` is a command
    that runs it (e.g. `nsenter ...`: bench/hosts.py)."""
    program = ["-m", module] if module else [str(REPO_ROOT / "manage.py")]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        return subprocess.Popen(
            [*prefix, sys.executable, *program, *command],
            cwd=REPO_ROOT,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class RqWorker:
    """One real `manage.py rqworker` subprocess on this process's database, Redis, workspace
    and ledger directories (plus `env`); a context manager that stops it (and its work horse)
    on exit."""

    def __init__(self, *, log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.log_path = log_path
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> RqWorker:
        from django.conf import settings

        env = worker_environment(
            database_url=database_url(),
            redis_url=settings.REDIS_URL,
            HARNESS_WORKSPACE_ROOT=str(settings.HARNESS_WORKSPACE_ROOT),
            HARNESS_LEDGER_DIR=str(settings.HARNESS_LEDGER_DIR),
            HARNESS_ENABLE_TEST_TOOLS="1",
        )
        env.update(self.extra_env)
        self.log_path.unlink(missing_ok=True)
        self.process = spawn(["rqworker", *QUEUES], log=self.log_path, env=env)
        wait_for(
            lambda: self.state() == "idle",
            timeout=60,
            interval=0.05,
            what=f"rqworker {self.process.pid} to register (log: {self.log_path})",
        )
        return self

    def _worker(self) -> Any:
        import django_rq
        from rq import Worker

        if self.process.poll() is not None:
            raise BenchError(f"rqworker exited with {self.process.returncode}; see {self.log_path}")
        redis = django_rq.get_connection("default")
        return next((w for w in Worker.all(connection=redis) if w.pid == self.process.pid), None)

    def state(self) -> str | None:
        worker = self._worker()
        return worker.get_state() if worker is not None else None

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.process is None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
