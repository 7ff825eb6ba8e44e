""" "Preview edit" on the review page: what the call would do with the arguments in the edit
form, before the operator approves them. Only those who may decide the review may ask (it
reads the call's targets, as a decision would); it changes nothing. HTMX swaps the answer into
the form (its fragment); without JavaScript the post gets the whole page back, the form as
typed and the preview in it."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from dashboard.views.review_inbox import inbox_query, inbox_view
from dashboard.views.review_page import review_detail_page, review_edit_state
from harness_base.http import AuthedRequest
from review import selectors, services
from tasks.canonical import canonical_hash
from tasks.web.access import forbidden, viewer_required
from tasks.web.htmx import is_htmx


@viewer_required
@require_POST
def review_edit_preview(request: AuthedRequest, review_id: int) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    if not selectors.user_can_decide(request.user):
        return forbidden(request, "only those who decide reviews may preview an edit")
    edit = review_edit_state(review, request.POST)
    status = 422 if edit.errors else 200
    if not edit.errors:
        try:
            edit.preview = services.edit_preview(review=review, arguments=edit.arguments)
        except services.ReviewError as exc:
            edit.error = exc.message
            edit.errors_add(exc.errors)
            status = exc.status
    if not is_htmx(request):
        return review_detail_page(
            request, review, edit=edit, status=status, error=edit.error, errors=edit.errors
        )
    values, _ = inbox_view(request)
    return render(
        request,
        "review/_edit_form.html",
        {
            "review": review,
            "edit": edit,
            "query": inbox_query(values),
            "arguments_hash": canonical_hash(review.arguments),
            "target_hash": review.target_fingerprint.get("hash", ""),
        },
        status=status,
    )
