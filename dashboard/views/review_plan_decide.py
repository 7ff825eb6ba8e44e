"""`/reviews/<id>/plan-decide/`: the plan review page's one form (dashboard.views.review_plan)
as one decision (review.services.review_decide_plan); refusals re-render the page."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from dashboard.views.review_page import review_detail_page
from dashboard.views.review_plan import plan_items_posted
from harness_base.http import AuthedRequest
from review import selectors, services
from review.models import ReceiptVia
from tasks.web.access import viewer_required


@viewer_required
@require_POST
def review_plan_decide(request: AuthedRequest, review_id: int) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    try:
        items = plan_items_posted(request.POST, review)
    except ValueError as exc:
        field = f"items.{exc.args[0]}.arguments"
        return review_detail_page(
            request,
            review,
            status=422,
            error=f"The arguments of item {exc.args[0]} must be valid JSON.",
            errors=[{"field": field, "message": "not valid JSON"}],
        )
    try:
        review = services.review_decide_plan(
            review_id=review.id,
            user=request.user,
            decision=request.POST.get("decision", ""),
            plan_hash=request.POST.get("plan_hash") or None,
            items=items,
            comment=request.POST.get("comment", "").strip(),
            via=ReceiptVia.PAGE,
        )
    except services.ReviewError as exc:
        return review_detail_page(
            request, review, status=exc.status, error=exc.message, errors=exc.errors
        )
    if review.status == "pending":
        messages.success(
            request,
            f"Approval of the plan recorded ({review.approvals.count()} of "
            f"{review.approvals_required}); waiting for another operator.",
        )
    else:
        messages.success(request, f"The plan was {review.status}.")
    return redirect("review:detail", review_id=review.id)
