"""A process that stops talking to PostgreSQL in the middle of a transaction (its host frozen,
cut off by a partition, powered off) leaves the server waiting for it, its row locks held:
PostgreSQL notices a silent client only through TCP keepalives (two hours by default), and a
frozen one never, since its kernel still answers them. The harness's sessions ask the server
to end a session idle in a transaction for HARNESS_DB_IDLE_IN_TRANSACTION_S, so the locks are
let go and the sweep recovers the task (before, the chaos suite's partition saw a sweep held up
until the link came back)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from agent.sweep import sweep_once
from tasks.models import Task
from tasks.services import task_acquire
from tests.conftest import ROOT, database_url_for_subprocess, wait_for
from tests.factories import enqueued_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Locks the task's row in a transaction, says so, then freezes itself (SIGSTOP) mid-transaction.
FROZEN_HOLDER = """
import os, signal, sys
import django
django.setup()
from django.db import connection, transaction
with transaction.atomic():
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tasks_task WHERE id = %s FOR UPDATE", [sys.argv[1]])
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
"""


def frozen_lock_holder(task_id, *, idle_s: str) -> subprocess.Popen:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="harness_site.settings",
        PYTHONPATH=str(ROOT),
        DATABASE_URL=database_url_for_subprocess(),
        HARNESS_DB_IDLE_IN_TRANSACTION_S=idle_s,
    )
    process = subprocess.Popen(
        [sys.executable, "-c", FROZEN_HOLDER, str(task_id)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "locked"
    return process


def stale_running_task() -> Task:
    task = enqueued_task([{"final": "x"}], [])
    task_acquire(task_id=task.id, worker_id="frozen-host:1")
    Task.objects.filter(id=task.id).update(heartbeat_at=timezone.now() - timedelta(seconds=30))
    return task


def test_a_frozen_client_s_transaction_ends_and_the_sweep_recovers_its_task(queue):
    task = stale_running_task()
    holder = frozen_lock_holder(task.id, idle_s="1")
    try:
        assert sweep_once().stalled == 0  # the row is locked: the sweep leaves it this pass

        wait_for(
            lambda: sweep_once().redispatched == 1,
            timeout=30,
            message="the frozen client's session to end and the sweep to redispatch the task",
        )
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    task.refresh_from_db()
    assert task.status == "queued" and task.redispatch_count == 1
