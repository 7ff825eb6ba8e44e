"""The three pieces of work the capacity model is built from, each run through the real code
path in this process under a `Probe`: agent steps (`task_run`, as bench/loop does), a decision
(the API request, then the resume job taken off its RQ queue and performed) and page views
(Django's test client, logged in as an operator)."""

from __future__ import annotations

import uuid
from typing import Any

from bench.approval.steps import _decide, _operator
from bench.capacity.probe import Cost, Probe
from bench.common import scripted_task
from bench.loop.ours import ours_cleanup, ours_prepare, ours_run


def rows_bytes(task_id: Any, since: Any) -> dict[str, int]:
    """pg_column_size of the rows a task left, per table: rows with its task_id (and the task
    row), plus the content-addressed blobs stored since `since` (shared, so no task's)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND column_name = 'task_id' AND data_type = 'uuid'"
        )
        tables = sorted(name for (name,) in cursor.fetchall())
        sizes = {}
        for table in tables + ["tasks_task", "checkpoints_blob"]:
            where = {"tasks_task": "t.id = %(t)s", "checkpoints_blob": "t.created_at >= %(s)s"}
            cursor.execute(
                f'SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "{table}" t'
                f" WHERE {where.get(table, 't.task_id = %(t)s')}",
                {"t": task_id, "s": since},
            )
            size = int(cursor.fetchone()[0])
            if size:
                sizes[table] = size
    return sizes


def steps_cost(variant: str, steps: int) -> tuple[Cost, dict[str, int], Any]:
    """(the cost of running a task of `steps` steps of `variant`, its rows' bytes per table,
    the finished task: the caller cleans it up)."""
    from django.utils import timezone

    task = ours_prepare(steps, variant)
    started = timezone.now()
    with Probe() as cost:
        ours_run(task)
    return cost, rows_bytes(task.id, started), task


def cleanup(task: Any) -> None:
    ours_cleanup(task)


def _paused_task(key: str) -> Any:
    from agent.runtime import task_run

    task = scripted_task(
        script=[
            {"call": "ledger_append", "args": {"key": key, "value": "approved"}},
            {"final": "done"},
        ],
        tools=["ledger_append"],
        title="bench capacity decision",
    )
    outcome = task_run(task_id=task.id)
    if outcome != "paused":
        raise RuntimeError(f"the ledger_append call did not pause for review ({outcome})")
    return task


def _resume_job() -> Any:
    """Take the decision's job off the `resume` queue, as an idle worker would, and run it."""
    import django_rq
    from rq import Queue

    from harness_base.queues import RESUME_QUEUE

    queue = django_rq.get_queue(RESUME_QUEUE)
    taken = Queue.dequeue_any([queue], None, connection=queue.connection)
    if taken is None:
        raise RuntimeError("the decision enqueued no resume job")
    job, _ = taken
    return job.perform()


class Operator:
    """A bench operator with an API token (decisions) and a logged-in session (pages)."""

    def __init__(self) -> None:
        from django.test import Client

        self.user, token = _operator()
        self.api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        self.browser = Client()
        self.browser.force_login(self.user)

    def get(self, url: str) -> None:
        response = self.browser.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")

    def close(self) -> None:
        from django.db.models import ProtectedError

        try:
            self.user.delete()
        except ProtectedError:
            self.user.is_active = False
            self.user.save(update_fields=["is_active"])


def decision_cost(operator: Operator) -> dict[str, Any]:
    """{waiting: bytes of a task waiting for review per table, web: the decision request's
    cost, worker: the resume job's cost (dequeue, lease, re-check, the tool, the final
    answer, done)}."""
    from django.utils import timezone

    from bench.common import tasks_delete
    from review.models import ReviewRequest

    started = timezone.now()
    task = _paused_task(f"bench-capacity-{uuid.uuid4().hex}")
    waiting = rows_bytes(task.id, started)
    review = ReviewRequest.objects.get(task_id=task.id, status="pending")
    with Probe() as web:
        _decide(operator.api, review)
    with Probe() as worker:
        outcome = _resume_job()
    if outcome != "succeeded":
        raise RuntimeError(f"the resumed task ended {outcome}")
    tasks_delete([task.id])
    return {"waiting": waiting, "web": web, "worker": worker}


def page_costs(operator: Operator, task_id: Any, repeat: int) -> dict[str, list[Cost]]:
    """{page: its cost per view, `repeat` views each after one warm-up} for the task page of
    `task_id`, the review inbox (one review pending) and the two statistics pages."""
    from bench.common import tasks_delete

    pending = _paused_task(f"bench-capacity-{uuid.uuid4().hex}")
    pages = {
        "task page": f"/tasks/{task_id}/",
        "review inbox": "/reviews/",
        "failure statistics, 24 h": "/stats/failures/?since=24h",
        "review SLAs, 24 h": "/stats/reviews/?since=24h",
    }
    costs: dict[str, list[Cost]] = {}
    try:
        for label, url in pages.items():
            operator.get(url)
            for _ in range(repeat):
                with Probe() as cost:
                    operator.get(url)
                costs.setdefault(label, []).append(cost)
    finally:
        tasks_delete([pending.id])
    return costs
