"""`/api/v1/reviews…` endpoints. Thin: parse, call one service or selector, shape the output."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status

from review import selectors, services, standing, triage
from review.models import ReceiptVia, ReviewRequest, ReviewRule
from review.receipts import receipt_document
from tasks.canonical import canonical_hash
from tasks.web.api_auth import role_auth

router = Router(tags=["reviews"])


class ErrorOut(Schema):
    detail: str
    errors: list[dict[str, str]] | None = None
    # A machine-readable cause where one is defined: `target_changed` (409) when the call's
    # target is no longer what the decider was shown; `review_id` then names the new review.
    reason: str | None = None
    review_id: int | None = None


class ApprovalOut(Schema):
    user: str
    at: datetime
    arguments_hash: str
    comment: str


class SuggestedRuleOut(Schema):
    # Name it in a decision's `remember.suggestion`; the fields are computed from the call.
    id: str
    kind: str
    description: str
    tool: str
    path_glob: str
    command_regex: str
    url_origin: str
    arguments_hash: str
    scopes: list[str]
    # The latest `until` a remember may ask for.
    until_max: datetime


class TrackRecordOut(Schema):
    allowed: int
    failed: int
    unknown_outcome: int
    rolled_back: int
    asked_human: int
    edited: int
    rejected: int


class StandingRuleOut(Schema):
    id: int
    name: str
    description: str
    state: str  # active | paused | ended | disabled
    tool: str
    path_glob: str
    command_regex: str
    url_origin: str
    arguments_hash: str
    scope: str
    scope_user: str | None
    created_by: str | None
    created_at: datetime | None
    origin_review_id: int | None
    until: datetime | None
    paused: bool
    paused_reason: str
    paused_at: datetime | None
    record: TrackRecordOut

    @staticmethod
    def resolve_description(obj: ReviewRule) -> str:
        return obj.reason

    @staticmethod
    def resolve_state(obj: ReviewRule) -> str:
        return obj.standing_state

    @staticmethod
    def resolve_scope_user(obj: ReviewRule) -> str | None:
        return obj.scope_user.get_username() if obj.scope_user_id else None

    @staticmethod
    def resolve_created_by(obj: ReviewRule) -> str | None:
        return obj.created_by.get_username() if obj.created_by_id else None

    @staticmethod
    def resolve_record(obj: ReviewRule) -> dict[str, int]:
        return {key: getattr(obj, key) for key in TrackRecordOut.model_fields}


class ProposedOut(Schema):
    arguments: dict[str, Any]
    arguments_hash: str


class ApprovedOut(Schema):
    arguments: dict[str, Any]
    arguments_hash: str
    edited: bool
    # Who edited the arguments (the first approver of the edited version) and their comment.
    edited_by: str | None
    comment: str


class ExecutedOut(Schema):
    arguments: dict[str, Any]
    arguments_hash: str
    started_at: datetime
    status: str


class EditOut(Schema):
    by: str
    comment: str
    at: datetime | None
    # A unified diff of the arguments as indented JSON, proposed -> approved.
    diff: str


class FactsOut(Schema):
    """The three facts of a review: what the model proposed, what was approved (null until
    approved) and what ran (null until the call started, with exactly the approved
    arguments); `edit` says who changed the arguments, if anyone."""

    proposed: ProposedOut
    approved: ApprovedOut | None
    executed: ExecutedOut | None
    edit: EditOut | None


class CommentOut(Schema):
    user: str | None
    at: datetime
    text: str


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
    # The state of what the call acts on when the review opened (tasks.fingerprint): an
    # approval is about it as well as the arguments; an approval may send back its `hash`.
    target_fingerprint: dict[str, Any]
    # sha256 of the policy that paused the call (review.policy.policy_hash).
    policy_hash: str
    # A review reopened because an approval no longer held: the one it replaces, what changed.
    reopened_from_id: int | None
    changes: list[str]
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
    facts: FactsOut
    # For a LangGraph interrupt: its id, mode, allowed decisions and, once decided, the answer.
    interrupt: dict[str, Any] | None
    # "Approve and always allow…": rules made from this call, narrowest first (review.standing).
    suggested_rules: list[SuggestedRuleOut]
    # The standing rule that allowed this call (kind standing_rule), or that matched it and
    # could not (paused…): its name.
    standing_rule: str | None
    # Triage (review.triage; advisory, never who may decide): who claimed it, since when, and
    # the person or group it is assigned to.
    claimed_by: str | None
    claimed_at: datetime | None
    assigned_to: str | None
    assigned_group: str | None

    @staticmethod
    def resolve_claimed_by(obj: ReviewRequest) -> str | None:
        return obj.claimed_by.get_username() if obj.claimed_by_id else None

    @staticmethod
    def resolve_assigned_to(obj: ReviewRequest) -> str | None:
        return obj.assigned_to.get_username() if obj.assigned_to_id else None

    @staticmethod
    def resolve_assigned_group(obj: ReviewRequest) -> str | None:
        return obj.assigned_group.name if obj.assigned_group_id else None

    @staticmethod
    def resolve_suggested_rules(obj: ReviewRequest) -> list[dict[str, Any]]:
        until_max = timezone.now() + timedelta(days=standing.MAX_DAYS)
        return [
            {
                "id": s.id,
                "kind": s.kind,
                "description": s.description,
                **s.rule_fields(),
                "scopes": ["creator", "everyone"],
                "until_max": until_max,
            }
            for s in standing.review_suggestions(obj)
        ]

    @staticmethod
    def resolve_standing_rule(obj: ReviewRequest) -> str | None:
        return obj.standing_rule.name if obj.standing_rule_id else None

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
        return selectors.review_url(review_id=obj.id)

    @staticmethod
    def resolve_facts(obj: ReviewRequest) -> dict[str, Any]:
        return selectors.review_facts(review=obj)


class NotificationOut(Schema):
    channel: str
    kind: str
    # review.requested | review.reminder | review.escalated | review.decided | review.expired
    event: str
    # pending (due at next_attempt_at) | sending | sent | failed (gave up) | canceled
    status: str
    attempts: int
    last_error: str
    sent_at: datetime | None
    next_attempt_at: datetime | None


class ReviewDetailOut(ReviewOut):
    # Who was told about this review, and whether it reached them (review.notifications).
    notifications: list[NotificationOut]

    @staticmethod
    def resolve_notifications(obj: ReviewRequest) -> list[dict[str, Any]]:
        return selectors.review_notifications(review=obj)

    # The triage thread (review.triage), oldest first.
    comments: list[CommentOut]

    @staticmethod
    def resolve_comments(obj: ReviewRequest) -> list[dict[str, Any]]:
        return [
            {"user": c.user.get_username() if c.user else None, "at": c.at, "text": c.text}
            for c in selectors.review_comments(review=obj)
        ]


class RememberIn(Schema):
    # The `id` of one of the review's `suggested_rules`.
    suggestion: str = Field(max_length=100)
    # The day (YYYY-MM-DD, inclusive) or instant the standing rule ends; at most 90 days ahead.
    until: str = Field(max_length=40)
    scope: Literal["creator", "everyone"] = "creator"


class DecisionIn(Schema):
    # approve | reject; for a call whose outcome is unknown: mark_done | rerun | fail_task.
    # respond: answer a LangGraph interrupt (`response`: any JSON for a plain interrupt, the
    # tool's answer as a string for a HumanInTheLoopMiddleware action).
    decision: Literal["approve", "reject", "respond", "mark_done", "rerun", "fail_task"]
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


@router.get("reviews", response=list[ReviewOut])
def review_list(
    request: HttpRequest,
    status: str | None = None,
    tool: str | None = Query(None, max_length=100),
    risk: str | None = Query(None, max_length=20),
    task_id: str | None = None,
    # A matched rule's name.
    rule: str | None = Query(None, max_length=100),
    # A username, `me`, or `nobody` (unclaimed).
    claimed_by: str | None = Query(None, max_length=150),
    # `me`: assigned to the caller or to one of their groups.
    assigned: Literal["me"] | None = None,
    # Pending first in this order (oldest first by default), then decided, latest first.
    sort: Literal["age", "newest", "time_left", "risk", "tool"] = "age",
    limit: int = Query(100, ge=1, le=500),
):
    return selectors.reviews_list(
        status=status,
        tool=tool,
        risk=risk,
        task=task_id,
        rule=rule,
        claimed_by=request.user.get_username() if claimed_by == "me" else claimed_by,
        assigned_to=request.user if assigned == "me" else None,
        sort=sort,
    )[:limit]


class ClaimIn(Schema):
    # Claim a review another operator holds (audited as a take-over); else that is 409.
    take_over: bool = False


class AssignIn(Schema):
    # A username of someone who may decide reviews, or a group's name; both empty clears.
    to_user: str = Field(default="", max_length=150)
    to_group: str = Field(default="", max_length=150)


class CommentIn(Schema):
    text: str = Field(min_length=1, max_length=triage.COMMENT_MAX)


def _triage(request: HttpRequest, review_id: str, act: Any):
    review = selectors.access_review(request.user, review_id)
    try:
        act(review)
    except services.ReviewError as exc:
        return Status(exc.status, {"detail": exc.message, "errors": exc.errors or None})
    return Status(200, selectors.access_review(request.user, review.id))


TRIAGE = {
    "auth": role_auth(selectors.user_can_decide, "triage reviews (operators may)"),
    "response": {200: ReviewDetailOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
}


@router.post("reviews/{review_id}/claim", **TRIAGE)
def review_claim(request: HttpRequest, review_id: str, body: ClaimIn):
    return _triage(
        request,
        review_id,
        lambda r: triage.review_claim(review_id=r.id, user=request.user, take_over=body.take_over),
    )


@router.post("reviews/{review_id}/unclaim", **TRIAGE)
def review_unclaim(request: HttpRequest, review_id: str):
    return _triage(
        request, review_id, lambda r: triage.review_unclaim(review_id=r.id, user=request.user)
    )


@router.post("reviews/{review_id}/assign", **TRIAGE)
def review_assign(request: HttpRequest, review_id: str, body: AssignIn):
    return _triage(
        request,
        review_id,
        lambda r: triage.review_assign(
            review_id=r.id, user=request.user, to_user=body.to_user, to_group=body.to_group
        ),
    )


@router.post("reviews/{review_id}/comments", **TRIAGE)
def review_comment(request: HttpRequest, review_id: str, body: CommentIn):
    return _triage(
        request,
        review_id,
        lambda r: triage.review_comment_add(review_id=r.id, user=request.user, text=body.text),
    )


class BulkItemIn(Schema):
    id: int
    # The `arguments_hash` of the arguments the decider was shown for this review.
    arguments_hash: str = Field(pattern="^[0-9a-f]{64}$")


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


@router.post(
    "reviews/bulk-decision",
    auth=role_auth(selectors.user_can_decide, "decide reviews (operators may)"),
    response={200: BulkDecisionOut, 403: ErrorOut, 422: ErrorOut},
)
def review_bulk_decision(request: HttpRequest, body: BulkDecisionIn):
    """Decide several reviews, each exactly as `POST /reviews/{id}/decision` would (its own
    transaction, its hash, four-eyes, creator rule, expiry): one failing fails only itself."""
    try:
        results = triage.reviews_decide_bulk(
            user=request.user,
            decision=body.decision,
            items=[(item.id, item.arguments_hash) for item in body.items],
            via=ReceiptVia.API,
            comment=body.comment,
            reason=body.reason,
        )
    except services.ReviewError as exc:
        return Status(exc.status, {"detail": exc.message, "errors": exc.errors or None})
    return Status(200, {"results": [dataclasses.asdict(r) for r in results]})


@router.get("reviews/{review_id}", response=ReviewDetailOut)
def review_get(request: HttpRequest, review_id: str):
    return selectors.access_review(request.user, review_id)


@router.post(
    "reviews/{review_id}/decision",
    auth=role_auth(selectors.user_can_decide, "decide reviews (operators may)"),
    response={200: ReviewOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
)
def review_decision(request: HttpRequest, review_id: str, body: DecisionIn):
    review = selectors.access_review(request.user, review_id, related=False)
    try:
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


class StandingRuleActionIn(Schema):
    reason: str = Field(default="", max_length=300)


@router.get("standing-rules", response=list[StandingRuleOut])
def standing_rule_list(request: HttpRequest, limit: int = Query(100, ge=1, le=500)):
    return selectors.standing_rules()[:limit]


@router.get("standing-rules/{rule_id}", response=StandingRuleOut)
def standing_rule_get(request: HttpRequest, rule_id: str):
    return selectors.standing_rule_get(rule_id=rule_id)


@router.post(
    "standing-rules/{rule_id}/resume",
    auth=role_auth(selectors.user_can_decide, "resume standing rules (operators may)"),
    response={200: StandingRuleOut, 403: ErrorOut, 409: ErrorOut},
)
def standing_rule_resume(request: HttpRequest, rule_id: str, body: StandingRuleActionIn):
    rule = selectors.standing_rule_get(rule_id=rule_id)
    try:
        services.standing_rule_resume(rule_id=rule.id, user=request.user, reason=body.reason)
    except services.ReviewError as exc:
        return Status(exc.status, {"detail": exc.message, "errors": exc.errors or None})
    return Status(200, selectors.standing_rule_get(rule_id=rule.id))


@router.post(
    "standing-rules/{rule_id}/pause",
    auth=role_auth(selectors.user_can_decide, "pause standing rules (operators may)"),
    response={200: StandingRuleOut, 409: ErrorOut},
)
def standing_rule_pause(request: HttpRequest, rule_id: str, body: StandingRuleActionIn):
    rule = selectors.standing_rule_get(rule_id=rule_id)
    if not services.standing_rule_pause(
        rule_id=rule.id, user=request.user, reason=body.reason or "paused by an operator"
    ):
        return Status(409, {"detail": f"standing rule {rule.name} is already paused"})
    return Status(200, selectors.standing_rule_get(rule_id=rule.id))


class ReceiptSubjectOut(Schema):
    tool: str
    kind: str
    call_id: str
    # The review's status after this decision (`pending` for a partial approval).
    status: str
    proposed_arguments_hash: str
    # The arguments the decision is about (the edited ones once an operator edited them).
    arguments_hash: str
    edited: bool
    target_fingerprint: dict[str, Any]
    policy_hash: str
    rules: list[str]
    approvals: list[str]
    approvals_required: int
    comment: str


class ReceiptOut(Schema):
    """One decision receipt (review.receipts): `hash` is the sha256 hex of the canonical JSON
    of every other field, `prev_hash` the hash of the receipt before it (64 zeros for the
    first)."""

    seq: int
    at: datetime
    review_id: int
    task_id: UUID
    decision: str
    via: str
    actor: str
    actor_user_id: int | None
    subject: ReceiptSubjectOut
    prev_hash: str
    hash: str


class ReviewReceiptsOut(Schema):
    review_id: int
    # Oldest first: each partial approval under approvals_required > 1 has its own.
    receipts: list[ReceiptOut]


@router.get("reviews/{review_id}/receipt", response=ReviewReceiptsOut)
def review_receipt(request: HttpRequest, review_id: str):
    review = selectors.access_review(request.user, review_id)
    return {
        "review_id": review.id,
        "receipts": [receipt_document(r) for r in selectors.review_receipts(review=review)],
    }


MAX_SEQ = 2**63 - 1


def _since(value: str) -> dict[str, Any]:
    """`since` is a receipt's sequence number (the receipts after it) or an ISO 8601 datetime
    (the receipts made at or after it; without a zone, UTC)."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        if int(value) > MAX_SEQ:
            raise ValueError(f"a sequence number is at most {MAX_SEQ}")
        return {"after_seq": int(value)}
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("a receipt sequence number or an ISO 8601 datetime") from None
    return {"since": at if at.tzinfo else at.replace(tzinfo=UTC)}


@router.get("receipts", response={200: None, 422: ErrorOut})
def receipts_export(request: HttpRequest, since: str = Query("", max_length=64)):
    """Every decision receipt in chain order as JSON Lines (one ReceiptOut per line), from
    the start or after `since`."""
    try:
        window = _since(since) if since.strip() else {}
    except ValueError as exc:
        return Status(
            422,
            {"detail": "invalid input", "errors": [{"field": "since", "message": str(exc)}]},
        )

    def lines() -> Iterator[str]:
        for receipt in selectors.receipts_since(**window).iterator(chunk_size=1000):
            yield json.dumps(receipt_document(receipt), ensure_ascii=False) + "\n"

    return StreamingHttpResponse(lines(), content_type="application/x-ndjson")
