"""Server-rendered review pages. Thin: read through selectors, act through one service."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from checkpoints.selectors import checkpoint_recent_messages
from dashboard.forms import ReviewFilterForm
from dashboard.views.common import sort_headers
from review import selectors, services, standing, triage
from review.models import ReceiptVia, ReviewRequest, ReviewStatus, RuleRisk
from review.rollups import review_viewed
from tasks.canonical import canonical_hash
from tasks.models import PREVIEW_BYTES
from tasks.selectors import call_attempts, task_call_outputs, task_tool
from tasks.web.access import forbidden, operator_required, viewer_required
from tasks.web.inputs import json_error

# Form buttons -> review_decide decisions ("edit" approves the edited arguments).
DECISIONS = {
    "approve": "approve",
    "edit": "approve",
    "reject": "reject",
    "respond": "respond",
    **{name: name for name in services.UNKNOWN_OUTCOME_DECISIONS},
}


INBOX_STATUSES = ["all", *ReviewStatus.values]
# The inbox's sortable columns (selectors.REVIEW_SORTS), in click order. "age" waits longest
# first; "risk" puts the highest risk first.
INBOX_COLUMNS = {
    "tool": (("tool", "ascending"),),
    "risk": (("risk", "descending"),),
    "waiting": (("age", "descending"), ("newest", "ascending")),
    "time_left": (("time_left", "ascending"),),
}


def _inbox_view(request: HttpRequest) -> tuple[dict[str, str], list[str]]:
    """The inbox's filters and sort from the URL (ReviewFilterForm): (values, what fell back).
    `claimed_by=me` stays "me" here; `_selector_filters` resolves it."""
    form = ReviewFilterForm(
        request.GET, statuses=INBOX_STATUSES, risks=RuleRisk.values, sorts=selectors.REVIEW_SORTS
    )
    values, problems = form.values()
    claimed = values["claimed_by"]
    if claimed not in ("", "me", selectors.NOBODY) and not selectors.user_exists(username=claimed):
        problems.append(f"Ignored claimed_by={claimed[:100]!r}: no such user.")
        values["claimed_by"] = ""
    return values, problems


def _selector_filters(request: HttpRequest, values: dict[str, str]) -> dict[str, Any]:
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


def _inbox_query(values: dict[str, str]) -> str:
    """The view as a query string ("?sort=risk&tool=..."), defaults left out; "" for none."""
    defaults = {"status": ReviewStatus.PENDING, "sort": selectors.REVIEW_SORTS[0]}
    kept = {k: v for k, v in values.items() if v and v != defaults.get(k, "")}
    return f"?{urlencode(kept)}" if kept else ""


@viewer_required
def inbox(request: HttpRequest) -> HttpResponse:
    values, problems = _inbox_view(request)
    for problem in problems:
        messages.warning(request, problem)
    status = values["status"]
    reviews = selectors.reviews_list(
        status=None if status == "all" else status, **_selector_filters(request, values)
    )
    page = Paginator(reviews, 50).get_page(request.GET.get("page"))
    can_decide = selectors.user_can_decide(request.user)
    for review in page.object_list:
        # What a bulk decision binds each ticked item to: the arguments shown in this row.
        review.arguments_hash = canonical_hash(review.arguments)
    query = _inbox_query(values)
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
def reviews_pending_count(request: HttpRequest) -> HttpResponse:
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
    if not_modified is None:
        for item in summary["new"]:
            item["url"] = reverse("review:detail", kwargs={"review_id": item["id"]})
        response = JsonResponse({**summary, "version": etag})
    else:
        response = not_modified
    response["ETag"] = etag
    patch_cache_control(response, no_cache=True, private=True)
    return response


def _call_attempts(review: ReviewRequest) -> list[dict[str, Any]]:
    call = review.tool_call
    if call is None:
        return []
    outputs = task_call_outputs(task=review.task, call_ids=[call.call_id])
    return call_attempts(call=call, outputs=outputs.get(call.call_id, {}))


def _detail(
    request: HttpRequest,
    review: ReviewRequest,
    *,
    arguments_text: str | None = None,
    errors: list[dict[str, str]] | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    tool = task_tool(task_id=review.task_id, name=review.tool)
    schema = json.dumps(tool.json_schema(), indent=2) if tool is not None else ""
    can_decide = selectors.user_can_decide(request.user)
    today = timezone.localdate()
    values, _ = _inbox_view(request)
    query = _inbox_query(values)
    previous, following = selectors.review_neighbours(
        order=selectors.reviews_pending_order(**_selector_filters(request, values)),
        review_id=review.id,
    )
    assignable_users, assignable_groups = (
        selectors.operators_and_groups() if can_decide else ([], [])
    )
    return render(
        request,
        "review/detail.html",
        {
            "review": review,
            "rules": [selectors.rule_text(rule) for rule in review.matched_rules],
            "arguments_text": arguments_text
            or json.dumps(review.arguments, indent=2, ensure_ascii=False),
            "arguments_hash": canonical_hash(review.arguments),
            "target_hash": review.target_fingerprint.get("hash", ""),
            "targets": selectors.review_targets_text(review=review),
            "file_paths": selectors.review_file_paths(review=review),
            "reopened_as": list(review.reopened_as.order_by("id").only("id")),
            "original_text": json.dumps(review.original_arguments, indent=2, ensure_ascii=False),
            "schema": schema,
            "mcp": selectors.review_mcp_facts(review=review, tool=tool),
            "recent_messages": checkpoint_recent_messages(checkpoint=review.checkpoint),
            "approvals": selectors.review_approvers(review=review),
            "facts": selectors.review_facts(review=review),
            "notifications": selectors.review_notifications(review=review),
            "can_decide": can_decide and review.status == ReviewStatus.PENDING,
            "unknown_outcome": review.kind == services.UNKNOWN_OUTCOME,
            # What was seen of a call whose outcome is unknown (tasks.outputs).
            "call_attempts": _call_attempts(review)
            if review.kind == services.UNKNOWN_OUTCOME
            else [],
            "preview_bytes": PREVIEW_BYTES,
            # A LangGraph interrupt offers only the decisions its graph accepts.
            "graph": review.interrupt,
            "allowed": (review.interrupt or {}).get("allowed") or ["approve", "edit", "reject"],
            "creator_blocked": review.forbid_creator
            and review.task.created_by_id == request.user.pk,
            # "Approve and always allow…" (review.standing).
            "suggestions": standing.review_suggestions(review),
            "until_default": today + timedelta(days=standing.DEFAULT_DAYS),
            "until_max": today + timedelta(days=standing.MAX_DAYS),
            "standing_rule": selectors.standing_rule_get(rule_id=review.standing_rule_id)
            if review.standing_rule_id
            else None,
            "remembered": selectors.standing_rules_from(review=review),
            "can_operate": can_decide,
            # Triage (review.triage) and the inbox view this page was opened from.
            "query": query,
            "previous_id": previous,
            "next_id": following,
            "comments": selectors.review_comments(review=review),
            "comment_max": triage.COMMENT_MAX,
            "assignable_users": assignable_users,
            "assignable_groups": assignable_groups,
            "assigned_user": review.assigned_to.get_username() if review.assigned_to else "",
            "assigned_group_name": review.assigned_group.name if review.assigned_group else "",
            "errors": errors or [],
            "error": error,
        },
        status=status,
    )


def _decided(review: ReviewRequest) -> str:
    """What the decision did, for the message after it."""
    if review.kind == services.UNKNOWN_OUTCOME:
        return f"{review.decision_reason.replace('_', ' ')} recorded"
    if review.status == ReviewStatus.APPROVED:
        return "approved with edits" if review.edited_arguments is not None else "approved"
    return str(review.status)


@viewer_required
def review_detail(request: HttpRequest, review_id: int) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    if review.status == ReviewStatus.PENDING and selectors.user_can_decide(request.user):
        review_viewed(review=review, user=request.user)
    return _detail(request, review)


@viewer_required
@require_POST
def review_decide(request: HttpRequest, review_id: int) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    choice = request.POST.get("decision", "")
    arguments = result = response = None
    arguments_text = request.POST.get("arguments")
    result_text = request.POST.get("result", "").strip()
    response_text = request.POST.get("response", "")
    try:
        if choice == "edit":
            arguments = json.loads(arguments_text or "")
        if choice == "mark_done" and result_text:
            result = json.loads(result_text)
        if choice == "respond":
            # A plain interrupt is answered with JSON; a tool approval with the tool's text.
            plain = (review.interrupt or {}).get("mode") == "plain"
            response = json.loads(response_text) if plain else response_text
    except ValueError as exc:
        field = {"edit": "arguments", "respond": "response"}.get(choice, "result")
        return _detail(
            request,
            review,
            arguments_text=arguments_text,
            status=422,
            error=f"The {field} must be valid JSON.",
            errors=[{**json_error(exc), "field": field}],
        )
    suggestion = request.POST.get("remember_suggestion", "")
    remember = (
        {
            "suggestion": suggestion,
            "until": request.POST.get("remember_until", ""),
            "scope": request.POST.get("remember_scope", ""),
        }
        if suggestion
        else None
    )
    values, _ = _inbox_view(request)
    order = selectors.reviews_pending_order(**_selector_filters(request, values))
    try:
        review = services.review_decide(
            review_id=review.id,
            user=request.user,
            decision=DECISIONS.get(choice, choice),
            remember=remember,
            arguments_hash=request.POST.get("arguments_hash") or None,
            target_hash=request.POST.get("target_hash") or None,
            comment=request.POST.get("comment", "").strip(),
            arguments=arguments,
            reason=request.POST.get("reason", "").strip(),
            result=result,
            response=response,
            via=ReceiptVia.PAGE,
        )
    except services.ReviewInvalid as exc:
        return _detail(
            request,
            review,
            arguments_text=arguments_text,
            status=exc.status,
            error=exc.message,
            errors=exc.errors,
        )
    except services.ReviewForbidden as exc:
        return _detail(request, review, status=exc.status, error=exc.message)
    except services.ReviewConflict as exc:
        messages.error(request, exc.message)
        # A changed target reopened the review: the new one shows the state as it is now.
        return redirect("review:detail", review_id=exc.review_id or review.id)
    if review.status == ReviewStatus.PENDING:
        messages.success(
            request,
            f"Approval recorded ({review.approvals.count()} of "
            f"{review.approvals_required}); waiting for another operator.",
        )
    else:
        messages.success(request, f"{review.tool}: {_decided(review)}.")
    return _to_next(request, values=values, order=order, after=review.id)


def _to_next(
    request: HttpRequest, *, values: dict[str, str], order: list[int], after: int
) -> HttpResponse:
    """After a decision: the next pending review this user may decide, in the inbox's order
    (`order`, read before the decision), else the inbox; both keep the inbox's view."""
    query = _inbox_query(values)
    following = selectors.review_next_decidable(user=request.user, order=order, after=after)
    if following is None:
        messages.info(request, "No more reviews for you to decide in this view.")
        return redirect(reverse("review:inbox") + query)
    return redirect(reverse("review:detail", kwargs={"review_id": following}) + query)


