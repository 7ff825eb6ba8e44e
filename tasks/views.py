"""Server-rendered task pages. Thin: read through selectors, act through services."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_verify
from tasks import selectors, services
from tasks.models import Task
from tasks.states import IllegalTransition, TaskStatus, TransitionConflict


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    counts = dict(Task.objects.values_list("status").annotate(n=Count("id")))
    rows = [(status, counts.get(status, 0)) for status in TaskStatus.values]
    recent = selectors.tasks_list()[:10]
    return render(request, "tasks/overview.html", {"status_counts": rows, "recent": recent})


@login_required
def task_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status") or None
    q = request.GET.get("q") or None
    page = Paginator(selectors.tasks_list(status=status, q=q), 50).get_page(request.GET.get("page"))
    return render(request, "tasks/list.html", {
        "page": page, "status": status or "", "q": q or "", "statuses": TaskStatus.values,
    })


@login_required
def task_detail(request: HttpRequest, task_id) -> HttpResponse:
    task = selectors.access_task(request.user, task_id)
    checkpoints = [
        (cp, checkpoint_verify(cp))
        for cp in Checkpoint.objects.filter(task=task).order_by("seq")
    ]
    return render(request, "tasks/detail.html", {
        "task": task,
        "checkpoints": checkpoints,
        "events": selectors.task_events(task=task),
        "tool_calls": selectors.task_tool_calls(task=task),
        "can_operate": selectors.user_can_operate(request.user),
    })


@login_required
@require_POST
def task_cancel(request: HttpRequest, task_id) -> HttpResponse:
    task = selectors.access_task(request.user, task_id)
    if not selectors.user_can_operate(request.user):
        return HttpResponseForbidden("only operators may cancel tasks")
    try:
        services.task_cancel(task_id=task.id, user=request.user,
                             reason=request.POST.get("reason", ""))
        messages.success(request, "Cancel requested.")
    except (TransitionConflict, IllegalTransition) as exc:
        messages.error(request, str(exc))
    return redirect("tasks:detail", task_id=task.id)
