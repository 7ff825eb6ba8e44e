"""Server-rendered review pages. Thin: read through selectors, act through one service."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from checkpoints.selectors import checkpoint_recent_messages
from harness_site.access import viewer_required
from harness_site.inputs import json_error
from review import selectors, services
from review.models import ReviewRequest, ReviewStatus, RuleRisk
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
    return render(
        request,
        "review/detail.html",
        {
            "review": review,
            "rules": [selectors.rule_text(rule) for rule in review.matched_rules],
            "arguments_text": arguments_text
            or json.dumps(review.arguments, indent=2, ensure_ascii=False),
            "arguments_hash": canonical_hash(review.arguments),
            "original_text": json.dumps(review.original_arguments, indent=2, ensure_ascii=False),
            "schema": schema,
            "mcp": selectors.review_mcp_facts(review=review, tool=tool),
            "recent_messages": checkpoint_recent_messages(checkpoint=review.checkpoint),
            "approvals": selectors.review_approvers(review=review),
            "can_decide": can_decide and review.status == ReviewStatus.PENDING,
            "unknown_outcome": review.kind == services.UNKNOWN_OUTCOME,
            # A LangGraph interrupt offers only the decisions its graph accepts.
            "graph": review.interrupt,
            "allowed": (review.interrupt or {}).get("allowed") or ["approve", "edit", "reject"],
            "creator_blocked": review.forbid_creator
            and review.task.created_by_id == request.user.pk,
            "errors": errors or [],
            "error": error,
        },
        status=status,
    )


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
    try:
        review = services.review_decide(
            review_id=review.id,
            user=request.user,
            decision=DECISIONS.get(choice, choice),
            arguments_hash=request.POST.get("arguments_hash") or None,
            comment=request.POST.get("comment", "").strip(),
            arguments=arguments,
            reason=request.POST.get("reason", "").strip(),
            result=result,
            response=response,
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
        return redirect("review:detail", review_id=review.id)
    if review.status == ReviewStatus.PENDING:
        messages.success(
            request,
            f"Approval recorded ({review.approvals.count()} of "
            f"{review.approvals_required}); waiting for another operator.",
        )
        return redirect("review:detail", review_id=review.id)
    messages.success(request, f"{review.tool}: {DECISIONS[choice]} recorded.")
    return redirect("tasks:detail", task_id=review.task_id)
