"""Running tasks whose heartbeat is stale: stalled, then redispatched, canceled (a cancel
requested before the worker died) or failed (redispatched too often)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from agent.sweep.counts import SweepCounts
from harness_base.metrics import REDISPATCHES, metric_inc
from tasks import services
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.states import TaskStatus
from tasks.tools.registry import UnknownTool, registry


def _call_fate(*, tool: str, outcome: str) -> str:
    """What becomes of a call that was running when its worker died (agent.runtime.call_again
    acts on it when the task resumes)."""
    if outcome != "redispatched":
        return "unknown_outcome" if outcome == "failed" else "canceled"
    try:
        idempotent = registry.get(tool).idempotent
    except UnknownTool:  # an MCP server's tool: its annotations decide on resume
        return "decided_on_resume"
    return "rerun" if idempotent else "unknown_outcome_review"


def _worker_lost_record(*, task: Task, silent_s: float, outcome: str) -> None:
    """The task's log says its worker died (its heartbeat went silent) and what became of the
    calls it was running."""
    calls = ToolCall.objects.filter(task_id=task.id, status=ToolCallStatus.RUNNING)
    services.event_record(
        task_id=task.id,
        type=EventType.WORKER_LOST,
        payload={
            "worker": task.worker_id,
            "silent_s": round(silent_s, 3),
            "outcome": outcome,
            "calls": [
                {
                    "call_id": call.call_id,
                    "tool": call.tool,
                    "fate": _call_fate(tool=call.tool, outcome=outcome),
                }
                for call in calls.order_by("id")
            ],
        },
        step_index=task.current_step,
    )


def task_recover_stalled(
    *, task_id: Any, stale_after_s: float, max_redispatches: int, worker_id: str | None = None
) -> str:
    """Stall a running task whose heartbeat is stale, then redispatch, cancel or fail it.
    Returns what happened: "redispatched", "failed", "canceled" or "" (it was not stale after
    all, or another sweeper holds it). With `worker_id`, only while that worker holds the task:
    a worker recovering the task of the horse it killed must not take it from the worker that
    holds it now (it was stalled and redispatched while this one was frozen or cut off)."""
    held = {"worker_id": worker_id} if worker_id is not None else {}
    with transaction.atomic():
        # Lock contract: the task row, re-checked under the lock (it may have heartbeated since
        # it was listed); skip_locked leaves a row another sweeper is handling to that sweeper.
        task = (
            Task.objects.select_for_update(skip_locked=True)
            .filter(
                id=task_id,
                status=TaskStatus.RUNNING,
                heartbeat_at__lt=Now() - timedelta(seconds=stale_after_s),
                **held,
            )
            .first()
        )
        if task is None:
            return ""
        # Not null: the row matched heartbeat_at < now - stale_after_s.
        heartbeat_at = task.heartbeat_at
        assert heartbeat_at is not None
        silent_s = (timezone.now() - heartbeat_at).total_seconds()
        services.task_transition(
            task_id=task.id,
            to=TaskStatus.STALLED,
            reason=f"no heartbeat for {silent_s:.1f}s from worker {task.worker_id or '?'}",
            fields={"worker_id": ""},
            payload={
                "worker": task.worker_id,
                "heartbeat_at": heartbeat_at.isoformat(),
                "epoch": task.lease_epoch,
            },
        )
        outcome = (
            "canceled"
            if task.cancel_requested
            else "failed"
            if task.redispatch_count >= max_redispatches
            else "redispatched"
        )
        if worker_id is None:  # the sweep: nobody heard from the worker; a live one says why
            _worker_lost_record(task=task, silent_s=silent_s, outcome=outcome)
        if task.cancel_requested:
            services.task_transition(
                task_id=task.id,
                to=TaskStatus.CANCELED,
                reason="canceled by operator (worker lost)",
                fields={"error_class": "canceled"},
            )
            return "canceled"
        if task.redispatch_count >= max_redispatches:
            message = (
                f"worker lost {task.redispatch_count + 1} times "
                f"(max redispatches: {max_redispatches})"
            )
            # Nobody will finish these calls: whether they took effect is unknown.
            for row in ToolCall.objects.filter(task_id=task.id, status=ToolCallStatus.RUNNING):
                services.toolcall_transition(
                    call=row,
                    to=ToolCallStatus.UNKNOWN_OUTCOME,
                    fields={
                        "error_class": "unknown_outcome",
                        "error_message": "the task failed while this call was running",
                    },
                )
            services.task_transition(
                task_id=task.id,
                to=TaskStatus.FAILED,
                reason=message,
                fields={"error_class": "stalled", "error_message": message},
            )
            return "failed"
        task = services.task_transition(
            task_id=task.id,
            to=TaskStatus.QUEUED,
            reason=f"redispatch {task.redispatch_count + 1} of {max_redispatches}",
            fields={"redispatch_count": task.redispatch_count + 1},
        )
        services.event_record(
            task_id=task.id,
            type=EventType.REDISPATCHED,
            payload={"redispatch": task.redispatch_count, "max": max_redispatches},
            step_index=task.current_step,
        )
        services.task_enqueue(task=task)
        return "redispatched"


def tasks_recover_stalled(
    *, stale_after_s: float, max_redispatches: int, counts: SweepCounts
) -> None:
    stale_ids = list(
        Task.objects.filter(
            status=TaskStatus.RUNNING, heartbeat_at__lt=Now() - timedelta(seconds=stale_after_s)
        ).values_list("id", flat=True)[:500]
    )
    for task_id in stale_ids:
        outcome = task_recover_stalled(
            task_id=task_id, stale_after_s=stale_after_s, max_redispatches=max_redispatches
        )
        if outcome:
            metric_inc(REDISPATCHES, outcome=outcome)
            counts.stalled += 1
            setattr(counts, outcome, getattr(counts, outcome) + 1)
