"""With HARNESS_SANDBOX=off a command has no bubblewrap to die with its worker: it must still not
outlive the process that ran it (agent/tools/sandbox/process.py gives it a parent-death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent.tools.sandbox import SandboxUnavailable, sandbox_spawn
from agent.tools.sandbox.config import setpriv_binary
from agent.tools.sandbox.limits import Limits
from tests.conftest import processes_running, unique_sleep, wait_for

# A stand-in for a horse: runs the command the way run_command does (`/bin/sh -c`, from its
# main thread), unsandboxed, and blocks until it is killed.
_HORSE = """
import sys, threading, django
django.setup()
from pathlib import Path
from agent.tools.sandbox import Limits, sandbox_run
print("running", flush=True)
sandbox_run(argv=["/bin/sh", "-c", sys.argv[2]], workspace=Path(sys.argv[1]),
            limits=Limits(wall_s=None), stop=threading.Event())
"""


def test_an_unsandboxed_command_dies_with_the_process_that_ran_it(tmp_path: Path):
    sleep = unique_sleep()
    env = {
        **os.environ,
        "HARNESS_SANDBOX": "off",
        "DJANGO_SETTINGS_MODULE": "harness_site.settings",
    }
    horse = subprocess.Popen(
        [sys.executable, "-c", _HORSE, str(tmp_path), sleep],
        env=env,
        stdout=subprocess.PIPE,
    )
    try:
        assert horse.stdout.readline() == b"running\n"
        wait_for(lambda: processes_running(sleep), 30, message="the command to start")

        os.kill(horse.pid, signal.SIGKILL)
        horse.wait()

        wait_for(lambda: not processes_running(sleep), 10, message="the command to die")
    finally:
        horse.kill()
        horse.wait()
        horse.stdout.close()
        for pid in processes_running(sleep):
            os.kill(pid, signal.SIGKILL)


def test_it_refuses_to_run_unsandboxed_without_setpriv(settings, tmp_path: Path, monkeypatch):
    settings.HARNESS_SANDBOX = "off"
    setpriv_binary.cache_clear()
    monkeypatch.setattr("shutil.which", lambda *args, **kwargs: None)
    try:
        with pytest.raises(SandboxUnavailable, match="setpriv"):
            sandbox_spawn(
                argv=["/bin/sh", "-c", "echo ran > ran.txt"], workspace=tmp_path, limits=Limits()
            )
    finally:
        setpriv_binary.cache_clear()
    assert not (tmp_path / "ran.txt").exists()
