"""Faults in the workers: kill -9 mid-tool and mid-checkpoint-write, a frozen horse."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator

from bench.chaos.clocks import TOOL_TIMEOUT_S, ChaosError
from bench.chaos.processes import poll, tcp_local_ports
from bench.chaos.results import FaultResult
from bench.chaos.suite import Chaos


def ledger_script(
    name: str, *, sleep_s: float, extra: list[dict] | None = None, after: list[dict] | None = None
) -> tuple[list[dict], list[str]]:
    """Two ledger effects around a sleep: `extra` steps before the second, `after` after it."""
    tag = uuid.uuid4().hex[:10]
    keys = [f"{name}-{tag}-a", f"{name}-{tag}-b"]
    script = [
        {"call": "ledger_append", "args": {"key": keys[0], "value": "paid"}},
        {"call": "sleep", "args": {"seconds": sleep_s}},
        *(extra or []),
        {"call": "ledger_append", "args": {"key": keys[1], "value": "shipped"}},
        *(after or []),
        {"final": "done"},
    ]
    return script, keys


@contextlib.contextmanager
def ledger_held(chaos: Chaos) -> Iterator[None]:
    """Hold the ledger's lock: a `ledger_append` blocks inside, its intent recorded and its
    effect not yet made."""
    path = chaos.ledger_dir / "ledger.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)


def _kill_running(chaos: Chaos, result: FaultResult, task_ids: list[str]) -> None:
    for task_id in task_ids:
        horse = chaos.horse_of(task_id)
        worker = chaos.fleet.worker_of_horse(horse) if horse else None
        if worker is None:
            continue
        chaos.inject(result, task_id)
        chaos.fleet.kill(worker)


def fault_kill_mid_tool(chaos: Chaos, result: FaultResult, n: int) -> None:
    """kill -9 of the worker while its task is inside a tool call: a sleep, or (every other
    batch) a `ledger_append` held between its intent and its effect."""
    inside_effect = (result.injected // max(n, 1)) % 2 == 1 or random.random() < 0.5
    tasks = []
    for _ in range(n):
        script, keys = ledger_script(result.name, sleep_s=1.5)
        tasks.append(chaos.task_create(result, script=script, keys=keys))
    if inside_effect:
        with ledger_held(chaos):
            poll(
                lambda: all(_call_running(t, "ledger_append") for t in tasks),
                timeout=60,
                what="the side effects to start",
            )
            _kill_running(chaos, result, tasks)
    else:
        poll(
            lambda: all(chaos.in_call(t, "sleep") for t in tasks),
            timeout=60,
            what="the sleeps to start",
        )
        time.sleep(random.uniform(0.1, 0.6))
        _kill_running(chaos, result, tasks)
    chaos.fleet.spawn_workers(n, wait=False)


def _call_running(task_id: str, tool: str) -> bool:
    from tasks.models import ToolCall

    return ToolCall.objects.filter(task_id=task_id, tool=tool, status="running").exists()


def fault_kill_mid_checkpoint(chaos: Chaos, result: FaultResult, n: int) -> None:
    """kill -9 of the worker while its checkpoint write is on its way: the checkpoint table is
    locked, every run blocks in its next durable write, and each worker is killed there as soon
    as its run is seen blocked (a horse blocked longer than HARNESS_HORSE_GRACE_S would be
    killed by its own supervisor first). Every other task's session is ended with it (the
    write is lost); the others' writes land after the worker died (a write in flight when a
    machine dies may still commit)."""
    from django.db import connection, transaction

    tasks = []
    for _ in range(n):
        script, keys = ledger_script(
            result.name,
            sleep_s=1.0,
            extra=[{"call": "noop", "args": {}}] * random.randint(0, 2),
            after=[{"call": "noop", "args": {}}] * 3,
        )
        tasks.append(chaos.task_create(result, script=script, keys=keys))
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=60, what="the sleeps")
    # The sleeps end within a second: each run blocks in one of the writes that follow.
    time.sleep(random.uniform(0.0, 0.9))
    table = _checkpoint_table()
    killed: set[str] = set()

    def kill_the_blocked() -> bool:
        """Kill the workers of the runs blocked now; True once no run is left to block."""
        blocked, elsewhere = _runs_in_checkpoint_write(chaos, tasks, table, skip=killed)
        for task_id, (worker, ports) in blocked.items():
            chaos.inject(result, task_id)
            chaos.fleet.kill(worker)
            if len(killed) % 2 == 0:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE client_port = ANY(%s)",
                        [sorted(ports)],
                    )
            killed.add(task_id)
        return not elsewhere

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f'LOCK TABLE "{table}" IN SHARE MODE')
        try:
            poll(kill_the_blocked, timeout=30, what="the runs to block in a checkpoint write")
        except ChaosError as exc:
            raise ChaosError(
                f"{exc}: {_checkpoint_wait_report(chaos, [t for t in tasks if t not in killed])}"
            ) from exc
    chaos.fleet.spawn_workers(len(killed), wait=False)


def _checkpoint_table() -> str:
    from checkpoints.models import Checkpoint

    return Checkpoint._meta.db_table


def _runs_in_checkpoint_write(
    chaos: Chaos, tasks: list[str], table: str, *, skip: set[str]
) -> tuple[dict[str, tuple], list[str]]:
    """({task id: (worker, horse's ports)} of the runs blocked in a write to the checkpoint
    table now, [the tasks still running elsewhere]), leaving out `skip` and the tasks that are
    not running (finished, or given back after their horse was killed)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT client_port FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s",
            [f'%"{table}"%'],
        )
        waiting = {row[0] for row in cursor.fetchall()}
    blocked, elsewhere = {}, []
    rows = chaos.rows(tasks)
    for task_id in tasks:
        if task_id in skip or rows.get(task_id, {}).get("status") != "running":
            continue
        horse = chaos.horse_of(task_id)
        worker = chaos.fleet.worker_of_horse(horse) if horse else None
        ports = tcp_local_ports(horse) if horse else set()
        if worker is not None and ports & waiting:
            blocked[task_id] = (worker, ports)
        else:
            elsewhere.append(task_id)
    return blocked, elsewhere


def _checkpoint_wait_report(chaos: Chaos, tasks: list[str]) -> str:
    """Why runs were not seen blocked: each task's status, horse, worker and what its
    database sessions were doing."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT client_port, state, wait_event_type, wait_event, "
            "pg_blocking_pids(pid), left(query, 160) FROM pg_stat_activity "
            "WHERE client_port IS NOT NULL"
        )
        sessions = {row[0]: row[1:] for row in cursor.fetchall()}
    rows = chaos.rows(tasks)
    lines = []
    for task_id in tasks:
        horse = chaos.horse_of(task_id)
        worker = chaos.fleet.worker_of_horse(horse) if horse else None
        ports = tcp_local_ports(horse) if horse else set()
        lines.append(
            f"task {task_id} {rows.get(task_id, {}).get('status')} horse {horse} "
            f"worker {worker.pid if worker else None} sessions "
            f"{[sessions.get(port, (port, 'not found')) for port in sorted(ports)]}"
        )
    return "; ".join(lines)


def fault_frozen_horse(chaos: Chaos, result: FaultResult, n: int) -> None:
    """SIGSTOP of the work horse alone (its worker stays up and heartbeats) inside a call: the
    worker must kill it past the call's timeout plus the grace, and the task run again."""
    tasks = []
    for _ in range(n):
        script, keys = ledger_script(result.name, sleep_s=1.5)
        tasks.append(
            chaos.task_create(
                result, script=script, keys=keys, budget={"tool_timeout_s": TOOL_TIMEOUT_S}
            )
        )
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=60, what="the sleeps")
    for task_id in tasks:
        horse = chaos.horse_of(task_id)
        if horse:
            chaos.inject(result, task_id)
            with contextlib.suppress(ProcessLookupError):
                os.kill(horse, signal.SIGSTOP)
