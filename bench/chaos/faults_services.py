"""Faults in the services and around reviews: PostgreSQL and Redis restarted or flushed, an
approval while the worker is killed, a rollback while a review is open."""

from __future__ import annotations

import random
import time
import uuid

from bench.chaos.clocks import ChaosError
from bench.chaos.faults_workers import ledger_script
from bench.chaos.processes import poll
from bench.chaos.results import FaultResult, Injection, progress_since
from bench.chaos.suite import Chaos


def fault_postgres_restart(chaos: Chaos, result: FaultResult, n: int) -> None:
    """PostgreSQL restarted (fast shutdown: every session cut) while tasks run, with no sweeper
    to repair anything: the workers must reconnect and carry their tasks on."""
    chaos.fleet.stop_sweepers()
    try:
        for _ in range(n):
            tasks = []
            for _ in range(max(2, len(chaos.fleet.alive()) - 1)):
                # A sleep long enough for every task to be inside it at once on a loaded
                # machine (they are created one after the other), then writes.
                script, keys = ledger_script(
                    result.name, sleep_s=3.0, extra=[{"call": "noop", "args": {}}] * 10
                )
                tasks.append(chaos.task_create(result, script=script, keys=keys))
            poll(
                lambda tasks=tasks: all(chaos.in_call(t, "sleep") for t in tasks),
                timeout=60,
                what="the tasks to run",
            )
            time.sleep(random.uniform(0.0, 1.0))
            from django.db import connections

            rows = chaos.rows(tasks)
            at = time.monotonic()
            connections.close_all()
            chaos.pg.restart()
            back = time.monotonic()
            # One fault, every task it hit: recovery is counted per restart, from the moment
            # the database answers again to the slowest task's progress.
            result.injected += 1
            for task_id in tasks:
                result.injections.append(
                    Injection(task_id=task_id, at=back, recovered=progress_since(rows[task_id]))
                )
            result.figures.setdefault("restart_s", []).append(back - at)
            chaos.watch(result, timeout=60)
    finally:
        chaos.fleet.start_sweeper()


def fault_redis_restart(chaos: Chaos, result: FaultResult, n: int, *, flush: bool = False) -> None:
    """Redis restarted (SIGTERM, its append-only file kept) or flushed (FLUSHALL: every queued
    job and worker registration gone) while tasks are queued and running."""
    import django_rq

    for _ in range(n):
        tasks = []
        for _ in range(len(chaos.fleet.alive()) + 2):  # some wait in the queue
            script, keys = ledger_script(result.name, sleep_s=1.0)
            tasks.append(chaos.task_create(result, script=script, keys=keys))
        poll(
            lambda tasks=tasks: (
                sum(r["status"] == "running" for r in chaos.rows(tasks).values()) >= 2
            ),
            timeout=60,
            what="the tasks to run",
        )
        rows = chaos.rows(tasks)
        result.injected += 1
        at = time.monotonic()
        if flush:
            django_rq.get_connection("default").flushall()
        else:
            chaos.redis.restart()
        for task_id in tasks:
            result.injections.append(
                Injection(task_id=task_id, at=at, recovered=progress_since(rows[task_id]))
            )
        chaos.watch(result, timeout=60)


def fault_redis_flushall(chaos: Chaos, result: FaultResult, n: int) -> None:
    fault_redis_restart(chaos, result, n, flush=True)


