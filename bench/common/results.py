"""Result files: a benchmark's figures with the environment and commit they were measured on,
written to and read from bench/results/."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common.paths import BENCH_DIR, RESULTS_DIR, BenchError


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
        "dbos",
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
