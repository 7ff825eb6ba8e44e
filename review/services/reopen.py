"""A pending review whose targets changed before its approval: the approval is refused and the
review reopened as a new one showing the targets' new state (review.recheck)."""

from __future__ import annotations

from django.utils import timezone

from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.receipts import receipt_record
from review.recheck import review_requirements, review_target_changes, review_targets_now
from review.services.errors import ReviewConflict
from review.services.transitions import review_request_open, review_transition
from tasks.events import EventType
from tasks.fingerprint import previewed
from tasks.services import event_record

TARGET_CHANGED = "target_changed"


def review_reopen(*, review: ReviewRequest, changes: list[str], actor: str) -> ReviewRequest:
    """The pending `review` is about a state of its targets that no longer is: it is canceled
    and a new pending review of the same call (its proposed arguments: edits and approvals of
    the old state do not carry over) opens on the same terms, with a fresh preview and
    fingerprint and what changed. Caller holds the task's lock."""
    proposed = review.original_arguments
    tool, ctx, args, _local = review_targets_now(review=review, arguments=proposed)
    if tool is None:
        raise ReviewConflict(f"tool {review.tool!r} is no longer available")
    preview, fingerprint = previewed(tool=tool, ctx=ctx, args=args, arguments=proposed)
    comment = "; ".join(changes)[:10_000]
    now = timezone.now()
    review_transition(review=review, to=ReviewStatus.CANCELED, now=now, fields={"comment": comment})
    receipt_record(
        review=review,
        decision="cancel",
        actor="system:recheck",
        via=ReceiptVia.RECHECK,
        now=now,
        comment=comment,
    )
    call = review.tool_call
    reopened = review_request_open(
        tool_call=call,
        checkpoint_id=review.checkpoint_id,
        decision=review_requirements(review=review),
        preview=preview,
        kind=review.kind,
        target_fingerprint=fingerprint,
        reopened_from=review,
        changes=changes,
    )
    event_record(
        task_id=review.task_id,
        type=EventType.REVIEW_REQUESTED,
        actor=actor,
        payload={
            "call_id": call.call_id,
            "tool": review.tool,
            "rules": review.matched_rules,
            "reason": review.reason,
            "reopened_from": review.id,
            "changes": changes,
        },
    )
    return reopened


def target_check(
    *, review: ReviewRequest, target_hash: str | None, actor: str
) -> ReviewConflict | None:
    """Before an approval, in the decision's transaction (both rows locked): the call's targets
    on this machine's disk must be what the review recorded and showed (and, if the decider
    names it, the fingerprint they were shown). A stale `target_hash` raises ReviewConflict
    (reason `target_changed`); a change reopens the review with the new state and returns the
    ReviewConflict (naming the new review) for the caller to raise once the reopen commits."""
    recorded = review.target_fingerprint.get("hash")
    if review.status != ReviewStatus.PENDING or recorded is None:
        return None  # the decision itself says why it cannot be made
    if target_hash is not None and target_hash != recorded:
        raise ReviewConflict(
            "the call's target is no longer the state you were shown "
            f"(target_hash {target_hash[:12]}..., now {recorded[:12]}...): reload and "
            "decide again",
            errors=[{"field": "target_hash", "message": f"stale; current is {recorded}"}],
            reason=TARGET_CHANGED,
            review_id=review.id,
        )
    try:
        _tool, _ctx, _args, current = review_targets_now(review=review)
    except Exception as exc:  # the targets cannot be read: the approval cannot be made
        raise ReviewConflict(
            f"could not check the call's targets: {type(exc).__name__}: {exc}",
            reason=TARGET_CHANGED,
            review_id=review.id,
        ) from None
    changes = review_target_changes(review=review, current=current)
    if not changes:
        return None
    reopened = review_reopen(review=review, changes=changes, actor=actor)
    return ReviewConflict(
        "; ".join(changes) + f": the new state is under review {reopened.id}",
        errors=[{"field": "target_hash", "message": change} for change in changes],
        reason=TARGET_CHANGED,
        review_id=reopened.id,
    )
