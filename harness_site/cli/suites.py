"""The suites other than pytest, each run as a child process: `harness replay` (the saved cases)
and `harness chaos` (faults against real processes)."""

from __future__ import annotations

import signal
import subprocess
import sys

from harness_site.cli.common import ROOT, child_env, manage


def cmd_replay(replay_args: list[str]) -> int:
    """The saved cases as a suite (docs/replay.md): `manage.py replay_cases`."""
    return subprocess.call(manage("replay_cases", *replay_args), cwd=ROOT)


def cmd_chaos(chaos_args: list[str]) -> int:
    """The chaos suite (bench/chaos/): it runs its own PostgreSQL and Redis (their binaries
    are all it needs here)."""
    argv = [sys.executable, "-m", "bench", "chaos", *chaos_args]
    process = subprocess.Popen(argv, cwd=ROOT, env=child_env(HARNESS_ENABLE_TEST_TOOLS="1"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the suite gets Ctrl-C itself and cleans up
    return process.wait()
