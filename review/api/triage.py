"""`/api/v1/reviews/{id}/claim|unclaim|assign|comments`: triage of the inbox (review.triage)."""

from __future__ import annotations

from typing import Any

from ninja import Field, Router, Schema, Status

from harness_base.http import AuthedRequest
from review import selectors, services, triage
from review.api.schemas import ErrorOut, ReviewDetailOut
from tasks.web.api_auth import role_auth

router = Router()


class ClaimIn(Schema):
    # Claim a review another operator holds (audited as a take-over); else that is 409.
    take_over: bool = False


class AssignIn(Schema):
    # A username of someone who may decide this review, or the name of a group whose members
    # decide reviews (operators, or a group holding review.decide_review); both empty clears.
    to_user: str = Field(default="", max_length=150)
    to_group: str = Field(default="", max_length=150)


class CommentIn(Schema):
    text: str = Field(min_length=1, max_length=triage.COMMENT_MAX)


def _triage(request: AuthedRequest, review_id: str, act: Any) -> Status[Any]:
    review = selectors.access_review(request.user, review_id)
    try:
        act(review)
    except services.ReviewError as exc:
        return Status(exc.status, {"detail": exc.message, "errors": exc.errors or None})
    return Status(200, selectors.access_review(request.user, review.id))


TRIAGE: dict[str, Any] = {
    "auth": role_auth(selectors.user_can_decide, "triage reviews (operators may)"),
    "response": {200: ReviewDetailOut, 403: ErrorOut, 409: ErrorOut, 422: ErrorOut},
}


@router.post("reviews/{review_id}/claim", **TRIAGE, operation_id="review_api_review_claim")
def review_claim(request: AuthedRequest, review_id: str, body: ClaimIn) -> Status[Any]:
    return _triage(
        request,
        review_id,
        lambda r: triage.review_claim(review_id=r.id, user=request.user, take_over=body.take_over),
    )


@router.post("reviews/{review_id}/unclaim", **TRIAGE, operation_id="review_api_review_unclaim")
def review_unclaim(request: AuthedRequest, review_id: str) -> Status[Any]:
    return _triage(
        request, review_id, lambda r: triage.review_unclaim(review_id=r.id, user=request.user)
    )


@router.post("reviews/{review_id}/assign", **TRIAGE, operation_id="review_api_review_assign")
def review_assign(request: AuthedRequest, review_id: str, body: AssignIn) -> Status[Any]:
    return _triage(
        request,
        review_id,
        lambda r: triage.review_assign(
            review_id=r.id, user=request.user, to_user=body.to_user, to_group=body.to_group
        ),
    )


@router.post("reviews/{review_id}/comments", **TRIAGE, operation_id="review_api_review_comment")
def review_comment(request: AuthedRequest, review_id: str, body: CommentIn) -> Status[Any]:
    return _triage(
        request,
        review_id,
        lambda r: triage.review_comment_add(review_id=r.id, user=request.user, text=body.text),
    )
