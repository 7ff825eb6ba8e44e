"""`python -m bench` answers a database it cannot reach with a one-line error, not a traceback,
and a SIGTERM stops the workers it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlunsplit

import pytest
from django.conf import settings

from bench.__main__ import exit_on_sigterm
from bench.common import RqWorker

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_database_is_a_clear_error(tmp_path):
    db = settings.DATABASES["default"]
    url = urlunsplit(
        ("postgres", f"{db['USER']}@{db['HOST']}:{db['PORT']}", "/harness_no_such_db", "", "")
    )
    env = {**os.environ, "DATABASE_URL": url, "HARNESS_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "cannot connect" in done.stderr and "harness_no_such_db" in done.stderr


@pytest.mark.django_db(transaction=True)
def test_sigterm_stops_the_workers_a_benchmark_started(
    harness_dirs, bench_processes_forked, tmp_path
):
    # The workers run in their own sessions: a SIGTERM to `python -m bench` does not reach
    # them. Without the handler the run died at once and left them taking the next run's jobs.
    previous = signal.getsignal(signal.SIGTERM)
    exit_on_sigterm()
    try:
        with pytest.raises(SystemExit), RqWorker(log_path=tmp_path / "worker.log") as worker:
            os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert worker.process.poll() is not None