def _back(request: HttpRequest, review_id: int) -> HttpResponse:
    """Back to where a triage form was posted from: a review page or the inbox."""
    back = request.POST.get("next", "")
    if back.startswith("/reviews/") and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}
    ):
        return redirect(back)
    return redirect("review:detail", review_id=review_id)


def _triage(request: HttpRequest, review_id: int, act: Any, done: str) -> HttpResponse:
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
def review_claim(request: HttpRequest, review_id: int) -> HttpResponse:
    take_over = request.POST.get("take_over") == "1"
    return _triage(
        request,
        review_id,
        lambda r: triage.review_claim(review_id=r.id, user=request.user, take_over=take_over),
        "taken over" if take_over else "claimed",
    )


@viewer_required
@require_POST
def review_unclaim(request: HttpRequest, review_id: int) -> HttpResponse:
    return _triage(
        request,
        review_id,
        lambda r: triage.review_unclaim(review_id=r.id, user=request.user),
        "claim released",
    )


@viewer_required
@require_POST
def review_assign(request: HttpRequest, review_id: int) -> HttpResponse:
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
def review_comment(request: HttpRequest, review_id: int) -> HttpResponse:
    text = request.POST.get("text", "")
    return _triage(
        request,
        review_id,
        lambda r: triage.review_comment_add(review_id=r.id, user=request.user, text=text),
        "comment added",
    )


