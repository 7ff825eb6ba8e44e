"""The page an email's decision link opens (review.email_decisions). A GET only shows what
the link would decide (the arguments, their preview and hash, and the edit with who made it if
an approval edited them) and asks to confirm; the POST decides, bound to the link's hash,
which is the hash of what the page shows or else nothing is decided."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from harness_base.http import AuthedRequest
from review import selectors
from review.email_decisions import decision_link_open, decision_link_use
from review.models import ReviewRequest, ReviewStatus
from review.services.errors import ReviewError
from tasks.canonical import canonical_hash
from tasks.web.access import viewer_required


def _page(
    request: AuthedRequest, review: ReviewRequest, *, decision: str, error: str, status: int
) -> HttpResponse:
    return render(
        request,
        "review/email_link.html",
        {
            "review": review,
            "decision": decision,
            "error": error,
            "arguments_text": json.dumps(review.arguments, indent=2, ensure_ascii=False),
            "arguments_hash": canonical_hash(review.arguments),
        },
        status=status,
    )


def _why_not(review: ReviewRequest, *, arguments_hash: str) -> tuple[str, int]:
    """What stops the link now, as the page says it before anyone confirms."""
    if review.status != ReviewStatus.PENDING:
        return f"This review is already {review.status}: the link decides nothing.", 409
    if review.expires_at is not None and timezone.now() >= review.expires_at:
        return "This review has expired: the link decides nothing.", 409
    if canonical_hash(review.arguments) != arguments_hash:
        return (
            "The call's arguments changed since this mail was sent: the link decides "
            "nothing. Open the review to see them.",
            409,
        )
    return "", 200


@viewer_required
@require_http_methods(["GET", "POST"])
def review_email_decision(request: AuthedRequest, review_id: int, token: str) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    if request.method == "POST":
        try:
            decided = decision_link_use(
                token=token,
                review_id=review.id,
                user=request.user,
                comment=request.POST.get("comment", "").strip(),
            )
        except ReviewError as exc:
            message = exc.message
            if any(error.get("field") == "arguments_hash" for error in exc.errors):
                message = _why_not(review, arguments_hash="")[0]
            return _page(
                request,
                review,
                decision=request.POST.get("decision", ""),
                error=message,
                status=exc.status,
            )
        messages.success(request, f"{decided.tool}: {decided.status} by you (email link).")
        return redirect("review:detail", review_id=decided.id)
    try:
        link = decision_link_open(token=token, review_id=review.id, user=request.user)
    except ReviewError as exc:
        return _page(request, review, decision="", error=exc.message, status=exc.status)
    error, status = _why_not(review, arguments_hash=link.arguments_hash)
    return _page(request, review, decision=link.decision, error=error, status=status)
