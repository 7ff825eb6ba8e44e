"""Server-rendered review pages. Thin: read through selectors, act through one service."""

from __future__ import annotations

import json
from datetime import timedelta

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from checkpoints.selectors import checkpoint_recent_messages
from harness_site.access import operator_required, viewer_required
from harness_site.inputs import json_error
from review import selectors, services, standing
from review.models import ReceiptVia, ReviewRequest, ReviewStatus, RuleRisk
from tasks.canonical import canonical_hash
from tasks.selectors import task_tool

# Form buttons -> review_decide decisions ("edit" approves the edited arguments).
DECISIONS = {
    "approve": "approve",
    "edit": "approve",
    "reject": "reject",
    "respond": "respond",
    **{name: name for name in services.UNKNOWN_OUTCOME_DECISIONS},
}


@viewer_required
def inbox(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", ReviewStatus.PENDING)
    filters = {key: request.GET.get(key, "") for key in ("tool", "risk", "task")}
    reviews = selectors.reviews_list(
        status=None if status == "all" else status,
        **{key: value or None for key, value in filters.items()},
    )
    page = Paginator(reviews, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "review/inbox.html",
        {
            "page": page,
            "status": status,
            **filters,
            "statuses": ["all", *ReviewStatus.values],
            "risks": RuleRisk.values,
            "tools": selectors.reviews_tools(),
        },
    )


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
    return _detail(request, selectors.access_review(request.user, review_id))


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
        return redirect("review:detail", review_id=review.id)
    messages.success(request, f"{review.tool}: {_decided(review)}.")
    return redirect("tasks:detail", task_id=review.task_id)


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
