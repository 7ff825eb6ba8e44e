"""A task's downloads (a stored output part, the event log) and its cancel and priority
actions."""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.contrib import messages
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from checkpoints import recovery
from dashboard.outputs import output_download
from harness_base.http import AuthedRequest
from tasks import selectors, services
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.access import operator_required, viewer_required


@viewer_required
def task_output(request: AuthedRequest, task_id, output_id: int) -> HttpResponse:
    """One stored output part of a call, as a download (tasks.outputs)."""
    task = selectors.access_task(request.user, task_id)
    return output_download(selectors.tool_output_get(task=task, output_id=output_id))


@viewer_required
def task_events_download(request: AuthedRequest, task_id) -> StreamingHttpResponse:
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
def task_cancel(request: AuthedRequest, task_id) -> HttpResponse:
    task = selectors.access_task(request.user, task_id)
    try:
        recovery.task_cancel(
            task_id=task.id, user=request.user, reason=request.POST.get("reason", "")
        )
        messages.success(request, "Cancel requested.")
    except (TransitionConflict, IllegalTransition) as exc:
        messages.error(request, str(exc))
    return redirect("tasks:detail", task_id=task.id)


@require_POST
@operator_required
def task_priority(request: AuthedRequest, task_id) -> HttpResponse:
    task = selectors.access_task(request.user, task_id)
    try:
        task = services.task_priority_set(
            task_id=task.id, priority=request.POST.get("priority", ""), user=request.user
        )
        messages.success(request, f"Priority set to {task.priority}.")
    except (ValueError, services.PriorityRefused) as exc:
        messages.error(request, str(exc))
    return redirect("tasks:detail", task_id=task.id)
