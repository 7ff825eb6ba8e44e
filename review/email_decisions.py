"""Deciding from an email's decision link (review.email_links makes and reads them).

Opening a link (GET) decides nothing: the page asks to confirm, and its POST decides through
`review_decide` with the signed `arguments_hash`, as the logged-in user, who must be the
link's recipient. So a forwarded or leaked mail grants nothing by itself: its reader must
still be logged in as that person, who must still be allowed to decide (roles, four-eyes,
the creator ban, stale arguments and expiry hold as on the page). A link is used once
(DecisionLinkUse, unique on the nonce its mail's approve and reject links share), whatever
the outcome; it dies with the review: once the review is closed or past `expires_at`,
nobody decides it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from review.email_links import DecisionLink, DecisionLinkInvalid, decision_link_read
from review.models import DecisionLinkUse, ReceiptVia, ReviewRequest
from review.services.decide import review_decide
from review.services.errors import ReviewConflict, ReviewForbidden, ReviewInvalid

ALREADY_USED = "this link was already used; open the review page to decide"


def decision_link_open(*, token: str, review_id: int, user: User) -> DecisionLink:
    """The link, if `user` may use it now: its recipient, not used yet. ReviewInvalid (field
    `token`), ReviewForbidden or ReviewConflict otherwise."""
    try:
        link = decision_link_read(token=token, review_id=review_id)
    except DecisionLinkInvalid as exc:
        raise ReviewInvalid(str(exc), errors=[{"field": "token", "message": str(exc)}]) from None
    if link.user_id != user.pk:
        raise ReviewForbidden(
            "this link was sent to someone else: log in as its recipient, or decide on the "
            "review page"
        )
    if DecisionLinkUse.objects.filter(nonce=link.nonce).exists():
        raise ReviewConflict(ALREADY_USED)
    return link


def decision_link_use(
    *, token: str, review_id: int, user: User, comment: str = ""
) -> ReviewRequest:
    """Decide what the link says, as `user` (the confirmation page's POST). The link is spent
    first, in its own transaction (of two concurrent uses one gets ReviewConflict), then
    review_decide decides or raises as on the page."""
    link = decision_link_open(token=token, review_id=review_id, user=user)
    try:
        with transaction.atomic():
            DecisionLinkUse.objects.create(
                nonce=link.nonce,
                review_id=link.review_id,
                user=user,
                decision=link.decision,
                used_at=timezone.now(),
            )
    except IntegrityError:
        raise ReviewConflict(ALREADY_USED) from None
    return review_decide(
        review_id=link.review_id,
        user=user,
        decision=link.decision,
        arguments_hash=link.arguments_hash,
        comment=comment,
        via=ReceiptVia.EMAIL,
    )
