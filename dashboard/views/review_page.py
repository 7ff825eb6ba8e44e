"""The review page (`/reviews/<id>/`) and its decision, after which the next review of the
inbox's view opens. Thin: read through selectors, act through one service."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from checkpoints.selectors import checkpoint_recent_messages, graph_messages
from dashboard.edit_form import EditState, edit_bind, edit_initial
from dashboard.views.review_drift import drift_arguments, drift_context, drift_decision_fields
from dashboard.views.review_inbox import inbox_query, inbox_view, selector_filters
from dashboard.views.review_plan import plan_context
from harness_base.http import AuthedRequest
from review import selectors, services, standing, triage
from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.rollups import review_viewed
from tasks.canonical import canonical_hash
from tasks.models import PREVIEW_BYTES
from tasks.selectors import call_attempts, task_call_outputs, task_tool
from tasks.web.access import viewer_required
from tasks.web.inputs import json_error

# Form buttons -> review_decide decisions ("edit" approves the edited arguments).
DECISIONS = {
    "approve": "approve",
    "edit": "approve",
    "reject": "reject",
    "respond": "respond",
    **{name: name for name in services.UNKNOWN_OUTCOME_DECISIONS},
}


def _recent_messages(review: ReviewRequest, limit: int = 8) -> list[Any]:
    """What the model had seen when the call was asked for: the review's checkpoint's
    messages, or a graph interrupt's conversation (its LangGraph checkpoint's `messages`)."""
    graph_checkpoint = (review.interrupt or {}).get("checkpoint_id")
    if review.kind == "langgraph" and isinstance(graph_checkpoint, str):
        messages = graph_messages(task_id=review.task_id, checkpoint_id=graph_checkpoint)
        return [m for m in messages if m.role != "system"][-limit:]
    return checkpoint_recent_messages(checkpoint=review.checkpoint, limit=limit)


def _call_attempts(review: ReviewRequest) -> list[dict[str, Any]]:
    call = review.tool_call
    if call is None:
        return []
    outputs = task_call_outputs(task=review.task, call_ids=[call.call_id])
    return call_attempts(call=call, outputs=outputs.get(call.call_id, {}))


def review_edit_state(review: ReviewRequest, data: QueryDict | None = None) -> EditState:
    """The edit form of `review` (dashboard.edit_form): from its tool's argument schema, bound
    to a post's `data` when given. A LangGraph interrupt's edit stays JSON: the graph, not the
    tool's schema, says what it accepts."""
    tool = task_tool(task_id=review.task_id, name=review.tool)
    schema = tool.json_schema() if tool is not None else None
    json_only = review.interrupt is not None
    if data is None:
        return edit_initial(schema=schema, arguments=review.arguments, json_only=json_only)
    return edit_bind(schema=schema, arguments=review.arguments, data=data, json_only=json_only)


