"""Workers killed with SIGKILL (the whole process group: worker, work-horse, scheduler) while a
task runs: the sweep notices the silent heartbeat, redispatches from the newest checkpoint, and
no side effect runs twice."""

from __future__ import annotations

import fcntl
import os

import pytest
from django.db import transaction

from agent.tools.testing import ledger_path, ledger_records
from review.models import ReviewRequest
from review.services import review_resolve_unknown_outcome
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall
from tests.conftest import wait_for
from tests.factories import enqueued_task

from .conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def call_status(task: Task, tool: str, index: int = 0) -> str | None:
    calls = list(ToolCall.objects.filter(task=task, tool=tool).order_by("id"))
    return calls[index].status if len(calls) > index else None


def in_call(task: Task, tool: str, index: int = 0) -> bool:
    """The `index`-th call of `tool` was proposed (committed with the model's decision) and has
    not finished. Read-only tools record nothing before they run, so the events tell."""
    proposed = [
        c["call_id"]
        for e in task.events.filter(type="model_decision").order_by("id")
        for c in e.payload["calls"]
        if c["tool"] == tool
    ]
    if len(proposed) <= index:
        return False
    return not task.events.filter(type="tool_finished", payload__call_id=proposed[index]).exists()


def status_changes(task: Task) -> list[tuple[str, str]]:
    return [
        (e.payload["from"], e.payload["to"])
        for e in task.events.filter(type="status").order_by("id")
    ]


class LedgerLock:
    """Holds the external ledger's lock: a `ledger_append` call blocks inside, after its
    intent is recorded and before its effect, until released."""

    def __init__(self) -> None:
        path = ledger_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def test_worker_killed_during_sleep_is_stalled_redispatched_and_completes(fleet):
    fleet.worker(2)
    fleet.sweeper()
    task = enqueued_task([{"call": "sleep", "args": {"seconds": 2}}, {"final": "slept"}], ["sleep"])
    wait_for(lambda: in_call(task, "sleep"), message="sleep to start")
    fleet.kill_worker_of(task.id)

    task = wait_status(task.id, "succeeded")
    changes = status_changes(task)
    assert ("running", "stalled") in changes and ("stalled", "queued") in changes
    assert task.redispatch_count == 1 and task.lease_epoch == 2
    assert task.events.filter(type="redispatched").count() == 1
    # Forward recovery: resumed from the checkpoint after the model's decision, the call ran
    # again under the call_id the model's (single, recorded) decision gave it.
    resumed = task.events.get(type="resumed")
    assert resumed.payload["phase"] == "tools"
    (decision,) = task.events.filter(type="model_decision", payload__turn=1)
    call = ToolCall.objects.get(task=task)
    assert call.status == "succeeded" and call.call_id == decision.payload["calls"][0]["call_id"]


LEDGER_SCRIPT = [
    {"call": "sleep", "args": {"seconds": 1}},
    {"call": "ledger_append", "args": {"key": "k", "value": "paid"}},
    {"call": "sleep", "args": {"seconds": 1}},
    {"final": "done"},
]


@pytest.mark.parametrize(
    "point", ["before_intent", "after_intent", "after_effect", "after_outcome"]
)
def test_worker_killed_around_ledger_append_never_duplicates_the_side_effect(
    fleet, operator, point
):
    fleet.worker(2)
    fleet.sweeper()
    task = enqueued_task(LEDGER_SCRIPT, ["sleep", "ledger_append"])

    if point == "before_intent":
        wait_for(lambda: in_call(task, "sleep"), message="first sleep")
        fleet.kill_worker_of(task.id)
    elif point == "after_intent":
        lock = LedgerLock()
        try:
            wait_for(lambda: call_status(task, "ledger_append") == "running", message="intent")
            fleet.kill_worker_of(task.id)
        finally:
            lock.release()
        assert ledger_records(key="k") == []
    elif point == "after_effect":
        lock = LedgerLock()
        try:
            wait_for(lambda: call_status(task, "ledger_append") == "running", message="intent")
            with transaction.atomic():
                # Holding the task row keeps the worker from recording the outcome...
                Task.objects.select_for_update().get(id=task.id)
                lock.release()
                wait_for(lambda: ledger_records(key="k"), message="the side effect")
                # ...and its database sessions die with it, a statement it sent waiting for
                # the row included, as when a machine dies before its write reaches the
                # database.
                fleet.kill_worker_of(task.id, terminate_backends=True)
        finally:
            lock.release()
    else:
        wait_for(lambda: in_call(task, "sleep", 1), message="second sleep")
        assert call_status(task, "ledger_append") == "succeeded"
        fleet.kill_worker_of(task.id)

    task = wait_status(task.id, "succeeded", "waiting_review", timeout=60)
    if point in ("after_intent", "after_effect"):
        # A non-idempotent call whose outcome is unknown goes to a human, never re-run blindly.
        assert task.status == "waiting_review"
        call = ToolCall.objects.get(task=task, tool="ledger_append")
        assert call.status == "unknown_outcome"
        review = ReviewRequest.objects.get(task=task, status="pending")
        assert review.kind == "unknown_outcome" and review.tool_call_id == call.id
        # The operator checks the external system: done there -> mark done, else re-run.
        decision = "mark_done" if ledger_records(key="k") else "rerun"
        assert decision == ("rerun" if point == "after_intent" else "mark_done")
        review_resolve_unknown_outcome(
            review_id=review.id,
            user=operator,
            decision=decision,
            arguments_hash=canonical_hash(review.arguments),
            comment="checked the ledger",
        )
        task = wait_status(task.id, "succeeded", timeout=60)

    assert task.status == "succeeded" and task.redispatch_count >= 1
    records = ledger_records(key="k")
    call = ToolCall.objects.get(task=task, tool="ledger_append")
    assert call.status == "succeeded"
    assert [r["idempotency_key"] for r in records] == [f"{task.id}:{call.call_id}"]
