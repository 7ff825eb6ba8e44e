"""The task page (`/tasks/<id>/`): its live header and timeline, its tabs, and the polled
fragments (header, tabs, the running call's output), each answered with a 304 while its ETag
holds. Thin: read through selectors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any
from weakref import WeakKeyDictionary

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers

from cases.family import task_family
from cases.selectors import case_unsavable_reason
from checkpoints.selectors import (
    graph_checkpoints,
    graph_task,
    task_checkpoint_marks,
    task_checkpoints,
)
from checkpoints.services import checkpoint_verify, checkpoints_with_sources
from dashboard.outputs import live_output
from dashboard.selectors import user_time_zone
from dashboard.views.task_files import files_tab_context
from harness_base.http import AuthedRequest
from harness_base.queues import PRIORITY_QUEUES
from review.context_processors import pending_reviews_count
from review.selectors.task_reviews import task_call_edits, task_reviews, task_reviews_pending
from tasks import charts, selectors
from tasks.models import PREVIEW_BYTES, Task
from tasks.spec import budget_in_force, spec_model_name
from tasks.states import TERMINAL, TaskStatus
from tasks.tracing import task_trace
from tasks.web.access import viewer_required
from tasks.web.htmx import is_htmx

TAB_PAGE_SIZE = 100
EVENTS_PAGE_SIZE = 200
TABS = ("events", "calls", "reviews", "checkpoints", "files")
GRAPH_CHECKPOINTS_SHOWN = 500


def _all_steps(request: AuthedRequest) -> bool:
    """?timeline=all: a long task's timeline with every step (tasks.charts.TIMELINE_STEPS)."""
    return request.GET.get("timeline") == "all"


def _live_context(request: AuthedRequest, task: Task) -> dict[str, Any]:
    """The header, the timeline and the model usage: what the live poll refreshes."""
    now = timezone.now()
    from_step = charts.timeline_from_step(task, all_steps=_all_steps(request))
    events = selectors.task_timeline_events(
        task=task,
        types=charts.TIMELINE_EVENT_TYPES | selectors.USAGE_EVENTS,
        from_step=from_step,
        kept=charts.TIMELINE_KEPT_EVENTS,
        kept_failed=charts.TIMELINE_KEPT_FAILED_EVENTS,
    )
    # The time axis in the zone the user chose in /preferences/ (else UTC).
    with timezone.override(user_time_zone(user=request.user) or "UTC"):
        figure = charts.task_timeline(
            task=task,
            events=events,
            calls=selectors.task_tool_call_attempts(task=task, from_step=from_step),
            checkpoints=task_checkpoint_marks(task_id=task.id),
            now=now,
            from_step=from_step,
        )
    figure["layout"]["uirevision"] = str(task.id)
    summary = figure.pop("summary")
    pending = (
        task_reviews_pending(task_id=task.id) if task.status == TaskStatus.WAITING_REVIEW else []
    )
    earlier = None
    if from_step is not None:
        earlier = selectors.task_model_usage_before(task=task, step=from_step)
    return {
        "task": task,
        "timeline": figure,
        "timeline_summary": summary,
        # A long task's timeline shows its last steps; ?timeline=all every step.
        "timeline_from_step": from_step,
        "timeline_all": _all_steps(request) and task.current_step >= charts.TIMELINE_STEPS,
        "timeline_query": "?timeline=all" if _all_steps(request) else "",
        "budget": budget_in_force(task.spec),
        "model_name": spec_model_name(task.spec),
        "waits": selectors.task_wait_times(events, now=now),
        "model_usage": selectors.task_model_usage(events, earlier=earlier),
        "pending_reviews": pending,
        "live": task.status not in TERMINAL,
        "can_operate": selectors.user_can_operate(request.user),
        "trace": task_trace(task),
        "lane": _lane(request, task),
        "priorities": PRIORITY_QUEUES,
    }


