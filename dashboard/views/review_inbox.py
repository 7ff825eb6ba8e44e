"""The review inbox (`/reviews/`): its filters, sort and query string, which the review page and
its decisions keep; and the live review counts every page polls. Thin: read through selectors."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse, JsonResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import get_conditional_response, patch_cache_control

from dashboard.forms import ReviewFilterForm
from dashboard.views.common import sort_headers
from harness_base.http import AuthedRequest
from review import selectors, triage
from review.models import ReviewStatus, RuleRisk
from tasks.canonical import canonical_hash
from tasks.web.access import viewer_required

INBOX_STATUSES = ["all", *ReviewStatus.values]
# The inbox's sortable columns (selectors.REVIEW_SORTS), in click order. "age" waits longest
# first; "risk" puts the highest risk first.
INBOX_COLUMNS = {
    "tool": (("tool", "ascending"),),
    "risk": (("risk", "descending"),),
    "waiting": (("age", "descending"), ("newest", "ascending")),
    "time_left": (("time_left", "ascending"),),
}


def inbox_view(request: AuthedRequest) -> tuple[dict[str, str], list[str]]:
    """The inbox's filters and sort from the URL (ReviewFilterForm): (values, what fell back).
    `claimed_by=me` stays "me" here; `selector_filters` resolves it."""
    form = ReviewFilterForm(
        request.GET, statuses=INBOX_STATUSES, risks=RuleRisk.values, sorts=selectors.REVIEW_SORTS
    )
    values, problems = form.values()
    # The names are the API's (`GET /api/v1/reviews`): one it does not know is not ignored
    # silently here either (an unfiltered inbox looks like a filtered one).
    for name in sorted(set(request.GET) - set(form.fields) - {"page"}):
        problems.append(f"Ignored {name[:100]}: not a filter of the inbox.")
    claimed = values["claimed_by"]
    if claimed not in ("", "me", selectors.NOBODY) and not selectors.user_exists(username=claimed):
        problems.append(f"Ignored claimed_by={claimed[:100]!r}: no such user.")
        values["claimed_by"] = ""
    return values, problems


def selector_filters(request: AuthedRequest, values: dict[str, str]) -> dict[str, Any]:
    """Keyword arguments for selectors.reviews_list / reviews_pending_order (no status)."""
    claimed = values["claimed_by"]
    return {
        "tool": values["tool"] or None,
        "rule": values["rule"] or None,
        "risk": values["risk"] or None,
        "task": values["task"] or None,
        "claimed_by": request.user.get_username() if claimed == "me" else claimed or None,
        "assigned_to": request.user if values["assigned"] == "me" else None,
        "sort": values["sort"],
    }


def inbox_query(values: dict[str, str]) -> str:
    """The view as a query string ("?sort=risk&tool=..."), defaults left out; "" for none."""
    defaults = {"status": ReviewStatus.PENDING, "sort": selectors.REVIEW_SORTS[0]}
    kept = {k: v for k, v in values.items() if v and v != defaults.get(k, "")}
    return f"?{urlencode(kept)}" if kept else ""


@viewer_required
def inbox(request: AuthedRequest) -> HttpResponse:
    values, problems = inbox_view(request)
    for problem in problems:
        messages.warning(request, problem)
    status = values["status"]
    reviews = selectors.reviews_list(
        status=None if status == "all" else status, **selector_filters(request, values)
    )
    page = Paginator(reviews, 50).get_page(request.GET.get("page"))
    can_decide = selectors.user_can_decide(request.user)
    for review in page.object_list:
        # What a bulk decision binds each ticked item to: the arguments shown in this row.
        review.arguments_hash = canonical_hash(review.arguments)
    query = inbox_query(values)
    return render(
        request,
        "review/inbox.html",
        {
            "page": page,
            **values,
            "query": query,
            "page_query": f"{query}&" if query else "?",
            "sorting": sort_headers(
                QueryDict(query.lstrip("?")), current=values["sort"], columns=INBOX_COLUMNS
            ),
            "statuses": INBOX_STATUSES,
            "risks": RuleRisk.values,
            "sorts": selectors.REVIEW_SORTS,
            "tools": selectors.reviews_tools(),
            "rules_seen": selectors.reviews_rules(),
            "can_decide": can_decide,
            "bulk_max": triage.BULK_MAX_ITEMS,
        },
    )


@viewer_required
def reviews_pending_count(request: AuthedRequest) -> HttpResponse:
    """The live review signals every page polls (static/reviews-live.js): pending and
    decidable counts for this user, the newest pending id, and the pending reviews newer than
    `?since=` (a review id). A 304 while its ETag (If-None-Match) still holds."""
    raw_since = request.GET.get("since", "")
    since = None
    if raw_since:
        if not raw_since.isascii() or not raw_since.isdigit() or len(raw_since) > 18:
            return JsonResponse(
                {"field": "since", "message": "since must be a review id (a whole number >= 0)"},
                status=400,
            )
        since = int(raw_since)
    summary = selectors.reviews_summary(user=request.user, since=since)
    facts = [request.user.pk, since, summary["pending"], summary["decidable"], summary["latest"]]
    raw = "|".join(map(str, facts))
    etag = 'W/"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'
    not_modified = get_conditional_response(request, etag=etag)
    response: HttpResponse
    if not_modified is None:
        for item in summary["new"]:
            item["url"] = reverse("review:detail", kwargs={"review_id": item["id"]})
        response = JsonResponse({**summary, "version": etag})
    else:
        response = not_modified
    response["ETag"] = etag
    patch_cache_control(response, no_cache=True, private=True)
    return response
