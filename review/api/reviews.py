"""`/api/v1/reviews`: the list, one review, and decisions on one review or several."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal
from uuid import UUID

from django.db.models import QuerySet
from ninja import Field, Router, Schema, Status
from ninja.errors import ValidationError
from ninja.params.functions import Query

from harness_base.http import AuthedRequest
from review import selectors, services, triage
from review.api.schemas import ErrorOut, ReviewDetailOut, ReviewOut
from review.models import ReceiptVia, ReviewRequest
from tasks.web.api_auth import role_auth

router = Router()


class RememberIn(Schema):
    # The `id` of one of the review's `suggested_rules`.
    suggestion: str = Field(max_length=100)
    # The day (YYYY-MM-DD, inclusive) or instant the standing rule ends; at most 90 days ahead.
    # Left out: 30 days from now.
    until: str | None = Field(default=None, max_length=40)
    scope: Literal["creator", "everyone"] = "creator"
    # scope "everyone" (every user's tasks) must be confirmed by naming it here: "everyone".
    confirm_scope: Literal["everyone"] | None = None


class PlanItemDecisionIn(Schema):
    decision: Literal["reject", "edit"]
    # reject: the reason, which the model receives.
    comment: str = Field(default="", max_length=2000)
    # edit: the arguments the item runs with instead (checked as any edit).
    arguments: dict[str, Any] | None = None


class DecisionIn(Schema):
    # approve | reject; for a call whose outcome is unknown: mark_done | rerun | fail_task.
    # respond: answer a LangGraph interrupt (`response`: any JSON for a plain interrupt, the
    # tool's answer as a string for a HumanInTheLoopMiddleware action or a tool call at a
    # breakpoint) or a Pydantic AI external call (any JSON: the tool's result). At most
    # 100,000 characters as JSON; under a four-eyes rule not by the task's creator.
    # For a review of kind version_drift: continue | migrate | restart | cancel.
    decision: Literal[
        "approve",
        "reject",
        "respond",
        "mark_done",
        "rerun",
        "fail_task",
        "continue",
        "migrate",
        "restart",
        "cancel",
    ]
    # approve: the `arguments_hash` of the arguments the decider was shown (required).
    arguments_hash: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")
    # approve: the `target_fingerprint.hash` the decider was shown (optional; the targets are
    # re-read either way, and a change is 409 with reason `target_changed`).
    target_hash: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")
    comment: str = Field(default="", max_length=10_000)
    arguments: dict[str, Any] | None = None
    reason: str = Field(default="", max_length=200)
    # mark_done: what the call returned, as the operator found it (the model sees it).
    result: Any = None
    response: Any = None
    # approve: also make a suggested rule a standing rule ("approve and always allow").
    remember: RememberIn | None = None
    # migrate: the name of a migration registered in harness.yaml `migrations:`.
    migration: str | None = Field(default=None, max_length=64)
    # restart: the id of an earlier checkpoint of the task to restart from.
    checkpoint_id: UUID | None = None
    # A review of kind plan: approve needs the `plan_hash` shown; `items` names the items not
    # approved as they are ({"<id>": {"decision": "reject", "comment"} | {"decision": "edit",
    # "arguments"}}); reject rejects the whole plan.
    plan_hash: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")
    items: dict[str, PlanItemDecisionIn] | None = Field(default=None, max_length=1000)


@router.get("reviews", response=list[ReviewOut], operation_id="review_api_review_list")
def review_list(
    request: AuthedRequest,
    status: str | None = None,
    tool: str | None = Query(None, max_length=100),
    risk: str | None = Query(None, max_length=20),
    # A task id (or a piece of its title), as the inbox's `task`; `task_id` is the same filter.
    task: str | None = Query(None, max_length=200),
    task_id: str | None = Query(None, max_length=200),
    # A matched rule's name.
    rule: str | None = Query(None, max_length=100),
    # A username, `me`, or `nobody` (unclaimed).
    claimed_by: str | None = Query(None, max_length=150),
    # `me`: assigned to the caller or to one of their groups.
    assigned: Literal["me"] | None = None,
    # Pending first in this order (oldest first by default), then decided, latest first.
    sort: Literal["age", "newest", "time_left", "risk", "tool"] = "age",
    limit: int = Query(100, ge=1, le=500),
) -> QuerySet[ReviewRequest]:
    if task and task_id and task != task_id:
        raise ValidationError(
            [{"loc": ("query", "task_id"), "msg": "task and task_id name different tasks"}]
        )
    return selectors.reviews_list(
        # `all`, as on the inbox: every status (the default here).
        status=None if status == "all" else status,
        tool=tool,
        risk=risk,
        task=task or task_id,
        rule=rule,
        claimed_by=request.user.get_username() if claimed_by == "me" else claimed_by,
        assigned_to=request.user if assigned == "me" else None,
        sort=sort,
    )[:limit]


class BulkItemIn(Schema):
    id: int
    # The `arguments_hash` of the arguments the decider was shown for this review.
    arguments_hash: str = Field(pattern="^[0-9a-f]{64}$")
    # For a review whose arguments an approval edited: the edited arguments' hash again,
    # saying the decider saw the edit (else approving it in bulk is refused, 409).
    edited_arguments_hash: str = Field(default="", pattern="^([0-9a-f]{64})?$")


class BulkDecisionIn(Schema):
    decision: Literal["approve", "reject"]
    comment: str = Field(default="", max_length=10_000)
    reason: str = Field(default="", max_length=200)
    items: list[BulkItemIn] = Field(min_length=1, max_length=triage.BULK_MAX_ITEMS)


class BulkItemOut(Schema):
    id: int | str
    ok: bool
    # What the single decision endpoint would have answered for this item.
    status_code: int
    error: str
    # The review's status afterwards (`pending`: an approval recorded, more are needed).
    review_status: str


class BulkDecisionOut(Schema):
    results: list[BulkItemOut]


# Registered before `reviews/{review_id}`, whose pattern would take this path too.
@router.post(
    "reviews/bulk-decision",
    auth=role_auth(selectors.user_can_decide, "decide reviews (operators may)"),
    response={200: BulkDecisionOut, 403: ErrorOut, 422: ErrorOut},
    operation_id="review_api_review_bulk_decision",
)
def review_bulk_decision(request: AuthedRequest, body: BulkDecisionIn) -> Status[Any]:
    """Decide several reviews, each exactly as `POST /reviews/{id}/decision` would (its own
    transaction, its hash, four-eyes, creator rule, expiry): one failing fails only itself."""
    try:
        results = triage.reviews_decide_bulk(
            user=request.user,
            decision=body.decision,
            items=[
                (item.id, item.arguments_hash, item.edited_arguments_hash) for item in body.items
            ],
            via=ReceiptVia.API,
            comment=body.comment,
            reason=body.reason,
        )
    except services.ReviewError as exc:
        return Status(exc.status, {"detail": exc.message, "errors": exc.errors or None})
    return Status(200, {"results": [dataclasses.asdict(r) for r in results]})


@router.get("reviews/{review_id}", response=ReviewDetailOut, operation_id="review_api_review_get")
def review_get(request: AuthedRequest, review_id: str) -> ReviewRequest:
    return selectors.access_review(request.user, review_id)


@router.post(
    "reviews/{review_id}/decision",
    auth=role_auth(selectors.user_can_decide, "decide reviews (operators may)"),
    response={200: ReviewOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
    operation_id="review_api_review_decision",
)
def review_decision(request: AuthedRequest, review_id: str, body: DecisionIn) -> Status[Any]:
    review = selectors.access_review(request.user, review_id, related=False)
    try:
        if review.kind == services.PLAN or body.plan_hash or body.items:
            services.review_decide_plan(
                review_id=review.id,
                user=request.user,
                decision=body.decision,
                plan_hash=body.plan_hash,
                items={k: v.model_dump() for k, v in (body.items or {}).items()},
                comment=body.comment,
                via=ReceiptVia.API,
            )
            return Status(200, selectors.access_review(request.user, review.id))
        services.review_decide(
            review_id=review.id,
            user=request.user,
            decision=body.decision,
            arguments_hash=body.arguments_hash,
            target_hash=body.target_hash,
            comment=body.comment,
            arguments=body.arguments,
            reason=body.reason,
            result=body.result,
            response=body.response,
            remember=body.remember.model_dump() if body.remember is not None else None,
            migration=body.migration,
            checkpoint_id=body.checkpoint_id,
            via=ReceiptVia.API,
        )
    except services.ReviewError as exc:
        return Status(
            exc.status,
            {
                "detail": exc.message,
                "errors": exc.errors or None,
                "reason": exc.reason or None,
                "review_id": exc.review_id,
            },
        )
    return Status(200, selectors.access_review(request.user, review.id))
