"""Server-rendered task pages: the filtered list with bulk actions, and the task page with its
live header, timeline and tabs. Thin: read through selectors, act through services."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from checkpoints.selectors import (
    graph_checkpoints,
    graph_task,
    task_checkpoint_marks,
    task_checkpoints,
)
from checkpoints.services import checkpoint_verify
from harness_site.access import operator_required, viewer_required
from harness_site.config import harness_config
from harness_site.htmx import is_htmx
from harness_site.pagination import CappedPaginator
from review.selectors import task_reviews
from tasks import bulk, charts, selectors, services
from tasks.forms import BULK_LIMIT, BulkActionForm, TaskFilterForm
from tasks.models import Task
from tasks.states import TERMINAL, IllegalTransition, TransitionConflict

LIST_PAGE_SIZE = 50
TAB_PAGE_SIZE = 100
EVENTS_PAGE_SIZE = 200
TABS = ("events", "calls", "reviews", "checkpoints")
GRAPH_CHECKPOINTS_SHOWN = 500


def _query_without(request: HttpRequest, *names: str) -> str:
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()


# --- the list -------------------------------------------------------------------------------


@viewer_required
def task_list(request: HttpRequest) -> HttpResponse:
    form = TaskFilterForm(request.GET)
    filters = form.filters()
    page = CappedPaginator(selectors.tasks_list(**filters), LIST_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "tasks/list.html",
        {
            "form": form,
            "page": page,
            "filtered": bool(filters),
            "query": _query_without(request, "page"),
            "can_operate": selectors.user_can_operate(request.user),
            "bulk_actions": list(bulk.BULK_ACTIONS),
            "bulk_limit": BULK_LIMIT,
        },
    )


@require_POST
@operator_required
def task_bulk(request: HttpRequest) -> HttpResponse:
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


# --- the task page --------------------------------------------------------------------------


def _budget(task: Task) -> dict[str, Any]:
    budget = (task.spec or {}).get("budget") or {}
    session = budget.get("session_timeout_s") or harness_config().timeouts.session_s
    return {
        "max_steps": budget.get("max_steps"),
        "max_tokens": budget.get("max_tokens"),
        "session_s": session,
    }


def _live_context(request: HttpRequest, task: Task) -> dict[str, Any]:
    """The header and the timeline: what the live poll refreshes."""
    events = selectors.task_timeline_events(
        task=task, types=charts.TIMELINE_EVENT_TYPES | selectors.USAGE_EVENTS
    )
    figure = charts.task_timeline(
        task=task,
        events=events,
        calls=selectors.task_tool_call_attempts(task=task),
        checkpoints=task_checkpoint_marks(task_id=task.id),
        now=timezone.now(),
    )
    figure["layout"]["uirevision"] = str(task.id)
    return {
        "task": task,
        "events": events,
        "timeline": figure,
        "budget": _budget(task),
        "live": task.status not in TERMINAL,
        "can_operate": selectors.user_can_operate(request.user),
    }


def _tab_context(request: HttpRequest, task: Task, tab: str) -> dict[str, Any]:
    page_number = request.GET.get("page")
    context: dict[str, Any] = {"tab": tab, "task": task, "view": ""}
    if tab == "events":
        view = "frames" if request.GET.get("view") == "frames" else "compact"
        if view == "frames":
            page = Paginator(selectors.task_events(task=task), TAB_PAGE_SIZE).get_page(page_number)
            rows = page.object_list
        else:
            # Folded per page of raw events, so the tab costs a page, not the whole log.
            page = Paginator(selectors.task_event_summaries(task=task), EVENTS_PAGE_SIZE).get_page(
                page_number
            )
            rows = selectors.task_events_compact(list(page.object_list))
        context.update(view=view, page=page, rows=rows)
    elif tab == "calls":
        context["page"] = Paginator(selectors.task_tool_calls(task=task), TAB_PAGE_SIZE).get_page(
            page_number
        )
    elif tab == "reviews":
        context["reviews"] = task_reviews(task_id=task.id)
    elif graph_task(task):
        # A graph task's checkpoints are LangGraph's (checkpoints.langgraph).
        context["graph_checkpoints"] = graph_checkpoints(task=task)[:GRAPH_CHECKPOINTS_SHOWN]
    else:
        checkpoints = task_checkpoints(task_id=task.id)
        seq = request.GET.get("seq")
        if seq and seq.isdigit() and not page_number:
            # ?seq=N opens the page holding checkpoint N (links from reviews and the timeline).
            page_number = checkpoints.filter(seq__lt=int(seq)).count() // TAB_PAGE_SIZE + 1
        page = Paginator(checkpoints, TAB_PAGE_SIZE).get_page(page_number)
        context["page"] = page
        context["checkpoints"] = [(cp, checkpoint_verify(cp)) for cp in page.object_list]
    context["can_operate"] = selectors.user_can_operate(request.user)
    return context


@viewer_required
def task_detail(request: HttpRequest, task_id) -> HttpResponse:
    task = selectors.access_task(request.user, task_id)
    tab = request.GET.get("tab") if request.GET.get("tab") in TABS else "events"
    if is_htmx(request):
        return render(request, "tasks/_tab.html", _tab_context(request, task, tab))
    context = _live_context(request, task)
    context.update(_tab_context(request, task, tab))
    context["model_usage"] = selectors.task_model_usage(context["events"])
    context["tabs"] = TABS
    return render(request, "tasks/detail.html", context)


@viewer_required
def task_live(request: HttpRequest, task_id) -> HttpResponse:
    """The HTMX poll: header + timeline data. Once the task is terminal the fragment comes
    back without its polling trigger, so polling stops."""
    task = selectors.access_task(request.user, task_id)
    return render(request, "tasks/_live.html", _live_context(request, task))


@viewer_required
def task_events_download(request: HttpRequest, task_id) -> StreamingHttpResponse:
    """The full frame log as a JSON array, streamed in chunks (tasks can have many events)."""
    task = selectors.access_task(request.user, task_id)

    def chunks() -> Iterator[str]:
        yield "["
        for n, e in enumerate(selectors.task_events(task=task).iterator(chunk_size=1000)):
            yield ("," if n else "") + json.dumps(
                {
                    "seq": e.id,
                    "type": e.type,
                    "step_index": e.step_index,
                    "actor": e.actor,
                    "created_at": e.created_at,
                    "payload": e.payload,
                },
                cls=DjangoJSONEncoder,
            )
        yield "]"

    response = StreamingHttpResponse(chunks(), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="task-{task.id}-events.json"'
    return response


@require_POST
@operator_required
def task_cancel(request: HttpRequest, task_id) -> HttpResponse:
    task = selectors.access_task(request.user, task_id)
    try:
        services.task_cancel(
            task_id=task.id, user=request.user, reason=request.POST.get("reason", "")
        )
        messages.success(request, "Cancel requested.")
    except (TransitionConflict, IllegalTransition) as exc:
        messages.error(request, str(exc))
    return redirect("tasks:detail", task_id=task.id)