# What a request reads once for the page and its ETag alike, kept while the request lives.
_lanes: WeakKeyDictionary[HttpRequest, selectors.LanePlace | None] = WeakKeyDictionary()
_change_tokens: WeakKeyDictionary[HttpRequest, str] = WeakKeyDictionary()


def _lane(request: AuthedRequest, task: Task) -> selectors.LanePlace | None:
    """Where the queued task waits (read from Redis once per request: the page and its ETag)."""
    if request not in _lanes:
        _lanes[request] = selectors.task_lane_place(task=task)
    return _lanes[request]


def _tab_context(request: AuthedRequest, task: Task, tab: str) -> dict[str, Any]:
    page_number: str | int | None = request.GET.get("page")
    context: dict[str, Any] = {"tab": tab, "tabs": TABS, "task": task, "view": ""}
    page: Page[Any]
    if tab == "events":
        view = "frames" if request.GET.get("view") == "frames" else "compact"
        if view == "frames":
            page = Paginator(selectors.task_events(task=task), TAB_PAGE_SIZE).get_page(page_number)
            rows: Iterable[Any] = page.object_list
        else:
            # Folded per page of raw events, so the tab costs a page, not the whole log.
            page = Paginator(selectors.task_event_summaries(task=task), EVENTS_PAGE_SIZE).get_page(
                page_number
            )
            rows = selectors.task_events_compact(list(page.object_list))
            # "edited by X" and the diff proposed -> approved on an edited call's row.
            edits = task_call_edits(task_id=task.id)
            for row in rows:
                row["edit"] = edits.get(row["call_id"]) if row["call"] else None
        context.update(view=view, page=page, rows=rows)
    elif tab == "calls":
        opened = request.GET.get("call", "")
        if opened and not page_number:
            # ?call=ID opens the page holding that call (the timeline's click-through).
            page_number = selectors.task_call_page(
                task=task, call_id=opened, page_size=TAB_PAGE_SIZE
            )
        page = Paginator(selectors.task_tool_calls(task=task), TAB_PAGE_SIZE).get_page(page_number)
        edits = task_call_edits(task_id=task.id)
        outputs = selectors.task_call_outputs(
            task=task, call_ids=[call.call_id for call in page.object_list]
        )
        context["page"] = page
        context["opened_call"] = opened
        context["preview_bytes"] = PREVIEW_BYTES
        context["calls"] = [
            (
                call,
                edits.get(call.call_id),
                selectors.call_attempts(call=call, outputs=outputs.get(call.call_id, {})),
            )
            for call in page.object_list
        ]
    elif tab == "reviews":
        context["reviews"] = task_reviews(task_id=task.id)
    elif tab == "files":
        context.update(files_tab_context(request, task))
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
        context["checkpoints"] = [
            (cp, checkpoint_verify(cp)) for cp in checkpoints_with_sources(page.object_list)
        ]
    context["can_operate"] = selectors.user_can_operate(request.user)
    context["tabs_live"] = task.status not in TERMINAL
    return context


def _etag(request: AuthedRequest, task: Task, fragment: str, *extra: Any) -> str:
    """A weak validator for one live fragment of the task page as this user sees it: the
    task's change token (read once per request) plus whatever else the fragment shows."""
    token = _change_tokens.get(request)
    if token is None:
        token = _change_tokens[request] = selectors.task_change_token(task=task)
    raw = "|".join([token, fragment, str(request.user.pk), *map(str, extra)])
    return 'W/"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'


def _tabs_etag(request: AuthedRequest, task: Task) -> str:
    # The tab region at this URL: which tab, view and page it shows.
    return _etag(request, task, "tabs?" + request.GET.urlencode())


