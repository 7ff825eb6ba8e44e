"""(7) Scale-out: tasks/s and steps/s with 1, 2, 4 and 8 worker processes on one PostgreSQL.

For each worker count W, W real `manage.py rqworker` subprocesses (the production worker
class, a forked work horse per job) serve the queues; then a batch of tasks is created and
enqueued through the real services (`task_create`, enqueue on commit), each a scripted model
making STEPS `noop` calls and then answering. Time = from the first enqueue to the last task
`succeeded` (polled in the database). tasks/s = tasks ÷ time, steps/s = tasks × STEPS ÷ time.
Saturation: the first worker count whose steps/s is less than 10% above the previous one's.

On a 2-CPU machine the curve flattens early: worker processes, PostgreSQL and Redis share the
same two CPUs, so beyond ~2 workers the figure shows contention, not the harness's ceiling.

Expected run time (quiet 2-CPU machine): smoke ~30 s; full ~4 min (4 worker counts, 8 tasks
per worker of 20 steps, plus worker start-up).
"""

from __future__ import annotations

import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.common import RqWorker, figure, rate_stats, tasks_delete, wait_for

TITLE = "Scale-out: worker processes on one PostgreSQL"
SIZES = {
    "smoke": {"workers": (1, 2), "tasks_per_worker": 2, "steps": 3},
    "full": {"workers": (1, 2, 4, 8), "tasks_per_worker": 8, "steps": 20},
}


def batch_create(n: int, steps: int) -> list[Any]:
    """`n` tasks of `steps` noop calls each, created and enqueued through the real services."""
    from tasks.services import task_create
    from tasks.spec import TaskSpec

    spec = TaskSpec.model_validate(
        {
            "title": "bench scale-out",
            "goal": "benchmark",
            "tools": ["noop"],
            "model": {
                "kind": "scripted",
                "script": [{"call": "noop", "args": {}}] * steps + [{"final": "done"}],
            },
            "budget": {"max_steps": steps + 1},
        }
    )
    return [task_create(spec=spec, user=None).id for _ in range(n)]


def batch_finished(ids: list[Any]) -> bool:
    """Whether every task succeeded (raises as soon as one failed or was canceled)."""
    from tasks.models import Task

    statuses = list(Task.objects.filter(id__in=ids).values_list("status", flat=True))
    failed = [s for s in statuses if s in ("failed", "canceled")]
    if failed:
        raise RuntimeError(f"scale-out tasks ended {failed[:3]}")
    return statuses.count("succeeded") == len(ids)


def _one(workers: int, *, tasks: int, steps: int) -> float:
    """Seconds for `tasks` tasks of `steps` steps on `workers` worker processes."""
    logs = Path(tempfile.gettempdir()) / f"bench-scaleout-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        for i in range(workers):
            stack.enter_context(RqWorker(log_path=logs / f"worker-{i}.log"))
        started = time.monotonic()
        ids = batch_create(tasks, steps)
        wait_for(lambda: batch_finished(ids), timeout=1800, interval=0.05, what="the tasks")
        elapsed = time.monotonic() - started
    tasks_delete(ids)
    return elapsed


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    steps = params["steps"]
    per_worker: dict[int, dict[str, Any]] = {}
    for workers in params["workers"]:
        tasks = workers * params["tasks_per_worker"]
        seconds = _one(workers, tasks=tasks, steps=steps)
        per_worker[workers] = {
            "tasks": tasks,
            "seconds": round(seconds, 3),
            "tasks_per_s": rate_stats([seconds], count=tasks),
            "steps_per_s": rate_stats([seconds], count=tasks * steps),
        }
    counts = sorted(per_worker)
    saturation = next(
        (
            w
            for prev, w in zip(counts, counts[1:], strict=False)
            if per_worker[w]["steps_per_s"]["median"]
            < 1.1 * per_worker[prev]["steps_per_s"]["median"]
        ),
        None,
    )
    one = per_worker[counts[0]]
    figures = []
    for workers in counts:
        row = per_worker[workers]
        figures.append(
            figure(
                figure=f"{workers} worker process{'es' if workers > 1 else ''}: steps/s",
                unit="steps/s",
                ours=row["steps_per_s"],
                reference=one["steps_per_s"] if workers != counts[0] else None,
                reference_label=f"{counts[0]} worker",
                target="(info) scaling",
                note=f"{row['tasks_per_s']['median']:.2f} tasks/s; {row['tasks']} tasks of "
                f"{steps} steps in {row['seconds']} s",
            )
        )
    return {
        "title": TITLE,
        "figures": figures,
        "details": {
            "steps_per_task": steps,
            "per_worker_count": per_worker,
            "saturates_at_workers": saturation,
        },
        "notes": (
            "Real `rqworker` subprocesses on this machine, tasks created and enqueued through "
            "the real services, time from the first enqueue to the last `succeeded`. "
            + (
                f"steps/s stops growing (less than +10%) at {saturation} workers."
                if saturation
                else "steps/s still grows at the largest worker count measured."
            )
        ),
    }
