"""`/audit/`: every operator action with actor, time, reason and before/after."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard import selectors
from dashboard.forms import AuditFilterForm
from tasks.web.access import viewer_required

PAGE_SIZE = 50


@viewer_required
def audit_log(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    entries = selectors.audit_entries(
        actor=filters.get("actor"),
        action=filters.get("action"),
        task_id=filters.get("task"),
        date_from=filters.get("date_from"),
        date_to=filters.get("date_to"),
    )
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "dashboard/audit.html",
        {
            "form": form,
            "page": page,
            "query": query.urlencode(),
            "actions": selectors.AUDIT_ACTIONS,
        },
    )
