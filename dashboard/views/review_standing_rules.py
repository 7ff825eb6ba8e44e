"""The standing rules pages (`/reviews/rules/`, `/reviews/rules/<id>/`) and their kill switch:
pause, resume and revoke (review.services.rule_switch), each from the list or the rule's page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from harness_base.http import AuthedRequest
from review import selectors, services, standing
from review.models import ReceiptVia
from tasks.web.access import operator_required, viewer_required


@viewer_required
def standing_rules(request: AuthedRequest) -> HttpResponse:
    page = Paginator(selectors.standing_rules(), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "review/standing_rules.html",
        {"page": page, "can_operate": selectors.user_can_decide(request.user)},
    )


@viewer_required
def standing_rule_detail(request: AuthedRequest, rule_id: int) -> HttpResponse:
    rule = selectors.standing_rule_get(rule_id=rule_id)
    return render(
        request,
        "review/standing_rule.html",
        {
            "r": rule,
            "matches": standing.rule_matches(rule),
            "can_operate": selectors.user_can_decide(request.user),
        },
    )


def _switch(
    request: AuthedRequest, rule_id: int, act: Callable[..., Any], done: str
) -> HttpResponse:
    rule = selectors.standing_rule_get(rule_id=rule_id)
    reason = request.POST.get("reason", "").strip()
    try:
        result = act(rule_id=rule.id, user=request.user, reason=reason, via=ReceiptVia.PAGE)
    except services.ReviewError as exc:
        messages.error(request, exc.message)
    else:
        if result is False:
            messages.error(request, f"Standing rule {rule.name} is paused or revoked already.")
        else:
            messages.success(request, f"Standing rule {rule.name} {done}.")
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect(back)
    return redirect("review:standing_rules")


@operator_required
@require_POST
def standing_rule_resume(request: AuthedRequest, rule_id: int) -> HttpResponse:
    return _switch(request, rule_id, services.standing_rule_resume, "resumed")


@operator_required
@require_POST
def standing_rule_pause(request: AuthedRequest, rule_id: int) -> HttpResponse:
    return _switch(request, rule_id, services.standing_rule_pause, "paused")


@operator_required
@require_POST
def standing_rule_revoke(request: AuthedRequest, rule_id: int) -> HttpResponse:
    return _switch(request, rule_id, services.standing_rule_revoke, "revoked")
