"""A task's trace (harness_base/telemetry/ has the plumbing).

One trace per task group: its id is the root task's id (a UUID is 128 random bits, as a trace
id is), and `gen_ai.conversation.id` is the root task id too. Each run segment of a task (one
acquisition of its lease: a job) is one `invoke_agent` span whose id is derived from the task
id and the lease epoch. So a segment that starts after a pause of any length (a review, a
retry's backoff, an operator's rollback) knows, without anything stored, the trace it belongs
to, its parent (the group's first segment) and the span it follows from (the task's previous
segment, the one that paused), which it links to.

Span events mirror TaskEvents (`event_traced`, called by `tasks.services.event_build`, the one
function that makes events): those made inside the task's own run go on its current span at
once; those made elsewhere while it waited (a review decided in a web request, expired by the
sweep, an operator's rollback) go on the next segment's span when it starts (`_replay`), with
the time they happened."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from harness_base import telemetry
from tasks.events import EventType
from tasks.models import Task, TaskEvent
from tasks.selectors import group_root
from tasks.states import TaskStatus


def segment_span_id(task_id: Any, epoch: int) -> int:
    """The span id of the run segment of `task_id` that holds lease epoch `epoch`."""
    digest = hashlib.sha256(f"{task_id}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def trace_id_hex(root_id: Any) -> str:
    """The trace id (32 hex digits) of the group whose root task is `root_id`."""
    hex_id: str = root_id.hex
    return hex_id


def task_trace_id(task: Task) -> str:
    return trace_id_hex(task.id if task.parent_id is None else group_root(task).id)


def task_trace(task: Task) -> dict[str, str] | None:
    """What the task page shows of the task's trace: its id, and a link to it when
    HARNESS_TRACE_URL_TEMPLATE is set. None before the task ran, or while traces are off and
    no template is set."""
    template = settings.HARNESS_TRACE_URL_TEMPLATE
    if task.started_at is None or not (template or telemetry.enabled()):
        return None
    trace_id = task_trace_id(task)
    return {"id": trace_id, "url": template.replace("{trace_id}", trace_id) if template else ""}


def agent_name(task: Task) -> str:
    """`gen_ai.agent.name`: a sub-agent's name, a registered agent's or graph's, else `harness`."""
    agent = (task.spec or {}).get("agent") or {}
    return task.agent_name or agent.get("name") or agent.get("graph") or "harness"


@contextmanager
def task_segment(task: Task) -> Iterator[Any]:
    """One run segment of `task` (its lease taken): the `invoke_agent` span, current for the
    block, and the log context (task id, trace id) of everything the run logs. Its spans are
    flushed when it ends (bounded: telemetry.FLUSH_TIMEOUT_S): a work horse ends with
    os._exit, so what it traced is exported then or never."""
    root_id = task.id if task.parent_id is None else group_root(task).id
    with telemetry.log_context(task_id=task.id, trace_id=trace_id_hex(root_id)):
        if not telemetry.enabled():
            yield None
            return
        try:
            with _segment_span(task, root_id) as span:
                yield span
        finally:
            telemetry.flush()


@contextmanager
def _segment_span(task: Task, root_id: Any) -> Iterator[Any]:
    trace_id, epoch = root_id.int, task.lease_epoch
    first = task.id == root_id and epoch <= 1
    name = agent_name(task)
    with telemetry.span(
        f"invoke_agent {name}",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": str(task.id),
            "gen_ai.conversation.id": str(root_id),
            "harness.task.id": str(task.id),
            "harness.run.epoch": epoch,
        },
        parent=None if first else (trace_id, segment_span_id(root_id, 1)),
        links=[(trace_id, segment_span_id(task.id, epoch - 1))] if epoch > 1 else (),
        ids=(trace_id if first else None, segment_span_id(task.id, epoch)),
    ) as span:
        if epoch > 1:
            _replay(task)
        yield span


