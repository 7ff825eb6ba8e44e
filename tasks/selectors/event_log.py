"""A task's frame log as its pages read it: the events in order, their summaries, those the
timeline draws, the compact view (a tool call's lifecycle in one row), the waits for a person,
the model's decisions by turn and the token the live page's ETags are built on."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from tasks.events import EventType
from tasks.models import Task, TaskEvent
from tasks.selectors.event_fields import as_text, iso_datetime, payload_keys


def task_events(*, task: Task, after: int | None = None) -> QuerySet[TaskEvent]:
    qs = TaskEvent.objects.filter(task=task).order_by("id")
    if after is not None:
        qs = qs.filter(id__gt=after)
    return qs


def task_event_summaries(*, task: Task) -> QuerySet[TaskEvent, Any]:
    """The task's events, oldest first, as dicts {id, type, step_index, actor, created_at,
    <each of _EVENT_KEYS from the payload, or None>} — never the whole payload. Served by
    event_task_seq."""
    return (
        TaskEvent.objects.filter(task=task)
        .order_by("id")
        .values("id", "type", "step_index", "actor", "created_at", **payload_keys())
    )


def task_timeline_events(
    *,
    task: Task,
    types: Iterable[str],
    from_step: int | None = None,
    kept: Iterable[str] = (),
    kept_failed: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The task's events of `types` as for task_event_summaries, with the time as ISO text
    in `at`. With `from_step`: those of the steps from `from_step` on and of no step, and
    from every step those of the `kept` types and those of the `kept_failed` types that carry
    an error class."""
    events = (
        TaskEvent.objects.filter(task=task, type__in=list(types))
        .order_by("id")
        .values("id", "type", "step_index", "actor", at=as_text("created_at"), **payload_keys())
    )
    if from_step is not None:
        events = events.filter(
            Q(step_index__gte=from_step)
            | Q(step_index__isnull=True)
            | Q(type__in=list(kept))
            | Q(type__in=list(kept_failed), error_class__isnull=False)
        )
    return [dict(row) for row in events]


# How a call's lifecycle events read in the compact view; others show their type.
_CALL_STAGES = {
    "review_requested": "awaiting review",
    "tool_started": "running",
    "tool_replayed": "replayed",
    "tool_rerun_idempotent": "re-run (idempotent)",
}


def _call_stage(event: dict[str, Any]) -> str:
    kind = event["type"]
    if kind == "tool_started":
        attempt = event.get("attempt")
        return "running" if str(attempt or "1") == "1" else f"running (attempt {attempt})"
    if kind == "tool_finished":
        return str(event.get("status") or "finished")
    if kind == "tool_refused":
        return f"refused: {event.get('error_class') or ''}".rstrip(": ")
    return _CALL_STAGES.get(kind) or str(event.get("decision") or kind.replace("_", " "))


def task_events_compact(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The event summaries with each tool call's lifecycle (proposed → awaiting review →
    approved → running → succeeded) folded into one row, placed where the call first
    appeared. Rows: {"call": True, call_id, tool, stages, ...} or the event itself."""
    rows: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        call_id = event.get("call_id")
        if not call_id:
            rows.append({"call": False, **event})
            continue
        row = calls.get(call_id)
        if row is None:
            row = calls[call_id] = {
                "call": True,
                "call_id": call_id,
                "tool": event.get("tool") or "",
                "step_index": event["step_index"],
                "created_at": event["created_at"],
                "id": event["id"],
                "stages": ["proposed"],
                "error_class": "",
                "last_at": event["created_at"],
                "duration_ms": None,
            }
            rows.append(row)
        row["stages"].append(_call_stage(event))
        row["last_at"] = event["created_at"]
        row["error_class"] = event.get("error_class") or row["error_class"]
        if event.get("duration_ms") is not None:
            row["duration_ms"] = event["duration_ms"]
    return rows


def task_change_token(*, task: Task) -> str:
    """Changes whenever anything the task page shows about the task changes: its row (status,
    step, usage, head checkpoint; `updated_at` moves on every write) or its frame log (the
    newest event id, from event_task_seq). The live page's ETags are built on it."""
    last_event = (
        TaskEvent.objects.filter(task=task).order_by("-id").values_list("id", flat=True).first()
    )
    return f"{task.status}:{task.updated_at.isoformat()}:{task.head_checkpoint_id}:{last_event}"


# The statuses in which a task waits for a person, each with the word the pages use for it.
_WAITS = {"waiting_review": "review", "held": "held"}


def task_wait_times(events: Iterable[dict[str, Any]], *, now: datetime) -> dict[str, float]:
    """Seconds spent waiting for a review and on hold, kept apart (a held task never waited
    for a review), from the task's `status` events (dicts with `at` as ISO text, `to`)."""
    totals = dict.fromkeys(_WAITS.values(), 0.0)
    waiting: str | None = None
    since: datetime | None = None
    for event in events:
        if event["type"] != "status":
            continue
        at = iso_datetime(event["at"])
        if waiting is not None and since is not None and at is not None:
            totals[waiting] += max(0.0, (at - since).total_seconds())
        waiting, since = _WAITS.get(event["to"]), at
    if waiting is not None and since is not None:
        totals[waiting] += max(0.0, (now - since).total_seconds())
    return totals


def model_decisions_by_turn(*, task_id: Any) -> dict[int, dict[str, Any]]:
    """{turn number (1-based): model_decision payload} for a task; after a rollback the newest
    decision of a turn wins (the one the task went on with)."""
    turns: dict[int, dict[str, Any]] = {}
    for payload in (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.MODEL_DECISION)
        .order_by("id")
        .values_list("payload", flat=True)
    ):
        turn = payload.get("turn")
        if isinstance(turn, int):
            turns[turn] = payload
    return turns
