"""The tests' fork server (tests/zygote.py) starts a process that behaves as a fresh one: the
same signal handling (a worker whose SIGPIPE kills it lost a work horse to a closed pipe), the
environment it was given, its own session, and its exit code."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from django.conf import settings

from bench.common import spawn
from bench.common import worker_environment as environment
from tests.conftest import database_url_for_subprocess
from tests.zygote import Zygote

PROBE = (
    "import os, signal; "
    "print('pipe ignored', signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN, "
    "'int', signal.getsignal(signal.SIGINT) == signal.default_int_handler, "
    "'term', signal.getsignal(signal.SIGTERM), 'mark', os.environ.get('HARNESS_PROBE'), "
    "'session', os.getsid(0) == os.getpid()); raise SystemExit(3)"
)


def worker_environment(**extra: str) -> dict[str, str]:
    return environment(
        database_url=database_url_for_subprocess(), redis_url=settings.REDIS_URL, **extra
    )


@pytest.fixture(scope="module")
def server():
    zygote = Zygote(worker_environment())
    yield zygote
    zygote.close()


def test_a_forked_process_is_a_fresh_ones_twin(server, tmp_path: Path):
    env = worker_environment(HARNESS_PROBE="forked")
    assert server.ready and server.fits(env)
    forked = server.spawn(["shell", "-c", PROBE], log=tmp_path / "forked.log", env=env)
    fresh = spawn(
        ["shell", "-c", PROBE], log=tmp_path / "fresh.log", env={**env, "HARNESS_PROBE": "forked"}
    )
    assert forked.wait(timeout=120) == 3 and fresh.wait(timeout=120) == 3
    seen = (tmp_path / "forked.log").read_text().strip().splitlines()[-1]
    assert seen == (tmp_path / "fresh.log").read_text().strip().splitlines()[-1], seen
    assert "pipe ignored True" in seen and "int True" in seen
    assert "mark forked" in seen and "session True" in seen


def test_an_environment_beyond_the_harness_own_variables_is_not_forked(server):
    assert not server.fits(worker_environment(OPENAI_API_KEY="x"))
    assert server.fits(worker_environment(HARNESS_X="1"))


def test_a_signal_reaches_the_forked_process_and_its_code_is_reported(server, tmp_path: Path):
    env = worker_environment()
    process = server.spawn(
        ["shell", "-c", "import time; time.sleep(600)"], log=tmp_path / "s.log", env=env
    )
    assert process.poll() is None
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL
    assert sys.executable in process.args
