"""A worker forks its next work horse while it waits for a job (agent.worker.Standby): the horse
connects to PostgreSQL before the job arrives. A session that ended while it waited (a server
restart, an idle timeout, a network cut) must not fail the job, and a worker that stops must
not leave its waiting horse behind."""

from __future__ import annotations

import os
import signal

import pytest
from django.db import connection

from tasks.models import Task
from tests.conftest import child_pids, wait_for
from tests.factories import enqueued_task

from .conftest import process_alive, tcp_local_ports, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def database_sessions(pid: int) -> list[int]:
    """The server pids of the PostgreSQL sessions the process `pid` has open."""
    ports = tcp_local_ports(pid)
    if not ports:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", [sorted(ports)]
        )
        return [row[0] for row in cursor.fetchall()]


def waiting_horse(worker_pid: int) -> int | None:
    """The worker's forked horse once it is connected to the database and waits for a job."""
    for pid in child_pids(worker_pid):
        try:
            own_group = os.getpgid(pid) == pid  # as RQ's horse (the scheduler shares the worker's)
        except ProcessLookupError:
            continue
        if own_group and process_alive(pid) and database_sessions(pid):
            return pid
    return None


def test_a_horse_whose_database_session_ended_while_it_waited_runs_the_next_task(fleet):
    (worker,) = fleet.worker()
    horse = wait_for(lambda: waiting_horse(worker.pid), message="the worker's waiting horse")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
            [database_sessions(horse)],
        )
    wait_for(lambda: not database_sessions(horse), message="the horse's session to end")

    task = enqueued_task([{"final": "done"}])

    task = wait_status(task.id, "succeeded", "failed", timeout=60)
    assert task.status == "succeeded", (task.error_class, task.error_message)
    # The horse that waited ran it (with a new session), not one forked for the job.
    assert Task.objects.values_list("worker_id", flat=True).get(id=task.id).endswith(f":{horse}")


def test_a_worker_that_stops_ends_its_waiting_horse(fleet):
    (worker,) = fleet.worker()
    horse = wait_for(lambda: waiting_horse(worker.pid), message="the worker's waiting horse")

    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=30)

    wait_for(lambda: not process_alive(horse), timeout=10, message="the waiting horse to end")