def _header_etag(request: AuthedRequest, task: Task, pending: list) -> str:
    # The navigation's review count and the banner's approvals change without the task; the
    # timeline shows the last steps or every one.
    approvals = [(r.id, r.approvals_given) for r in pending]
    # The jobs ahead of a queued task move without the task changing.
    return _etag(
        request,
        task,
        "header",
        pending_reviews_count(request),
        approvals,
        _all_steps(request),
        _lane(request, task),
    )


def _poll_headers(etag: str) -> str:
    """The hx-headers of a polling fragment: it asks for its next version with If-None-Match
    and gets a 304 (no swap, see base.html's htmx config) while nothing changed."""
    return json.dumps({"If-None-Match": etag})


def _polled(request: AuthedRequest, template: str, context: dict[str, Any], etag: str):
    response = render(request, template, {**context, "poll_headers": _poll_headers(etag)})
    response["ETag"] = etag
    patch_cache_control(response, no_cache=True, private=True)
    patch_vary_headers(response, ["HX-Request"])
    return response


@viewer_required
def task_detail(request: AuthedRequest, task_id) -> HttpResponse:
    """The task page. Tabs are plain links (?tab=, ?page=, ?view=) that work without
    JavaScript; HTMX swaps just the tab region for them and, while the task is not terminal,
    polls that region (a 304 while nothing changed)."""
    task = selectors.access_task(request.user, task_id)
    requested = request.GET.get("tab", "")
    tab = requested if requested in TABS else "events"
    tabs_etag = _tabs_etag(request, task)
    if is_htmx(request) and not request.headers.get("HX-History-Restore-Request"):
        not_modified = get_conditional_response(request, etag=tabs_etag)
        if not_modified is not None:
            return not_modified
        return _polled(request, "tasks/_tabs.html", _tab_context(request, task, tab), tabs_etag)
    context = _live_context(request, task)
    context.update(_tab_context(request, task, tab))
    context["tabs_poll_headers"] = _poll_headers(tabs_etag)
    live_output_context, live_output_etag = _live_output_context(request, task)
    context["live_output"] = live_output_context["live_output"]
    context["live_output_poll_headers"] = _poll_headers(live_output_etag)
    context["poll_headers"] = _poll_headers(_header_etag(request, task, context["pending_reviews"]))
    context["family"] = task_family(task=task)
    context["case_unsavable"] = case_unsavable_reason(task=task) if task.is_terminal else ""
    response = render(request, "tasks/detail.html", context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@viewer_required
def task_live(request: AuthedRequest, task_id) -> HttpResponse:
    """The header poll: header, review banner and timeline, with the model usage and the
    navigation's review count swapped out of band. A 304 while nothing changed; once the task
    is terminal the fragment comes back without its polling trigger, so polling stops."""
    task = selectors.access_task(request.user, task_id)
    pending = (
        task_reviews_pending(task_id=task.id) if task.status == TaskStatus.WAITING_REVIEW else []
    )
    etag = _header_etag(request, task, pending)
    not_modified = get_conditional_response(request, etag=etag)
    if not_modified is not None:
        return not_modified
    context = _live_context(request, task)
    return _polled(request, "tasks/_live.html", {**context, "oob": True}, etag)


def _live_output_context(request: AuthedRequest, task: Task) -> tuple[dict[str, Any], str]:
    """The running call's panel (dashboard.outputs.live_output) and its ETag."""
    live = live_output(task=task)
    etag = _etag(request, task, "live-output", live["version"] if live else "-")
    return {"task": task, "live_output": live, "live": task.status not in TERMINAL}, etag


@viewer_required
def task_live_output(request: AuthedRequest, task_id) -> HttpResponse:
    """The running call's poll: its tool, elapsed time and streams as they arrive. A 304
    while nothing changed; polling stops once the task has ended."""
    task = selectors.access_task(request.user, task_id)
    context, etag = _live_output_context(request, task)
    not_modified = get_conditional_response(request, etag=etag)
    if not_modified is not None:
        return not_modified
    return _polled(request, "tasks/_live_output.html", context, etag)
