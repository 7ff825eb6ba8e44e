"""The API's shapes of a task and of an error, shared by every app's router."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from ninja import Schema

from tasks.models import Task


class ErrorOut(Schema):
    detail: str
    errors: list[dict[str, str]] | None = None


# The error responses of an operation that can be refused, missing, conflicting or invalid.
ERRORS = {403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut}


class TaskOut(Schema):
    id: UUID
    title: str
    goal: str
    status: str
    priority: str
    current_step: int
    steps_used: int
    tokens_used: int
    cost_usd: float
    seconds_used: float
    result: str
    error_class: str
    error_message: str
    created_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    heartbeat_at: datetime | None
    worker_id: str
    attempt: int
    redispatch_count: int
    retry_count: int
    rollback_count: int
    # Calls a person rejected, and approved with edited arguments.
    calls_rejected: int
    calls_edited: int
    retry_at: datetime | None
    cancel_requested: bool
    head_checkpoint: UUID | None
    spec: dict[str, Any]
    # Multi-agent groups: the parent that delegated to this task, and the tasks it delegated to.
    parent_id: UUID | None
    # A sibling forked from this task's checkpoint (checkpoints.fork) names it.
    fork_of_id: UUID | None = None
    # A plan task (`"mode": "plan"`, docs/plans.md): planning (its dry run), executing (its
    # plan approved) or rejected; "" for any other task. Its plan: GET /tasks/{id}/plan.
    plan_phase: str = ""
    agent_name: str
    children: list[UUID]

    @staticmethod
    def resolve_children(obj: Task) -> list[UUID]:
        # A list prefetches them (tasks.selectors.tasks_list(with_children=True)).
        if "children" in getattr(obj, "_prefetched_objects_cache", {}):
            return [child.id for child in obj.children.all()]
        return list(obj.children.order_by("created_at").values_list("id", flat=True))

    @staticmethod
    def resolve_created_by(obj: Task) -> str | None:
        return obj.created_by.get_username() if obj.created_by_id and obj.created_by else None

    @staticmethod
    def resolve_head_checkpoint(obj: Task) -> UUID | None:
        return obj.head_checkpoint_id