def review_detail_page(
    request: AuthedRequest,
    review: ReviewRequest,
    *,
    edit: EditState | None = None,
    errors: list[dict[str, str]] | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The review page; `edit`: the edit form as posted (with its errors or its preview)."""
    tool = task_tool(task_id=review.task_id, name=review.tool)
    schema = json.dumps(tool.json_schema(), indent=2) if tool is not None else ""
    can_decide = selectors.user_can_decide(request.user)
    today = timezone.localdate()
    values, _ = inbox_view(request)
    query = inbox_query(values)
    previous, following = selectors.review_neighbours(
        order=selectors.reviews_pending_order(**selector_filters(request, values)),
        review_id=review.id,
    )
    assignable_users, assignable_groups = (
        selectors.review_assignees(review=review) if can_decide else ([], [])
    )
    return render(
        request,
        "review/detail.html",
        {
            "review": review,
            "rules": [
                selectors.rule_text(rule, expires=review.expires_at is not None)
                for rule in review.matched_rules
            ],
            "arguments_text": json.dumps(review.arguments, indent=2, ensure_ascii=False),
            "edit": edit or review_edit_state(review),
            "arguments_hash": canonical_hash(review.arguments),
            "target_hash": review.target_fingerprint.get("hash", ""),
            "targets": selectors.review_targets_text(review=review),
            "file_paths": selectors.review_file_paths(review=review),
            "reopened_as": list(review.reopened_as.order_by("id").only("id")),
            "original_text": json.dumps(review.original_arguments, indent=2, ensure_ascii=False),
            "schema": schema,
            "mcp": selectors.review_mcp_facts(review=review, tool=tool),
            "recent_messages": _recent_messages(review),
            "approvals": selectors.review_approvers(review=review),
            "facts": selectors.review_facts(review=review),
            "edit_changes": selectors.review_edit_changes(review=review),
            "notifications": selectors.review_notifications(review=review),
            "can_decide": can_decide and review.status == ReviewStatus.PENDING,
            "unknown_outcome": review.kind == services.UNKNOWN_OUTCOME,
            **drift_context(review),
            **plan_context(review),
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
    if review.kind == services.VERSION_DRIFT and review.choice:
        return f"{review.choice.get('decision', 'decision')} recorded"
    if review.status == ReviewStatus.APPROVED:
        return "approved with edits" if review.edited_arguments is not None else "approved"
    return str(review.status)


@viewer_required
def review_detail(request: AuthedRequest, review_id: int) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    if review.status == ReviewStatus.PENDING and selectors.user_can_decide(request.user):
        review_viewed(review=review, user=request.user)
    return review_detail_page(request, review)


@viewer_required
@require_POST
def review_decide(request: AuthedRequest, review_id: int) -> HttpResponse:
    review = selectors.access_review(request.user, review_id)
    choice = request.POST.get("decision", "")
    arguments = result = response = None
    edit = review_edit_state(review, request.POST) if choice == "edit" else None
    if edit is not None and edit.errors:
        return review_detail_page(
            request, review, edit=edit, status=422, error=edit.error, errors=edit.errors
        )
    if edit is not None:
        arguments = edit.arguments
    result_text = request.POST.get("result", "").strip()
    response_text = request.POST.get("response", "")
    try:
        if choice == "mark_done" and result_text:
            result = json.loads(result_text)
        if choice == "continue":
            arguments = drift_arguments(request.POST, review)
        if choice == "respond":
            # A plain interrupt is answered with JSON; a tool approval with the tool's text.
            plain = (review.interrupt or {}).get("mode") == "plain"
            response = json.loads(response_text) if plain else response_text
    except ValueError as exc:
        field = {"respond": "response", "continue": "arguments"}.get(choice, "result")
        return review_detail_page(
            request,
            review,
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
            "confirm_scope": request.POST.get("remember_confirm_scope", ""),
        }
        if suggestion
        else None
    )
    values, _ = inbox_view(request)
    order = selectors.reviews_pending_order(**selector_filters(request, values))
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
            **drift_decision_fields(request.POST),
            via=ReceiptVia.PAGE,
        )
    except services.ReviewInvalid as exc:
        if edit is not None:
            edit.errors_add(exc.errors)
        return review_detail_page(
            request, review, edit=edit, status=exc.status, error=exc.message, errors=exc.errors
        )
    except services.ReviewForbidden as exc:
        return review_detail_page(request, review, status=exc.status, error=exc.message)
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
    request: AuthedRequest, *, values: dict[str, str], order: list[int], after: int
) -> HttpResponse:
    """After a decision: the next pending review this user may decide, in the inbox's order
    (`order`, read before the decision), else the inbox; both keep the inbox's view."""
    query = inbox_query(values)
    following = selectors.review_next_decidable(user=request.user, order=order, after=after)
    if following is None:
        messages.info(request, "No more reviews for you to decide in this view.")
        return redirect(reverse("review:inbox") + query)
    return redirect(reverse("review:detail", kwargs={"review_id": following}) + query)
