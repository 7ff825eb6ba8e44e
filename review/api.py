"""`/api/v1/reviews…` endpoints. Thin: parse, call one service or selector, shape the output."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status

from harness_site.api_auth import role_auth
from review import selectors, services
from review.models import ReviewRequest
from tasks.canonical import canonical_hash

router = Router(tags=["reviews"])


class ErrorOut(Schema):
    detail: str
    errors: list[dict[str, str]] | None = None


class ApprovalOut(Schema):
    user: str
    at: datetime
    arguments_hash: str
    comment: str


class ReviewOut(Schema):
    id: int
    task_id: UUID
    task_title: str
    # A sub-agent's review names the parent task that delegated to it.
    parent_task_id: UUID | None
    parent_task_title: str | None
    call_id: str
    tool: str
    risk: str
    kind: str
    status: str
    arguments: dict[str, Any]
    # sha256 hex of the canonical JSON of `arguments`: an approval sends it back.
    arguments_hash: str
    original_arguments: dict[str, Any]
    edited_arguments: dict[str, Any] | None
    matched_rules: list[dict[str, Any]]
    reason: str
    preview: str
    approvals_required: int
    approvals: list[ApprovalOut]
    forbid_creator: bool
    on_expiry: str
    checkpoint_id: UUID | None
    requested_at: datetime
    expires_at: datetime | None
    time_left_s: float | None
    decided_at: datetime | None
    decided_by: str | None
    decision_reason: str
    comment: str
    url: str
    # For a LangGraph interrupt: its id, mode, allowed decisions and, once decided, the answer.
    interrupt: dict[str, Any] | None

    @staticmethod
    def resolve_task_title(obj: ReviewRequest) -> str:
        return obj.task.title

    @staticmethod
    def resolve_parent_task_id(obj: ReviewRequest) -> UUID | None:
        return obj.task.parent_id

    @staticmethod
    def resolve_parent_task_title(obj: ReviewRequest) -> str | None:
        return obj.task.parent.title if obj.task.parent_id else None

    @staticmethod
    def resolve_call_id(obj: ReviewRequest) -> str:
        return obj.tool_call.call_id

    @staticmethod
    def resolve_arguments_hash(obj: ReviewRequest) -> str:
        return canonical_hash(obj.arguments)

    @staticmethod
    def resolve_approvals(obj: ReviewRequest) -> list[dict[str, Any]]:
        return selectors.review_approvers(review=obj)

    @staticmethod
    def resolve_time_left_s(obj: ReviewRequest) -> float | None:
        if obj.expires_at is None or obj.status != "pending":
            return None
        return max(0.0, (obj.expires_at - timezone.now()).total_seconds())

    @staticmethod
    def resolve_decided_by(obj: ReviewRequest) -> str | None:
        return obj.decided_by.get_username() if obj.decided_by_id else None

    @staticmethod
    def resolve_url(obj: ReviewRequest) -> str:
        return services.review_url(review_id=obj.id)


class DecisionIn(Schema):
    # approve | reject; for a call whose outcome is unknown: mark_done | rerun | fail_task.
    # respond: answer a LangGraph interrupt (`response`: any JSON for a plain interrupt, the
    # tool's answer as a string for a HumanInTheLoopMiddleware action).
    decision: Literal["approve", "reject", "respond", "mark_done", "rerun", "fail_task"]
    # approve: the `arguments_hash` of the arguments the decider was shown (required).
    arguments_hash: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")
    comment: str = Field(default="", max_length=10_000)
    arguments: dict[str, Any] | None = None
    reason: str = Field(default="", max_length=200)
    # mark_done: what the call returned, as the operator found it (the model sees it).
    result: Any = None
    response: Any = None


@router.get("reviews", response=list[ReviewOut])
def review_list(
    request: HttpRequest,
    status: str | None = None,
    tool: str | None = None,
    risk: str | None = None,
    task_id: str | None = None,
    limit: int = Query(100, ge=1, le=500),
):
    return selectors.reviews_list(status=status, tool=tool, risk=risk, task=task_id)[:limit]


@router.get("reviews/{review_id}", response=ReviewOut)
def review_get(request: HttpRequest, review_id: str):
    return selectors.access_review(request.user, review_id)


@router.post(
    "reviews/{review_id}/decision",
    auth=role_auth(selectors.user_can_decide, "decide reviews (operators may)"),
    response={200: ReviewOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
)
def review_decision(request: HttpRequest, review_id: str, body: DecisionIn):
    review = selectors.access_review(request.user, review_id)
    try:
        services.review_decide(
            review_id=review.id,
            user=request.user,
            decision=body.decision,
            arguments_hash=body.arguments_hash,
            comment=body.comment,
            arguments=body.arguments,
            reason=body.reason,
            result=body.result,
            response=body.response,
        )
    except services.ReviewError as exc:
        return Status(exc.status, {"detail": exc.message, "errors": exc.errors or None})
    return Status(200, selectors.access_review(request.user, review.id))
