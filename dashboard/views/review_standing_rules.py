"""The standing rules page (`/reviews/rules/`) and resuming a paused rule."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from review import selectors, services
from tasks.web.access import operator_required, viewer_required


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
