"""`/ops/`: RQ queues, workers, the sweep and the failed-job registry. Operators act here
without being Django staff; the full django-rq views stay at /django-rq/ for staff."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from dashboard import queues, services
from dashboard.supervised import supervised_processes
from harness_base.http import AuthedRequest
from review.selectors.notifications import notification_channels_health
from tasks.selectors import (
    mcp_servers_overview,
    sweep_last_run,
    user_can_operate,
    workers_overview,
)
from tasks.web.access import operator_required, viewer_required


@viewer_required
def operations(request: AuthedRequest) -> HttpResponse:
    return render(
        request,
        "dashboard/ops.html",
        {
            "queues": queues.queues_overview(),
            "workers": workers_overview(),
            "failed_jobs": queues.failed_jobs(),
            "sweep": sweep_last_run(),
            "supervised": supervised_processes(),
            "mcp_servers": mcp_servers_overview(),
            "notification_channels": notification_channels_health(),
            "can_operate": user_can_operate(request.user),
            "worker_ttl_s": settings.HARNESS_WORKER_TTL_S,
            "worker_dead_shown_s": settings.HARNESS_WORKER_DEAD_SHOWN_S,
        },
    )


@require_POST
@operator_required
def job_requeue(request: AuthedRequest, queue_name: str, job_id: str) -> HttpResponse:
    try:
        services.rq_job_requeue(queue_name=queue_name, job_id=job_id, user=request.user)
        messages.success(request, f"Job {job_id} requeued on {queue_name}.")
    except (services.RequeueError, services.RequeueRefused) as exc:
        messages.error(request, str(exc))
    return redirect("dashboard:ops")
