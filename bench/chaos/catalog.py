"""Every fault of the suite: what it injects, its bound on recovery, how many of it a full and
a short run inject."""

from __future__ import annotations

from bench.chaos.clocks import CLOCKS, GRACE_S, IDLE_TX_S, SLACK_S, STALE_S, SWEEP_S, TOOL_TIMEOUT_S
from bench.chaos.faults_hosts import (
    fault_clock_jump,
    fault_disk_full,
    fault_frozen_host,
    fault_partition,
)
from bench.chaos.faults_services import (
    fault_approval_while_killed,
    fault_postgres_restart,
    fault_redis_flushall,
    fault_redis_restart,
    fault_rollback_while_review,
)
from bench.chaos.faults_workers import (
    fault_frozen_horse,
    fault_kill_mid_checkpoint,
    fault_kill_mid_tool,
)
from bench.chaos.results import Fault

FAULTS: list[Fault] = [
    Fault(
        "kill_mid_tool",
        "kill -9 of a worker mid-tool (a sleep; or a side effect held after its intent)",
        STALE_S + SWEEP_S + SLACK_S,
        "stale-after + sweep + slack",
        fault_kill_mid_tool,
        full=24,
        short=3,
        batch=4,
    ),
    Fault(
        "kill_mid_checkpoint",
        "kill -9 of a worker mid-checkpoint-write (write lost, or landing after the death)",
        STALE_S + SWEEP_S + SLACK_S,
        "stale-after + sweep + slack",
        fault_kill_mid_checkpoint,
        full=24,
        short=3,
        batch=4,
    ),
    Fault(
        "frozen_horse",
        "frozen work horse (SIGSTOP; its worker stays up)",
        TOOL_TIMEOUT_S + GRACE_S + SLACK_S,
        "tool timeout + horse grace + slack",
        fault_frozen_horse,
        full=30,
        short=3,
        batch=5,
    ),
    Fault(
        "frozen_host",
        "frozen whole host (SIGSTOP of all its processes) past its lease, then woken",
        max(STALE_S, IDLE_TX_S) + SWEEP_S + SLACK_S + 3,
        "max(stale-after, idle-in-transaction timeout) + sweep + the other host's current call"
        " + slack",
        fault_frozen_host,
        full=16,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "partition",
        "network partition of one worker host mid-call (its link down), then healed",
        max(STALE_S, IDLE_TX_S) + SWEEP_S + SLACK_S + 3,
        "max(stale-after, idle-in-transaction timeout) + sweep + the other host's current call"
        " + slack",
        fault_partition,
        full=16,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "disk_full",
        "disk full in one host's workspace volume, then space freed",
        2.0 + SLACK_S + 6,
        "full for 2 s + retry + slack (to the task's success)",
        fault_disk_full,
        full=10,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "clock_jump",
        "clock jump (±2 h) on one worker host mid-call (its workers and sweeper)",
        2.0 + SLACK_S,
        "the call's 2 s + slack (the next checkpoint after the jump)",
        fault_clock_jump,
        full=10,
        short=2,
        batch=2,
        hosts=True,
    ),
    Fault(
        "postgres_restart",
        "PostgreSQL restart mid-run, no sweeper running",
        SLACK_S + 10,
        "reconnect + slack (from the database answering again)",
        fault_postgres_restart,
        full=8,
        short=1,
        batch=1,
    ),
    Fault(
        "redis_restart",
        "Redis restart (append-only file kept)",
        STALE_S + SWEEP_S + SLACK_S + 5,
        "reconnect + requeue grace + sweep + slack",
        fault_redis_restart,
        full=8,
        short=1,
        batch=1,
    ),
    Fault(
        "redis_flushall",
        "Redis FLUSHALL (every job and registration gone)",
        float(CLOCKS["HARNESS_REQUEUE_GRACE_S"]) + SWEEP_S + SLACK_S + 5,
        "requeue grace + sweep + slack",
        fault_redis_flushall,
        full=8,
        short=1,
        batch=1,
    ),
    Fault(
        "approval_while_killed",
        "approval posted while the worker resuming it is killed",
        STALE_S + SWEEP_S + SLACK_S + 5,
        "stale-after + sweep + slack (decision to effect)",
        fault_approval_while_killed,
        full=18,
        short=2,
        batch=3,
    ),
    Fault(
        "rollback_while_review",
        "rollback requested while a review is pending",
        SLACK_S + 4,
        "pickup + slack (rollback to the new review)",
        fault_rollback_while_review,
        full=40,
        short=2,
        batch=8,
    ),
]
