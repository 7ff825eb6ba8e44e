"""One-click decision links in notification emails (issue 23): the signed tokens.

A link names one decision (approve or reject) of one review for one person: the token is
signed (django.core.signing, salt below) over the review id, the `arguments_hash` the mail
shows, the decision, the recipient's user id and a nonce shared by that mail's approve and
reject links (review.email_decisions spends it once). Only an address that is the verified
email of exactly one active account gets links (review.identities); the others get
the link to the review page only."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing

from review.identities import users_with_verified_email

SALT = "review.email-decision-link"
LINK_DECISIONS = ("approve", "reject")


class DecisionLinkInvalid(ValueError):
    """A token not signed here, altered, or for another review."""


@dataclass(frozen=True, kw_only=True)
class DecisionLink:
    review_id: int
    arguments_hash: str
    decision: str
    user_id: int
    nonce: str


def decision_link_urls(
    *, review_id: int, arguments_hash: str, email: str, decisions: tuple[str, ...] = LINK_DECISIONS
) -> dict[str, str]:
    """decision -> link for the mail to `email`, for each of `decisions` the links offer
    (empty unless it is the verified email of exactly one active account)."""
    users = [user.pk for user in users_with_verified_email(email=email)]
    if len(users) != 1:
        return {}
    nonce = secrets.token_urlsafe(24)
    base = f"{settings.HARNESS_BASE_URL.rstrip('/')}/reviews/{review_id}/email"
    return {
        decision: base
        + "/"
        + signing.dumps(
            {"r": review_id, "h": arguments_hash, "d": decision, "u": users[0], "n": nonce},
            salt=SALT,
        )
        + "/"
        for decision in LINK_DECISIONS
        if decision in decisions
    }


def decision_link_read(*, token: str, review_id: int) -> DecisionLink:
    """The link a token is, for the review in its URL."""
    try:
        data: Any = signing.loads(token, salt=SALT)
        link = DecisionLink(
            review_id=data["r"],
            arguments_hash=data["h"],
            decision=data["d"],
            user_id=data["u"],
            nonce=data["n"],
        )
    except (signing.BadSignature, TypeError, KeyError):
        raise DecisionLinkInvalid(
            "this decision link is not valid (altered, or not made by this harness)"
        ) from None
    if link.review_id != review_id or link.decision not in LINK_DECISIONS:
        raise DecisionLinkInvalid("this decision link is for another review")
    return link