def _replay(task: Task) -> None:
    """The span events of what happened to the task since its previous segment ended (its
    last transition out of `running`), made by other processes."""
    ended = (
        TaskEvent.objects.filter(
            task_id=task.id, type=EventType.STATUS, payload__from=TaskStatus.RUNNING
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    if ended is None:
        return
    for event in TaskEvent.objects.filter(
        task_id=task.id, id__gt=ended, type__in=list(SPAN_EVENTS)
    ).order_by("id"):
        _emit(event)


def event_traced(event: TaskEvent) -> None:
    """The span event of a TaskEvent made inside its task's own run (others: `_replay`)."""
    if event.type in SPAN_EVENTS and telemetry.active_task() == str(event.task_id):
        _emit(event)


def _emit(event: TaskEvent) -> None:
    name, attributes = SPAN_EVENTS[event.type]
    telemetry.span_event(name, attributes(event), at=event.created_at)


def _call(payload: dict[str, Any]) -> dict[str, Any]:
    return {"gen_ai.tool.call.id": payload.get("call_id"), "gen_ai.tool.name": payload.get("tool")}


def _review_requested(event: TaskEvent) -> dict[str, Any]:
    p = event.payload
    return {
        **_call(p),
        "harness.review.rules": [
            str(rule.get("name") if isinstance(rule, dict) else rule)
            for rule in p.get("rules") or []
        ],
        "harness.review.reason": str(p.get("reason") or "")[:500],
    }


def _review_decided(event: TaskEvent) -> dict[str, Any]:
    p = event.payload
    return {
        **_call(p),
        "harness.review.id": p.get("review_id"),
        "harness.review.decision": p.get("decision"),
        "harness.review.decider": event.actor or None,
        "harness.review.wait_s": p.get("wait_s"),
        "harness.review.arguments_hash": p.get("arguments_hash"),
        "harness.review.edited": p.get("edited"),
    }


def _review_expired(event: TaskEvent) -> dict[str, Any]:
    p = event.payload
    return {
        **_call(p),
        "harness.review.id": p.get("review_id"),
        "harness.review.decision": "expired",
        "harness.review.on_expiry": p.get("on_expiry"),
        "harness.review.wait_s": p.get("wait_s"),
        "harness.review.arguments_hash": p.get("arguments_hash"),
    }


def _retry_scheduled(event: TaskEvent) -> dict[str, Any]:
    p = event.payload
    return {
        "gen_ai.tool.call.id": p.get("call_id"),
        "harness.retry.attempt": p.get("attempt"),
        "harness.retry.delay_s": p.get("delay_s"),
        "error.type": p.get("error_class"),
    }


def _rollback(event: TaskEvent) -> dict[str, Any]:
    p = event.payload
    return {
        "harness.rollback.actor": event.actor or None,
        "harness.rollback.from_seq": p.get("from_seq"),
        "harness.rollback.checkpoint_id": p.get("checkpoint_id"),
        "harness.rollback.resume": p.get("resume"),
        "harness.rollback.calls_undone": p.get("calls_undone"),
        "harness.rollback.group": event.type == EventType.GROUP_ROLLBACK,
    }


def _global_checkpoint(event: TaskEvent) -> dict[str, Any]:
    p = event.payload
    return {
        "harness.global_checkpoint.id": p.get("global_checkpoint_id"),
        "harness.global_checkpoint.seq": p.get("seq"),
        "harness.global_checkpoint.trigger": p.get("trigger"),
        "harness.global_checkpoint.participants": p.get("participants"),
    }


# TaskEvent type -> (span event name, its attributes).
SPAN_EVENTS: dict[str, tuple[str, Callable[[TaskEvent], dict[str, Any]]]] = {
    EventType.REVIEW_REQUESTED: ("harness.review.requested", _review_requested),
    EventType.REVIEW_DECIDED: ("harness.review.decided", _review_decided),
    EventType.REVIEW_EXPIRED: ("harness.review.expired", _review_expired),
    EventType.RETRY_SCHEDULED: ("harness.retry.scheduled", _retry_scheduled),
    EventType.ROLLBACK: ("harness.rollback", _rollback),
    EventType.GROUP_ROLLBACK: ("harness.rollback", _rollback),
    EventType.GLOBAL_CHECKPOINT: ("harness.global_checkpoint.committed", _global_checkpoint),
}


def checkpoints_traced(checkpoints: list[Any]) -> None:
    """`harness.checkpoint.written` on the current span, for checkpoints just written."""
    if not telemetry.enabled():
        return
    for checkpoint in checkpoints:
        telemetry.span_event(
            "harness.checkpoint.written",
            {
                "harness.checkpoint.id": str(checkpoint.id),
                "harness.checkpoint.seq": checkpoint.seq,
                "harness.checkpoint.level": checkpoint.level,
                "harness.checkpoint.trigger": checkpoint.trigger,
            },
        )
