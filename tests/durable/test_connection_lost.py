"""A run whose database connection breaks (PostgreSQL restarted or failed over; here its
sessions are ended from the server side, which is what a restart does to them) carries on with
no sweeper running: the worker waits for the database, gives the task back to the queue, and a
worker continues it from its newest checkpoint, each side effect once. Without that the job
died on "the connection is lost" and left the task `running` until a sweeper found it."""

from __future__ import annotations

import pytest
from django.db import connection

from agent.tools.testing import ledger_records
from tasks.models import Task, TaskEvent
from tests.conftest import wait_for
from tests.factories import enqueued_task

from .conftest import tcp_local_ports, wait_status
from .test_crash_recovery import in_call

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def end_sessions_of(pid: int) -> int:
    """pg_terminate_backend of every session the process holds -> how many."""
    ports = sorted(tcp_local_ports(pid))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE client_port = ANY(%s)",
            [ports],
        )
        return cursor.fetchone()[0]


def test_a_run_whose_database_connection_breaks_carries_on_without_a_sweeper(fleet):
    fleet.worker(2)  # and no sweeper
    task = enqueued_task(
        [
            {"call": "ledger_append", "args": {"key": "before", "value": "paid"}},
            {"call": "sleep", "args": {"seconds": 1.5}},
            {"call": "ledger_append", "args": {"key": "after", "value": "shipped"}},
            {"final": "done"},
        ],
        ["ledger_append", "sleep"],
    )
    wait_for(lambda: in_call(task, "sleep"), message="the sleep to start")
    worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task.id)
    horse = int(worker_id.rsplit(":", 1)[1])
    assert end_sessions_of(horse) >= 1

    task = wait_status(task.id, "succeeded", timeout=60)

    requeued = TaskEvent.objects.get(task=task, type="requeued")
    assert requeued.payload["cause"] == "connection_lost"
    assert task.lease_epoch == 2 and task.redispatch_count == 0
    assert [r["value"] for r in ledger_records(key="before")] == ["paid"]
    assert [r["value"] for r in ledger_records(key="after")] == ["shipped"]
