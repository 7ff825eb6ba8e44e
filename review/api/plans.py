"""`GET /api/v1/tasks/{id}/plan`: a plan task's plan (issue #46) with every item's state."""

from __future__ import annotations

from typing import Any

from ninja import Router, Schema, Status

from harness_base.http import AuthedRequest
from review import selectors
from review.api.schemas import ErrorOut
from tasks.selectors import access_task

router = Router()


class PlanItemOut(Schema):
    id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    preview: str
    risk: str
    rules: list[dict[str, Any]]
    # The dry run answered this call as simulated / it came after a simulated result.
    simulated: bool
    after_simulated: bool
    # pending (not decided yet), approved, rejected, edited, then executed, or departed.
    state: str
    # The decision on this item ({"decision": approve | reject | edit, ...}); null: pending.
    decision: dict[str, Any] | None
    # An edited item: the preview of the edited call against the workspace at the decision
    # ("" for any other item).
    edited_preview: str
    # How the execution run departed from this item ("" if it did not).
    departed: str
    # The execution run's calls matched to this item.
    calls: list[str]


class PlanOut(Schema):
    review_id: int
    # The plan review's status: pending, approved, rejected.
    status: str
    plan_hash: str
    # The dry run's usage: tokens, cost_usd, steps.
    estimate: dict[str, Any]
    # planning, executing or rejected.
    phase: str
    items: list[PlanItemOut]


@router.get(
    "tasks/{task_id}/plan",
    response={200: PlanOut, 404: ErrorOut},
    operation_id="review_api_task_plan",
)
def task_plan(request: AuthedRequest, task_id: str) -> Status[Any]:
    """A plan task's plan (its `plan` review) with every item's state; 404 before its dry run
    has ended, or for a task that is not a plan task."""
    plan = selectors.task_plan(task=access_task(request.user, task_id))
    if plan is None:
        return Status(404, {"detail": "this task has no plan (yet)"})
    return Status(200, plan)
