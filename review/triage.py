"""Triage of the review inbox: claim / unclaim, assign to a person or a group, a comment thread,
and bulk decisions.

Claims and assignments are advisory: they say who works on a review, never who may decide it
(the gate in review.services.review_decide is unchanged). Each write locks the task row then
the review row (review.services' lock contract) and is audited. Claiming a review another
operator holds is refused (409) unless the caller asks to take it over (`take_over`), which is
audited with whom it was taken from.

A bulk decision is a list of single decisions: each item goes through review_decide with the
`arguments_hash` its operator saw in the list, in its own transaction, with every per-review
check (four-eyes, forbid-creator, expiry, stale hash, role); one item failing fails only
itself. A list shows a review's target, not its arguments: approving in bulk a review whose
arguments an approval edited is refused for that item (409, EDITED) unless the item names the
edited arguments' hash as well (`edited_arguments_hash`), saying its operator saw the edit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from review.models import ReviewComment, ReviewRequest, ReviewStatus
from review.selectors.access import access_review, user_can_decide
from review.selectors.assignees import deciding_groups, user_may_decide_review
from review.services.decide import review_decide
from review.services.errors import ReviewConflict, ReviewError, ReviewForbidden, ReviewInvalid
from tasks.canonical import canonical_hash
from tasks.errors import NotFound
from tasks.services import audit_record, task_lock

COMMENT_MAX = 2000
# Items in one bulk decision (the page's selection and the API's `items`).
BULK_MAX_ITEMS = 100


def _locked(*, review_id: Any, user: User) -> ReviewRequest:
    """The review, locked (task row first), for a triage write by an operator."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators triage reviews")
    task_id = ReviewRequest.objects.values_list("task_id", flat=True).get(id=review_id)
    task_lock(task_id=task_id)
    return ReviewRequest.objects.select_for_update().get(id=review_id)


def _username(user: User | None) -> str | None:
    return user.get_username() if user is not None else None


def review_claim(*, review_id: Any, user: User, take_over: bool = False) -> ReviewRequest:
    """`user` claims a pending review. Claimed by someone else: ReviewConflict naming them,
    unless `take_over` (audited as a take-over, with the previous claimant)."""
    with transaction.atomic():
        review = _locked(review_id=review_id, user=user)
        if review.status != ReviewStatus.PENDING:
            raise ReviewConflict(f"review {review.id} is already {review.status}")
        previous = review.claimed_by
        if previous is not None and previous.pk == user.pk:
            return review
        if previous is not None and not take_over:
            raise ReviewConflict(
                f"review {review.id} is claimed by {previous.get_username()}; take it over to "
                "claim it",
                errors=[{"field": "take_over", "message": "claimed by another operator"}],
            )
        review.claimed_by = user
        review.claimed_at = timezone.now()
        review.save(update_fields=["claimed_by", "claimed_at"])
        audit_record(
            user=user,
            action="review_take_over" if previous is not None else "review_claim",
            task_id=review.task_id,
            target=f"review {review.id}",
            before={"claimed_by": _username(previous)},
            after={"claimed_by": user.get_username()},
        )
    return review


def review_unclaim(*, review_id: Any, user: User) -> ReviewRequest:
    """The claimant gives a review back; anyone else gets ReviewConflict."""
    with transaction.atomic():
        review = _locked(review_id=review_id, user=user)
        if review.claimed_by_id is None:
            return review
        if review.claimed_by_id != user.pk:
            raise ReviewConflict(
                f"review {review.id} is claimed by {_username(review.claimed_by)}, not you"
            )
        review.claimed_by = None
        review.claimed_at = None
        review.save(update_fields=["claimed_by", "claimed_at"])
        audit_record(
            user=user,
            action="review_unclaim",
            task_id=review.task_id,
            target=f"review {review.id}",
            before={"claimed_by": user.get_username()},
            after={"claimed_by": None},
        )
    return review


