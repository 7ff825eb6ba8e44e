"""`/api/v1/standing-rules`: standing rules with their track record; the kill switch (pause,
resume, revoke: review.services.rule_switch)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from ninja import Field, Router, Schema, Status
from ninja.params.functions import Query
from pydantic import field_validator

from harness_base.http import AuthedRequest
from review import selectors, services
from review.api.schemas import ErrorOut
from review.models import ReceiptVia, ReviewRule
from tasks.web.api_auth import role_auth

router = Router()


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
    state: str  # active | paused | ended | disabled | revoked
    tool: str
    path_glob: str
    command_regex: str
    url_origin: str
    arguments_hash: str
    # Every other argument a call must carry exactly so (review.standing.arguments).
    pinned_arguments: dict[str, Any]
    scope: str
    scope_user: str | None
    created_by: str | None
    created_at: datetime | None
    origin_review_id: int | None
    until: datetime | None
    paused: bool
    paused_reason: str
    paused_at: datetime | None
    revoked_at: datetime | None
    revoked_reason: str
    revoked_by: str | None
    record: TrackRecordOut

    @staticmethod
    def resolve_description(obj: ReviewRule) -> str:
        return obj.reason

    @staticmethod
    def resolve_state(obj: ReviewRule) -> str:
        return obj.standing_state

    @staticmethod
    def resolve_scope_user(obj: ReviewRule) -> str | None:
        return obj.scope_user.get_username() if obj.scope_user_id and obj.scope_user else None

    @staticmethod
    def resolve_created_by(obj: ReviewRule) -> str | None:
        return obj.created_by.get_username() if obj.created_by_id and obj.created_by else None

    @staticmethod
    def resolve_revoked_by(obj: ReviewRule) -> str | None:
        return obj.revoked_by.get_username() if obj.revoked_by_id and obj.revoked_by else None

    @staticmethod
    def resolve_record(obj: ReviewRule) -> dict[str, int]:
        return {key: getattr(obj, key) for key in TrackRecordOut.model_fields}


class StandingRuleActionIn(Schema):
    reason: str = Field(default="", max_length=300)


class StandingRuleSwitchIn(Schema):
    # Why (required; recorded in the audit log and the receipt).
    reason: str = Field(min_length=1, max_length=300)

    @field_validator("reason")
    @classmethod
    def _said(cls, reason: str) -> str:
        if not reason.strip():
            raise ValueError("required: say why")
        return reason.strip()


def _refused(exc: services.ReviewError) -> Status[Any]:
    return Status(exc.status, {"detail": exc.message, "errors": exc.errors or None})


@router.get(
    "standing-rules", response=list[StandingRuleOut], operation_id="review_api_standing_rule_list"
)
def standing_rule_list(
    request: AuthedRequest, limit: int = Query(100, ge=1, le=500)
) -> QuerySet[ReviewRule]:
    return selectors.standing_rules()[:limit]


@router.get(
    "standing-rules/{rule_id}",
    response=StandingRuleOut,
    operation_id="review_api_standing_rule_get",
)
def standing_rule_get(request: AuthedRequest, rule_id: str) -> ReviewRule:
    return selectors.standing_rule_get(rule_id=rule_id)


@router.post(
    "standing-rules/{rule_id}/resume",
    auth=role_auth(selectors.user_can_decide, "resume standing rules (operators may)"),
    response={200: StandingRuleOut, 403: ErrorOut, 409: ErrorOut},
    operation_id="review_api_standing_rule_resume",
)
def standing_rule_resume(
    request: AuthedRequest, rule_id: str, body: StandingRuleActionIn
) -> Status[Any]:
    rule = selectors.standing_rule_get(rule_id=rule_id)
    try:
        services.standing_rule_resume(rule_id=rule.id, user=request.user, reason=body.reason)
    except services.ReviewError as exc:
        return _refused(exc)
    return Status(200, selectors.standing_rule_get(rule_id=rule.id))


@router.post(
    "standing-rules/{rule_id}/pause",
    auth=role_auth(selectors.user_can_decide, "pause standing rules (operators may)"),
    response={200: StandingRuleOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
    operation_id="review_api_standing_rule_pause",
)
def standing_rule_pause(
    request: AuthedRequest, rule_id: str, body: StandingRuleSwitchIn
) -> Status[Any]:
    """Pause: the rule allows nothing until an operator resumes it (409 when it is paused or
    revoked already)."""
    rule = selectors.standing_rule_get(rule_id=rule_id)
    try:
        paused = services.standing_rule_pause(
            rule_id=rule.id, user=request.user, reason=body.reason, via=ReceiptVia.API
        )
    except services.ReviewError as exc:
        return _refused(exc)
    if not paused:
        return Status(
            409, {"detail": f"standing rule {rule.name} is {rule.standing_state} already"}
        )
    return Status(200, selectors.standing_rule_get(rule_id=rule.id))


@router.post(
    "standing-rules/{rule_id}/revoke",
    auth=role_auth(selectors.user_can_decide, "revoke standing rules (operators may)"),
    response={200: StandingRuleOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
    operation_id="review_api_standing_rule_revoke",
)
def standing_rule_revoke(
    request: AuthedRequest, rule_id: str, body: StandingRuleSwitchIn
) -> Status[Any]:
    """Revoke, for good: the rule never allows a call again and cannot be resumed (409 when
    it is revoked already)."""
    rule = selectors.standing_rule_get(rule_id=rule_id)
    try:
        services.standing_rule_revoke(
            rule_id=rule.id, user=request.user, reason=body.reason, via=ReceiptVia.API
        )
    except services.ReviewError as exc:
        return _refused(exc)
    return Status(200, selectors.standing_rule_get(rule_id=rule.id))
