"""The chaos suite's settings: its clocks, bounds' slack, the harness.yaml of its tasks,
the queues of its worker hosts, and where its table and files are."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


CHAOS_MD = ROOT / "bench" / "chaos.md"


# The pool in this namespace serves `default`; the worker hosts (bench/hosts/) serve `low`
# (hosts a and b) and `high` (host c, the one whose clock jumps): a fault's tasks go where the
# fault is by their priority. Every worker serves the `resume` lane first, as every worker must
# (harness_base/queues.py): a task resuming after a decision runs on whichever takes it.
HOST_QUEUES = {"a": "low", "b": "low", "c": "high"}


# The clocks of the suite's processes: heartbeat 0.3 s, stale after 1.2 s, sweep every 0.3 s
# (tests/durable's FAST_CLOCKS), a frozen horse killed 3 s past its call's timeout.
CLOCKS = {
    "HARNESS_HEARTBEAT_S": "0.3",
    "HARNESS_STALE_AFTER_S": "1.2",
    "HARNESS_SWEEP_INTERVAL_S": "0.3",
    "HARNESS_REQUEUE_GRACE_S": "1.0",
    "HARNESS_CAPACITY_RETRY_S": "0.3",
    "HARNESS_HORSE_GRACE_S": "3",
    # A transaction a frozen or cut-off host left open holds its locks until the server ends
    # it: this long after its last statement.
    "HARNESS_DB_IDLE_IN_TRANSACTION_S": "3",
}


STALE_S = float(CLOCKS["HARNESS_STALE_AFTER_S"])


IDLE_TX_S = float(CLOCKS["HARNESS_DB_IDLE_IN_TRANSACTION_S"])


SWEEP_S = float(CLOCKS["HARNESS_SWEEP_INTERVAL_S"])


GRACE_S = float(CLOCKS["HARNESS_HORSE_GRACE_S"])


# Room for a loaded machine (forks, imports, a busy database) on top of each formula.
SLACK_S = 6.0


TOOL_TIMEOUT_S = 3.0


HARNESS_YAML = """
retry: {initial_s: 0.2, factor: 2, max_s: 2, jitter: full, max_attempts: 6}
timeouts: {session_s: 900, turn_s: 60, tool_s: 30}
"""


class ChaosError(RuntimeError):
    """The suite cannot run here (a missing binary, a service that does not start)."""


def say(message: str) -> None:
    print(f"chaos: {message}", file=sys.stderr, flush=True)


HOST_ENV = (
    "HARNESS_CONFIG",
    "HARNESS_LEDGER_DIR",
    "HARNESS_ENABLE_TEST_TOOLS",
    "HARNESS_WORKER_PRELOAD",
    "HARNESS_LOG_FORMAT",
    *CLOCKS,
)


# Put first on PYTHONPATH of host c's processes: their wall clock is off by what the file
# HARNESS_CLOCK_OFFSET_FILE says (bench/clock_offset/sitecustomize.py).
CLOCK_OFFSET_DIR = ROOT / "bench" / "clock_offset"