def review_assign(
    *, review_id: Any, user: User, to_user: str = "", to_group: str = ""
) -> ReviewRequest:
    """Assign a pending review to a person who may decide it (`to_user`, a username) or to
    a group whose members decide reviews (`to_group`); both empty clears the assignment.
    Anyone else (unknown, a viewer, the creator under the creator ban, someone who already
    approved, a group of viewers or creators) is ReviewInvalid naming the field."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators triage reviews")
    if to_user and to_group:
        raise ReviewInvalid(
            "assign to a person or a group, not both",
            errors=[{"field": "to_group", "message": "leave empty when assigning to a person"}],
        )
    group = None
    if to_group:
        group = deciding_groups().filter(name=to_group).first()
        if group is None:
            raise ReviewInvalid(
                f"{to_group[:150]!r} is not a group whose members decide reviews",
                errors=[{"field": "to_group", "message": "not a group that may decide reviews"}],
            )
    with transaction.atomic():
        review = _locked(review_id=review_id, user=user)
        if review.status != ReviewStatus.PENDING:
            raise ReviewConflict(f"review {review.id} is already {review.status}")
        assignee = None
        if to_user:
            assignee = get_user_model().objects.filter(username=to_user, is_active=True).first()
            if assignee is None or not user_may_decide_review(user=assignee, review=review):
                raise ReviewInvalid(
                    f"{to_user[:150]!r} may not decide this review",
                    errors=[{"field": "to_user", "message": "not a user who may decide it"}],
                )
        before = {
            "assigned_to": _username(review.assigned_to),
            "assigned_group": review.assigned_group.name if review.assigned_group else None,
        }
        review.assigned_to = assignee
        review.assigned_group = group
        review.save(update_fields=["assigned_to", "assigned_group"])
        audit_record(
            user=user,
            action="review_assign",
            task_id=review.task_id,
            target=f"review {review.id}",
            before=before,
            after={"assigned_to": to_user or None, "assigned_group": to_group or None},
        )
    return review


def review_comment_add(*, review_id: Any, user: User, text: str) -> ReviewComment:
    """Add a note to a review's thread (any status: a thread outlives the decision). Plain
    text, 1..COMMENT_MAX characters, no NUL; audited."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators triage reviews")
    text = text.strip()
    if not text or len(text) > COMMENT_MAX or "\x00" in text:
        raise ReviewInvalid(
            f"a comment is 1 to {COMMENT_MAX} characters of text",
            errors=[{"field": "text", "message": f"1 to {COMMENT_MAX} characters, no NUL"}],
        )
    with transaction.atomic():
        review = _locked(review_id=review_id, user=user)
        comment = ReviewComment.objects.create(
            review=review, user=user, text=text, at=timezone.now()
        )
        audit_record(
            user=user,
            action="review_comment",
            task_id=review.task_id,
            target=f"review {review.id}",
            after={"comment": text},
        )
    return comment


@dataclass(frozen=True)
class BulkItemResult:
    id: Any
    ok: bool
    status_code: int
    error: str = ""
    # The review's status after the item (pending: an approval recorded, more needed).
    review_status: str = ""


CHANGED = "changed since you saw it"
EDITED = "its arguments were edited"


def _edit_unseen(*, review: ReviewRequest, seen: str, edited_named: str) -> str:
    """Why approving `review` in bulk is refused for its edit, or "": an approval edited its
    arguments, the item binds the edited ones (else review_decide refuses it as stale) and
    does not name their hash as `edited_arguments_hash`."""
    current = canonical_hash(review.arguments)
    if review.edited_arguments is None or seen != current or edited_named == current:
        return ""
    by = review.edited_by.get_username() if review.edited_by else "a reviewer"
    return (
        f"{EDITED} by {by} after it opened; a list does not show the edit: open the review to "
        "approve it, or name the edited arguments' hash (edited_arguments_hash)"
    )


def reviews_decide_bulk(
    *,
    user: User,
    decision: str,
    items: list[tuple[Any, str, str]],
    via: str,
    comment: str = "",
    reason: str = "",
) -> list[BulkItemResult]:
    """Decide each (review id, arguments_hash seen, edited arguments' hash named or "")
    through review_decide, one transaction each, and say per item what happened. At most
    BULK_MAX_ITEMS items (else ReviewInvalid naming `items`, and nothing is decided). `via`:
    where (the inbox page or the API), for each decision's receipt."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators may decide reviews")
    if decision not in ("approve", "reject"):
        raise ReviewInvalid(
            "a bulk decision is approve or reject",
            errors=[{"field": "decision", "message": "approve or reject"}],
        )
    if not items or len(items) > BULK_MAX_ITEMS:
        raise ReviewInvalid(
            f"choose 1 to {BULK_MAX_ITEMS} reviews",
            errors=[{"field": "items", "message": f"1 to {BULK_MAX_ITEMS} items"}],
        )
    results = []
    for review_id, seen, edited_named in items:
        if not seen:
            results.append(
                BulkItemResult(
                    id=review_id, ok=False, status_code=422, error="arguments_hash is required"
                )
            )
            continue
        try:
            review = access_review(user, review_id)
            unseen = _edit_unseen(review=review, seen=seen, edited_named=edited_named)
            if decision == "approve" and unseen:
                raise ReviewConflict(
                    unseen, errors=[{"field": "edited_arguments_hash", "message": unseen}]
                )
            decided = review_decide(
                review_id=review.id,
                user=user,
                decision=decision,
                arguments_hash=seen,
                comment=comment,
                reason=reason,
                via=via,
            )
        except NotFound:
            results.append(
                BulkItemResult(id=review_id, ok=False, status_code=404, error="review not found")
            )
        except ReviewError as exc:
            stale = any(e.get("field") == "arguments_hash" for e in exc.errors) and isinstance(
                exc, ReviewConflict
            )
            results.append(
                BulkItemResult(
                    id=review.id,
                    ok=False,
                    status_code=exc.status,
                    error=f"{CHANGED}: {exc.message}" if stale else exc.message,
                )
            )
        else:
            results.append(
                BulkItemResult(
                    id=decided.id, ok=True, status_code=200, review_status=decided.status
                )
            )
    return results
