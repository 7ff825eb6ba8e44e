"""(7b) Scale-out over hosts: tasks/s and steps/s with 1, 2 and 3 worker hosts × 1 and 2 worker
processes per host, on one PostgreSQL.

Each host is a network, mount and UTS namespace of its own on this machine (bench/hosts/):
its workers reach PostgreSQL and Redis over a bridge, through a TCP forwarder in this process
(a thread per direction of each connection), and have their own data directory; workspaces
are rebuilt from the blob store. For each combination, real `manage.py rqworker` processes
start on the hosts (a first task per worker runs untimed: imports, connections), then a batch of
tasks (bench/scaleout.py's: a scripted model making STEPS `noop` calls, then answering) is
created and enqueued through the real services, and the time runs from the first enqueue to
the last task `succeeded`. tasks/s = tasks ÷ time, steps/s =
tasks × STEPS ÷ time. The knee: the smallest total number of worker processes past which the
best steps/s at that total grows by less than 10%.

All hosts share this machine's CPUs with PostgreSQL, Redis and the forwarders: on a 2-CPU
machine the figures show where contention sets in, not what separate machines would reach;
the forwarding adds a round trip through Python to every query (compare bench/scaleout.py,
whose workers connect directly).

Needs root (namespaces). Expected run time (quiet 2-CPU machine): smoke ~40 s; full ~4 min
(6 combinations, 8 tasks per worker of 20 steps, plus worker start-up).
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import BenchError, database_url, figure, rate_stats, tasks_delete, wait_for
from bench.hosts import Network, unavailable
from bench.scaleout import batch_create, batch_finished

TITLE = "Scale-out over hosts: worker hosts × workers per host on one PostgreSQL"
SIZES = {
    "smoke": {"hosts": (1, 2), "per_host": (1,), "tasks_per_worker": 2, "steps": 3},
    "full": {"hosts": (1, 2, 3), "per_host": (1, 2), "tasks_per_worker": 8, "steps": 20},
}


def _one(network: Network, hosts: int, per_host: int, *, tasks: int, steps: int) -> float:
    """Seconds for `tasks` tasks of `steps` steps on `per_host` workers on each of `hosts`."""
    for host in network.hosts[:hosts]:
        host.start_worker(per_host, wait=False)
    try:
        network.wait_workers(timeout=300)
        # A first task per worker, untimed: the first job of a worker pays for imports and
        # connections the others do not.
        warm = batch_create(hosts * per_host, 1)
        wait_for(lambda: batch_finished(warm), timeout=600, interval=0.05, what="warm-up")
        tasks_delete(warm)
        started = time.monotonic()
        ids = batch_create(tasks, steps)
        wait_for(lambda: batch_finished(ids), timeout=1800, interval=0.05, what="the tasks")
        elapsed = time.monotonic() - started
    finally:
        for host in network.hosts[:hosts]:
            host.kill()
    tasks_delete(ids)
    return elapsed


def _knee(rows: list[dict[str, Any]]) -> int | None:
    best: dict[int, float] = {}
    for row in rows:
        total = row["workers"]
        best[total] = max(best.get(total, 0.0), row["steps_per_s"]["median"])
    totals = sorted(best)
    pairs = zip(totals, totals[1:], strict=False)
    return next((prev for prev, nxt in pairs if best[nxt] < 1.1 * best[prev]), None)


def run(size: str) -> dict[str, Any]:
    reason = unavailable()
    if reason:
        raise BenchError(reason)
    from django.conf import settings

    params = SIZES[size]
    steps = params["steps"]
    env = {
        "HARNESS_LEDGER_DIR": str(settings.HARNESS_LEDGER_DIR),
        "HARNESS_ENABLE_TEST_TOOLS": "1",
        "HARNESS_WORKER_PRELOAD": "none",
    }
    rows: list[dict[str, Any]] = []
    with Network(database_url=database_url(), redis_url=settings.REDIS_URL, env=env) as network:
        for index in range(max(params["hosts"])):
            network.host(f"h{index + 1}")
        for hosts in params["hosts"]:
            for per_host in params["per_host"]:
                workers = hosts * per_host
                tasks = workers * params["tasks_per_worker"]
                seconds = _one(network, hosts, per_host, tasks=tasks, steps=steps)
                rows.append(
                    {
                        "hosts": hosts,
                        "per_host": per_host,
                        "workers": workers,
                        "tasks": tasks,
                        "seconds": round(seconds, 3),
                        "tasks_per_s": rate_stats([seconds], count=tasks),
                        "steps_per_s": rate_stats([seconds], count=tasks * steps),
                    }
                )
    knee = _knee(rows)
    first = rows[0]
    figures = [
        figure(
            figure=f"{row['hosts']} host{'s' if row['hosts'] > 1 else ''} × {row['per_host']} "
            f"worker{'s' if row['per_host'] > 1 else ''}: steps/s",
            unit="steps/s",
            ours=row["steps_per_s"],
            reference=first["steps_per_s"] if row is not first else None,
            reference_label="1 host × 1 worker",
            target="(info) scaling",
            note=f"{row['tasks_per_s']['median']:.2f} tasks/s; {row['tasks']} tasks of "
            f"{steps} steps in {row['seconds']} s",
        )
        for row in rows
    ]
    return {
        "title": TITLE,
        "figures": figures,
        "details": {"steps_per_task": steps, "runs": rows, "knee_at_workers": knee},
        "notes": (
            "Worker hosts are network + mount + UTS namespaces on this one machine "
            "(bench/hosts/), reaching PostgreSQL and Redis through a TCP forwarder; tasks "
            "created and enqueued through the real services; time from the first enqueue to "
            "the last `succeeded`. "
            + (
                f"The knee: steps/s grows by less than 10% past {knee} worker processes in all."
                if knee
                else "steps/s still grows at the largest number of workers measured."
            )
        ),
    }