def fault_approval_while_killed(chaos: Chaos, result: FaultResult, n: int) -> None:
    """An approval posted while the worker that picks up the resumed task is being killed
    (kill -9 at a random moment from the decision to a little after the worker took the job):
    the approved call must run once, never be asked about again, never be consumed unrun."""
    from review.models import ReviewRequest

    tasks = []
    for _ in range(n):
        tag = uuid.uuid4().hex[:10]
        keys = [f"{result.name}-{tag}-a"]
        script = [
            {"call": "noop", "args": {}},
            {"call": "ledger_append", "args": {"key": keys[0], "value": "approved"}},
            {"call": "sleep", "args": {"seconds": 0.3}},
            {"final": "done"},
        ]
        tasks.append(chaos.task_create(result, script=script, keys=keys, review=["ledger_append"]))
    poll(
        lambda: (
            all(r["status"] == "waiting_review" for r in chaos.rows(tasks).values())
            and len(chaos.rows(tasks)) == len(tasks)
        ),
        timeout=60,
        what="the tasks to wait for review",
    )
    killed: set[int] = set()
    killed_in_pool = 0
    for task_id in tasks:
        review = ReviewRequest.objects.get(task_id=task_id, status="pending")
        key = review.arguments["key"]
        delay = random.uniform(0.0, 0.4)
        status = chaos.approve(review.id)
        if status != 200:
            raise ChaosError(f"approval of review {review.id}: HTTP {status}")
        result.approvals.append(str(review.id))
        chaos.inject(result, task_id, recovered=lambda row, key=key: chaos.ledger().get(key, 0) > 0)
        # The worker that takes the resumed task: the first one busy with it, killed after
        # `delay` (or when found, if later). Every worker serves the resume lane, so it may be
        # a worker host's: that one is replaced on its host.
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline + 2:
            horse = chaos.horse_of(task_id)
            worker = chaos.fleet.worker_of_horse(horse) if horse else None
            if worker is not None and time.monotonic() >= deadline:
                if worker.pid not in killed:
                    killed.add(worker.pid)
                    chaos.fleet.kill(worker)
                    killed_in_pool += not chaos.host_worker_replace(worker)
                break
            time.sleep(0.01)
    chaos.fleet.spawn_workers(killed_in_pool, wait=False)


def fault_rollback_while_review(chaos: Chaos, result: FaultResult, n: int) -> None:
    """A rollback (with resume) requested while a review is pending: the pending review is
    withdrawn, an approval of it afterwards is refused, the task asks again from the restored
    state and the approved call runs once."""
    from checkpoints.models import Checkpoint
    from review.models import ReviewRequest

    tasks = []
    for _ in range(n):
        tag = uuid.uuid4().hex[:10]
        keys = [f"{result.name}-{tag}-a"]
        script = [
            {"call": "noop", "args": {}},
            {"call": "ledger_append", "args": {"key": keys[0], "value": "approved"}},
            {"final": "done"},
        ]
        tasks.append(chaos.task_create(result, script=script, keys=keys, review=["ledger_append"]))
    poll(
        lambda: (
            len(chaos.rows(tasks)) == len(tasks)
            and all(r["status"] == "waiting_review" for r in chaos.rows(tasks).values())
        ),
        timeout=60,
        what="the tasks to wait for review",
    )
    for task_id in tasks:
        old = ReviewRequest.objects.get(task_id=task_id, status="pending")
        target = Checkpoint.objects.filter(task_id=task_id, step_index=1).order_by("seq").first()
        target = target or Checkpoint.objects.filter(task_id=task_id).order_by("seq").first()
        chaos.inject(
            result,
            task_id,
            recovered=lambda row, task_id=task_id, old=old.id: (
                ReviewRequest.objects.filter(task_id=task_id, status="pending", id__gt=old).exists()
                or row["status"] == "succeeded"
            ),
        )
        response = chaos.post(
            f"/api/v1/tasks/{task_id}/rollback",
            {"checkpoint_id": str(target.id), "resume": True, "reason": "chaos: roll back"},
        )
        if response.status_code != 200:
            raise ChaosError(f"rollback of {task_id}: {response.status_code} {response.content!r}")
        late = chaos.approve(old.id)
        result.figures.setdefault("late_approval_status", []).append(late)
        if late == 200:
            result.approvals.append(str(old.id))
    # Approve what each task asks after its rollback.
    deadline = time.monotonic() + 60
    waiting = set(tasks)
    while waiting and time.monotonic() < deadline:
        for review in ReviewRequest.objects.filter(task_id__in=waiting, status="pending"):
            if chaos.approve(review.id) == 200:
                result.approvals.append(str(review.id))
                chaos._decided.add(str(review.id))
                waiting.discard(str(review.task_id))
        time.sleep(0.1)
