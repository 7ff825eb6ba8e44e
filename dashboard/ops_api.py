"""`/api/v1/ops/…`: the RQ workers as /ops/ shows them, and the requeue of a failed job."""

from __future__ import annotations

from ninja import Router, Schema, Status
from ninja.errors import HttpError

from dashboard import services
from harness_base.http import AuthedRequest
from tasks import selectors
from tasks.schemas import ErrorOut
from tasks.web.api_auth import OPERATE

router = Router(tags=["ops"])


class RequeueOut(Schema):
    job_id: str
    queue: str


@router.get("ops/workers", response=list[selectors.WorkerInfo])
def ops_workers(request: AuthedRequest):
    """Every registered RQ worker (tasks.selectors.workers.WorkerInfo, field by field)."""
    return selectors.workers_overview()


@router.post(
    "ops/jobs/{queue_name}/{job_id}/requeue",
    auth=OPERATE,
    response={200: RequeueOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
)
def ops_job_requeue(request: AuthedRequest, queue_name: str, job_id: str):
    """Put a failed job back on its queue; 409 naming why when its task would not be resumed
    by it (finished, waiting for a decision, redispatched under another job, ...)."""
    try:
        services.rq_job_requeue(queue_name=queue_name, job_id=job_id, user=request.user)
    except services.RequeueError as exc:
        raise HttpError(404, str(exc)) from None
    except services.RequeueRefused as exc:
        raise HttpError(409, str(exc)) from None
    return Status(200, {"job_id": job_id, "queue": queue_name})
