"""Triage from the inbox and the review page: claim, release, assign, comment, and bulk
decisions on the ticked reviews. Thin: act through review.triage."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from harness_base.http import AuthedRequest
from review import selectors, services, triage
from review.models import ReceiptVia, ReviewStatus
from tasks.web.access import forbidden, viewer_required


def _back(request: AuthedRequest, review_id: int) -> HttpResponse:
    """Back to where a triage form was posted from: a review page or the inbox."""
    back = request.POST.get("next", "")
    if back.startswith("/reviews/") and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}
    ):
        return redirect(back)
    return redirect("review:detail", review_id=review_id)


def _triage(request: AuthedRequest, review_id: int, act: Any, done: str) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    try:
        act(review)
    except services.ReviewForbidden as exc:
        return forbidden(request, exc.message)
    except services.ReviewError as exc:
        messages.error(request, f"Review {review.id}: {exc.message}")
    else:
        messages.success(request, f"Review {review.id}: {done}.")
    return _back(request, review.id)


@viewer_required
@require_POST
def review_claim(request: AuthedRequest, review_id: int) -> HttpResponse:
    take_over = request.POST.get("take_over") == "1"
    return _triage(
        request,
        review_id,
        lambda r: triage.review_claim(review_id=r.id, user=request.user, take_over=take_over),
        "taken over" if take_over else "claimed",
    )


@viewer_required
@require_POST
def review_unclaim(request: AuthedRequest, review_id: int) -> HttpResponse:
    return _triage(
        request,
        review_id,
        lambda r: triage.review_unclaim(review_id=r.id, user=request.user),
        "claim released",
    )


@viewer_required
@require_POST
def review_assign(request: AuthedRequest, review_id: int) -> HttpResponse:
    to_user = request.POST.get("to_user", "").strip()[:150]
    to_group = request.POST.get("to_group", "").strip()[:150]
    return _triage(
        request,
        review_id,
        lambda r: triage.review_assign(
            review_id=r.id, user=request.user, to_user=to_user, to_group=to_group
        ),
        f"assigned to {to_user or to_group}" if to_user or to_group else "assignment cleared",
    )


@viewer_required
@require_POST
def review_comment(request: AuthedRequest, review_id: int) -> HttpResponse:
    text = request.POST.get("text", "")
    return _triage(
        request,
        review_id,
        lambda r: triage.review_comment_add(review_id=r.id, user=request.user, text=text),
        "comment added",
    )


def _bulk_items(raw: list[str]) -> list[tuple[Any, str, str]]:
    """The ticked rows ("<id>:<arguments_hash>"); a malformed one keeps its text as the id and
    an empty hash, so it fails alone. A row never names an edit's hash: the inbox offers no
    tick for an edited review (its row does not show the edit)."""
    items = []
    for value in raw:
        review_id, _, seen = value.partition(":")
        items.append((review_id[:20], seen if len(seen) == 64 else "", ""))
    return items


def _bulk_summary(decision: str, results: list[triage.BulkItemResult]) -> str:
    """One line for a whole bulk decision: how many were decided, recorded (another approval
    is needed) and refused, and each refusal's review and reason."""
    decided = [r for r in results if r.ok and r.review_status != ReviewStatus.PENDING]
    recorded = [r for r in results if r.ok and r.review_status == ReviewStatus.PENDING]
    refused = [r for r in results if not r.ok]
    parts = [f"{len(decided)} {'approved' if decision == 'approve' else 'rejected'}"]
    if recorded:
        parts.append(f"{len(recorded)} approval(s) recorded, another operator must approve")
    line = f"Bulk {decision} of {len(results)}: " + ", ".join(parts)
    if refused:
        why = "; ".join(f"#{r.id} {r.error}" for r in refused)
        line += f"; {len(refused)} refused ({why})"
    return line + "."


@viewer_required
@require_POST
def reviews_bulk(request: AuthedRequest) -> HttpResponse:
    """Approve or reject the ticked reviews, each bound to the hash its row showed; one line
    says what happened. Approving reviews whose page nobody has opened first asks, on a page
    listing them (`unopened=confirmed` goes on)."""
    back = request.POST.get("next", "")
    if not (
        back.startswith("/reviews/")
        and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()})
    ):
        back = reverse("review:inbox")
    decision = request.POST.get("decision", "")
    items = _bulk_items(request.POST.getlist("item"))
    if (
        decision == "approve"
        and selectors.user_can_decide(request.user)
        and 0 < len(items) <= triage.BULK_MAX_ITEMS
        and request.POST.get("unopened") != "confirmed"
    ):
        ids = [int(i) for i, _seen, _named in items if str(i).isdigit()]
        unopened = selectors.reviews_unopened(ids=ids)
        if unopened:
            return render(
                request,
                "review/bulk_confirm.html",
                {"unopened": unopened, "items": request.POST.getlist("item"), "next": back},
            )
    try:
        results = triage.reviews_decide_bulk(
            user=request.user,
            decision=decision,
            items=items,
            via=ReceiptVia.PAGE,
            comment=request.POST.get("comment", "").strip()[:10_000],
            reason=request.POST.get("reason", "").strip()[:200],
        )
    except services.ReviewForbidden as exc:
        return forbidden(request, exc.message)
    except services.ReviewInvalid as exc:
        messages.error(request, f"Nothing decided: {exc.message}.")
        return redirect(back)
    level = messages.SUCCESS if all(r.ok for r in results) else messages.WARNING
    messages.add_message(request, level, _bulk_summary(decision, results))
    return redirect(back)
