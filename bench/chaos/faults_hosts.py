"""Faults on the worker hosts (bench/hosts): a frozen host, a partition, a clock jump, a full
disk."""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

from bench.chaos.faults_workers import ledger_script
from bench.chaos.processes import parent_pid, poll
from bench.chaos.results import FaultResult, Injection, progress_since
from bench.chaos.suite import Chaos


def _host_tasks(chaos: Chaos, result: FaultResult, *, count: int, priority: str) -> list[str]:
    tasks = []
    for _ in range(count):
        script, keys = ledger_script(result.name, sleep_s=1.5)
        tasks.append(chaos.task_create(result, script=script, keys=keys, priority=priority))
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=90, what="the sleeps")
    return tasks


def _on_host(chaos: Chaos, host: Any, task_ids: list[str]) -> list[str]:
    mine = {p.pid for p in host.workers}
    return [t for t in task_ids if parent_pid(chaos.horse_of(t) or 0) in mine]


def _host_fault(chaos: Chaos, result: FaultResult, n: int, *, cut: str) -> None:
    """A whole host frozen (every process SIGSTOPped) or cut off (its link down) while its
    workers run tasks, past the lease, until the other host has taken the tasks over; then
    woken or healed: its runs find their lease gone and stop, without another write."""
    hosts = chaos.hosts()
    victim = hosts["a"] if (result.injected // 2) % 2 == 0 else hosts["b"]
    tasks = _host_tasks(chaos, result, count=4, priority="low")
    hit = _on_host(chaos, victim, tasks)
    rows = chaos.rows(hit)
    at = time.monotonic()
    victim.freeze() if cut == "freeze" else victim.partition()
    try:
        for task_id in hit:
            result.injections.append(
                Injection(task_id=task_id, at=at, recovered=progress_since(rows[task_id]))
            )
            result.injected += 1
        chaos.watch(result, timeout=60)
    finally:
        victim.thaw() if cut == "freeze" else victim.heal()


def fault_frozen_host(chaos: Chaos, result: FaultResult, n: int) -> None:
    _host_fault(chaos, result, n, cut="freeze")


def fault_partition(chaos: Chaos, result: FaultResult, n: int) -> None:
    _host_fault(chaos, result, n, cut="partition")


def fault_clock_jump(chaos: Chaos, result: FaultResult, n: int) -> None:
    """Host c's wall clock steps two hours ahead or back (alternately) while its workers are
    inside a call and its sweeper sweeps: leases, heartbeats and session timeouts go by the
    database's clock, so nothing is stalled, redispatched or timed out for it. Stepped back to
    the true time after each batch (a second jump)."""
    chaos.hosts()
    offset = 7200 if (result.injected // max(n, 1)) % 2 == 0 else -7200
    tasks = []
    for _ in range(n):
        script, keys = ledger_script(result.name, sleep_s=2.0)
        tasks.append(chaos.task_create(result, script=script, keys=keys, priority="high"))
    poll(lambda: all(chaos.in_call(t, "sleep") for t in tasks), timeout=90, what="the sleeps")
    rows = chaos.rows(tasks)
    at = time.monotonic()
    chaos.clock_file.write_text(f"{offset:+d}\n")
    for task_id in tasks:
        result.injections.append(
            Injection(task_id=task_id, at=at, recovered=progress_since(rows[task_id]))
        )
        result.injected += 1
    try:
        chaos.watch(result, timeout=60)
    finally:
        chaos.clock_file.write_text("0\n")
    result.figures["spurious_redispatches"] = _redispatches(result.tasks)


def _redispatches(task_ids: list[str]) -> int:
    from tasks.models import Task

    return Task.objects.filter(id__in=task_ids, redispatch_count__gt=0).count()


def fault_disk_full(chaos: Chaos, result: FaultResult, n: int) -> None:
    """Host c's workspace volume (a small tmpfs) is full when tasks start on it and write a
    file: whatever fails for want of space fails cleanly (a failed call the model is told
    about, a retry, a redispatch), then the operator frees the space; every task finishes,
    each effect once."""
    chaos.hosts()
    filler = chaos.volume / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    at = time.monotonic()
    tasks = []
    for _ in range(n):
        tag = uuid.uuid4().hex[:10]
        keys = [f"{result.name}-{tag}-a", f"{result.name}-{tag}-b"]
        script = [
            {"call": "ledger_append", "args": {"key": keys[0], "value": "paid"}},
            {"call": "write_file", "args": {"path": "report.txt", "content": "x" * 100_000}},
            {"call": "ledger_append", "args": {"key": keys[1], "value": "shipped"}},
            {"final": "done"},
        ]
        task_id = chaos.task_create(result, script=script, keys=keys, priority="high")
        tasks.append(task_id)
        result.injections.append(
            Injection(task_id=task_id, at=at, recovered=lambda row: row["status"] == "succeeded")
        )
        result.injected += 1
    time.sleep(2.0)
    filler.unlink()
    chaos.watch(result, timeout=60)