def _bulk_items(raw: list[str]) -> list[tuple[Any, str]]:
    """The ticked rows ("<id>:<arguments_hash>"); a malformed one keeps its text as the id and
    an empty hash, so it fails alone."""
    items = []
    for value in raw:
        review_id, _, seen = value.partition(":")
        items.append((review_id[:20], seen if len(seen) == 64 else ""))
    return items


@viewer_required
@require_POST
def reviews_bulk(request: HttpRequest) -> HttpResponse:
    """Approve or reject the ticked reviews, each bound to the hash its row showed; one line
    per item says what happened to it."""
    back = request.POST.get("next", "")
    if not (
        back.startswith("/reviews/")
        and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()})
    ):
        back = reverse("review:inbox")
    items = _bulk_items(request.POST.getlist("item"))
    try:
        results = triage.reviews_decide_bulk(
            user=request.user,
            decision=request.POST.get("decision", ""),
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
    done = sum(r.ok for r in results)
    messages.info(request, f"Bulk {request.POST.get('decision')}: {done} of {len(results)} done.")
    for r in results:
        if r.ok and r.review_status == ReviewStatus.PENDING:
            messages.success(request, f"Review {r.id}: approval recorded; another operator must.")
        elif r.ok:
            messages.success(request, f"Review {r.id}: {r.review_status}.")
        else:
            messages.error(request, f"Review {r.id}: {r.error}")
    return redirect(back)


@viewer_required
def standing_rules(request: HttpRequest) -> HttpResponse:
    page = Paginator(selectors.standing_rules(), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "review/standing_rules.html",
        {"page": page, "can_operate": selectors.user_can_decide(request.user)},
    )


@operator_required
@require_POST
def standing_rule_resume(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = selectors.standing_rule_get(rule_id=rule_id)
    try:
        services.standing_rule_resume(
            rule_id=rule.id, user=request.user, reason=request.POST.get("reason", "").strip()
        )
    except services.ReviewError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Standing rule {rule.name} resumed.")
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect(back)
    return redirect("review:standing_rules")
