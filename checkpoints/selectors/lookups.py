"""Checkpoint lookups: one checkpoint, the marks the timeline plots, the messages at one."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from checkpoints.history import HistoryBroken, history_expand_state
from checkpoints.models import Checkpoint
from checkpoints.selectors.agent_messages import sdk_messages
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from tasks.agent_state import AgentState, Message
from tasks.errors import NotFound
from tasks.models import Task
from tasks.selectors import as_text


def checkpoint_get(*, task: Task, checkpoint_id: Any) -> Checkpoint:
    """One of the task's checkpoints; `NotFound` for an unknown or malformed id."""
    try:
        return Checkpoint.objects.get(task=task, id=checkpoint_id)
    except (Checkpoint.DoesNotExist, ValueError, TypeError):
        raise NotFound("checkpoint not found") from None
    except Exception as exc:  # a malformed UUID raises ValidationError from the field
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("checkpoint not found") from None
        raise


def task_checkpoint_marks(*, task_id: Any) -> list[dict[str, Any]]:
    """The task's checkpoints (by seq) without their payloads, the time as ISO text in `at`:
    what the timeline plots."""
    return [
        dict(row)
        for row in Checkpoint.objects.filter(task_id=task_id)
        .order_by("seq")
        .values(
            "id", "seq", "level", "trigger", "step_index", "superseded", at=as_text("created_at")
        )
    ]


def checkpoint_supersession_marks(*, task_ids: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    """Each task's checkpoints (by seq) as {seq, superseded, at (datetime)}: enough to tell
    which of its time was abandoned by a rollback (tasks.charts.superseded_ranges)."""
    marks: dict[Any, list[dict[str, Any]]] = {task_id: [] for task_id in task_ids}
    rows = (
        Checkpoint.objects.filter(task_id__in=task_ids)
        .order_by("task_id", "seq")
        .values("task_id", "seq", "superseded", "created_at")
    )
    for row in rows:
        marks[row["task_id"]].append(
            {"seq": row["seq"], "superseded": row["superseded"], "at": row["created_at"]}
        )
    return marks


def task_checkpoints(*, task_id: Any) -> QuerySet[Checkpoint]:
    """The task's checkpoints by seq (payloads deferred until a page of them is verified)."""
    return Checkpoint.objects.filter(task_id=task_id).order_by("seq")


def checkpoint_recent_messages(*, checkpoint: Checkpoint | None, limit: int = 8) -> list[Message]:
    """The agent's last messages at a checkpoint (for a review: what the model had seen when it
    proposed the call). Empty when the checkpoint is gone or corrupt."""
    if checkpoint is None:
        return []
    try:
        state = checkpoint_decode(checkpoint).state
    except CheckpointCorrupted:
        return []
    return [m for m in state_messages(state) if m.role != "system"][-limit:]


def state_messages(state: AgentState) -> list[Message]:
    """The agent's messages in a checkpoint's state: the harness loop's, or an SDK agent's
    own history (Pydantic AI, OpenAI Agents SDK: stored in chunks) as messages; [] when that
    history's chunks cannot be read."""
    if state.messages or not state.sdk:
        return list(state.messages)
    try:
        return sdk_messages(history_expand_state(state.sdk))
    except HistoryBroken:
        return []
