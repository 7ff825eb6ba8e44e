"""The task list (`/tasks/`): filters and sort kept in the URL, and bulk cancel / retry.
Thin: read through selectors, act through dashboard.bulk."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from dashboard import bulk
from dashboard.task_forms import BULK_LIMIT, BulkActionForm, TaskFilterForm
from dashboard.views.common import SortCycle, sort_headers
from harness_base.http import AuthedRequest
from tasks import selectors
from tasks.models import Task
from tasks.web.access import operator_required, viewer_required
from tasks.web.pagination import CountingPaginator

LIST_PAGE_SIZE = 50


# The list's sortable columns (tasks.selectors.TASK_SORTS), in click order.
TASK_COLUMNS: dict[str, SortCycle] = {
    "title": (("title", "ascending"), ("-title", "descending")),
    "status": (("status", "ascending"), ("-status", "descending")),
    "created": (("-created", "descending"), ("created", "ascending")),
}


def _query_without(request: AuthedRequest, *names: str) -> str:
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()


@viewer_required
def task_list(request: AuthedRequest) -> HttpResponse:
    form = TaskFilterForm(request.GET)
    filters = form.filters()
    page = CountingPaginator(selectors.tasks_list(**filters), LIST_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    sort = filters.get("sort", selectors.TASK_SORT_DEFAULT)
    return render(
        request,
        "tasks/list.html",
        {
            "form": form,
            "page": page,
            "filtered": bool(set(filters) - {"sort"}),
            "query": _query_without(request, "page"),
            "sorting": sort_headers(request.GET, current=sort, columns=TASK_COLUMNS),
            "can_operate": selectors.user_can_operate(request.user),
            "bulk_actions": list(bulk.BULK_ACTIONS),
            "bulk_limit": BULK_LIMIT,
        },
    )


@require_POST
@operator_required
def task_bulk(request: AuthedRequest) -> HttpResponse:
    """Bulk cancel / retry. The first POST shows what would be affected and asks to confirm;
    the confirmed POST acts on each task in its own transaction."""
    form = BulkActionForm(request.POST, actions=list(bulk.BULK_ACTIONS))
    if not form.is_valid():
        messages.error(request, "Nothing to do: choose an action and some tasks.")
        return redirect("tasks:list")
    data = form.cleaned_data
    if data["select"] == "matching":
        selected = selectors.tasks_list(**TaskFilterForm(request.POST).filters())
    else:
        selected = Task.objects.filter(id__in=data["ids"]).order_by("-created_at")
    tasks = list(selected.values("id", "title", "status")[: BULK_LIMIT + 1])
    if not tasks:
        messages.error(request, "No task selected.")
        return redirect(data["next"])
    if len(tasks) > BULK_LIMIT:
        messages.error(request, f"At most {BULK_LIMIT} tasks at once; narrow the filters.")
        return redirect(data["next"])
    if not data["confirmed"]:
        return render(
            request,
            "tasks/bulk_confirm.html",
            {
                "action": data["action"],
                "tasks": tasks,
                "next": data["next"],
                "reason": data["reason"],
            },
        )
    act = bulk.BULK_ACTIONS[data["action"]]
    outcome = bulk.tasks_apply(
        task_ids=[t["id"] for t in tasks], action=act, user=request.user, reason=data["reason"]
    )
    messages.success(
        request,
        f"{data['action'].capitalize()}: {len(outcome.done)} done"
        + (f", {len(outcome.skipped)} skipped" if outcome.skipped else ""),
    )
    for task_id, why in outcome.skipped[:10]:
        messages.warning(request, f"{task_id}: {why}")
    return redirect(data["next"])
