"""`/api/v1/reviews/{id}/receipt` and `/api/v1/receipts`: decision receipts (review.receipts),
one review's and the whole chain as JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from django.http import StreamingHttpResponse
from ninja import Router, Schema, Status
from ninja.params.functions import Query

from harness_base.http import AuthedRequest
from review import selectors
from review.api.schemas import ErrorOut
from review.receipts import receipt_document

router = Router()


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


@router.get(
    "reviews/{review_id}/receipt",
    response=ReviewReceiptsOut,
    operation_id="review_api_review_receipt",
)
def review_receipt(request: AuthedRequest, review_id: str) -> dict[str, Any]:
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


@router.get(
    "receipts", response={200: None, 422: ErrorOut}, operation_id="review_api_receipts_export"
)
def receipts_export(
    request: AuthedRequest, since: str = Query("", max_length=64)
) -> Status[Any] | StreamingHttpResponse:
    """Every decision receipt in chain order as JSON Lines (one ReceiptOut per line), from
    the start or after `since`. A standing rule's pause, resume or revoke (`rule_pause`,
    `rule_resume`, `rule_revoke`) has no `review_id` or `task_id`: its subject names the rule."""
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
