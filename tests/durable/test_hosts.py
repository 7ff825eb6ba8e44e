"""Workers on two hosts (bench/hosts/: network and mount namespaces of their own, sharing only
PostgreSQL, Redis and the outside world's ledger). Host A's network is cut in the middle of a
call: host B finishes the task from the checkpoint and blob store alone, every side effect runs
once, and host A, healed, writes nothing more: its lease epoch is fenced, and its worker does
not touch a task another host holds now."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from agent.tools.testing import ledger_records
from bench.common import BenchError
from bench.hosts import Host, Network, unavailable
from tasks.models import Task, ToolCall
from tests.conftest import database_url_for_subprocess, wait_for
from tests.factories import enqueued_task

from .conftest import process_alive, wait_status
from .test_crash_recovery import LedgerLock, call_status, in_call, status_changes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "-"),
]

SCRIPT = [
    {"call": "ledger_append", "args": {"key": "paid", "value": "order 1"}},
    {"call": "write_file", "args": {"path": "notes.txt", "content": "written on host A\n"}},
    {"call": "sleep", "args": {"seconds": 3}},
    {"call": "read_file", "args": {"path": "notes.txt"}},
    {"call": "ledger_append", "args": {"key": "shipped", "value": "order 1"}},
    {"final": "done"},
]
TOOLS = ["ledger_append", "write_file", "sleep", "read_file"]


@pytest.fixture
def network(durable_settings, queue, tmp_path) -> Iterator[Network]:
    """Two hosts' worth of network on this test's database and Redis database; each host's
    processes get the test's fast clocks, harness.yaml and ledger, and a disk of their own."""
    env = {k: v for k, v in durable_settings.items() if k != "HARNESS_WORKSPACE_ROOT"}
    env["HARNESS_WORKER_PRELOAD"] = "none"
    try:
        net = Network(
            database_url=database_url_for_subprocess(),
            redis_url=settings.REDIS_URL,
            env=env,
            run_dir=tmp_path,
        )
    except BenchError as exc:
        pytest.skip(str(exc))
    with net:
        try:
            yield net
        finally:
            print(net.logs())


def host_of(task_id: Any, hosts: list[Host]) -> Host | None:
    worker_id = Task.objects.values_list("worker_id", flat=True).get(id=task_id)
    return next((h for h in hosts if worker_id.startswith(f"{h.hostname}:")), None)


def sees(host: Host, path: Any) -> bool:
    return subprocess.run(host.command(["test", "-e", str(path)])).returncode == 0


@pytest.mark.parametrize("horse", ["writes", "stuck"])
def test_a_partitioned_host_loses_its_task_to_another_and_healed_writes_nothing(network, horse):
    """`writes`: A's horse, healed, sends the writes the partition held up (they are fenced).
    `stuck`: A's horse is still stuck when A comes back (in a tool, or in a write), so A's
    worker kills it as unresponsive while B holds the task: it must neither record that on
    the task nor take the task back from B."""
    # Both hosts alike, each with a worker and a sweeper (several sweepers are safe). `stuck`
    # takes the frozen-horse tests' grace (room for a loaded machine's bookkeeping); `writes`
    # the default (a minute), so that nothing but the fence stops A's horse.
    grace = {"HARNESS_HORSE_GRACE_S": "5"} if horse == "stuck" else {}
    hosts = [network.host(name, env=grace) for name in ("x", "y")]
    for host in hosts:
        host.start_worker(wait=False)
        host.start_sweeper()
    network.wait_workers()
    task = enqueued_task(SCRIPT, TOOLS)
    wait_for(lambda: in_call(task, "sleep"), message="a host to be in the sleep")
    a = host_of(task.id, hosts)  # whichever took it is "A"
    (b,) = [h for h in hosts if h is not a]
    (horse_a,) = [pid for pid in a.pids() if _worker_id(task) == f"{a.hostname}:{pid}"]

    lock = LedgerLock()  # B's `shipped` will wait inside the call, after its intent
    try:
        a.partition()
        wait_for(
            lambda: call_status(task, "ledger_append", 1) == "running",
            timeout=30,
            message="host B to be inside the second ledger_append",
        )
        assert host_of(task.id, hosts) is b
        horse_b = int(_worker_id(task).rsplit(":", 1)[1])
        if horse == "stuck":
            os.kill(horse_a, signal.SIGSTOP)
        # A comes back while B holds the task.
        a.heal()
        wait_for(lambda: not process_alive(horse_a), timeout=30, message="A's horse to end")
        wait_for(lambda: _idle(network, a), timeout=30, message="A's worker to be idle")
    finally:
        lock.release()

    if horse == "writes":  # its held-up writes reached the database and were refused
        assert "stopping without further writes" in a.logs()  # lease lost (or found taken)
    task = wait_status(task.id, "succeeded", timeout=30)
    # Each effect once: `paid` by A before the cut, `shipped` by B.
    paid, shipped = ledger_records(key="paid"), ledger_records(key="shipped")
    assert len(paid) == 1 and len(shipped) == 1
    assert paid[0]["pid"] == horse_a and shipped[0]["pid"] == horse_b
    # One loss of the lease (stalled by B's sweeper), one redispatch, nothing from A after.
    assert task.redispatch_count == 1 and task.lease_epoch == 2
    assert status_changes(task) == [
        ("pending", "queued"),
        ("queued", "running"),
        ("running", "stalled"),
        ("stalled", "queued"),
        ("queued", "running"),
        ("running", "succeeded"),
    ]
    assert not task.events.filter(type="horse_unresponsive").exists()
    finished = [
        p["call_id"]
        for p in task.events.filter(type="tool_finished").values_list("payload", flat=True)
    ]
    assert len(finished) == len(set(finished)) == len(SCRIPT) - 1
    # A wrote the file before the cut; B, which never ran that call, rebuilt A's workspace
    # from the checkpoint and blob store: A's disk is not visible on B.
    write = ToolCall.objects.get(task=task, tool="write_file")
    assert write.status == "succeeded" and write.attempts == 1
    assert not sees(b, a.disk) and not sees(a, b.disk)
    rebuilt = b.disk / "workspaces" / str(task.id) / "notes.txt"
    assert rebuilt.read_text() == "written on host A\n"


def _worker_id(task: Task) -> str:
    return Task.objects.values_list("worker_id", flat=True).get(id=task.id)


def _idle(network: Network, host: Host) -> bool:
    from rq import Worker

    pids = {p.pid for p in host.workers}
    states = [w.get_state() for w in Worker.all(connection=network.redis()) if w.pid in pids]
    return bool(states) and all(state == "idle" for state in states)
