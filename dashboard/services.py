"""Dashboard services: operator actions on RQ itself (the task actions live in tasks and
checkpoints services), and each user's own preferences."""

from __future__ import annotations

import django_rq
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job

from dashboard.models import UserPreference
from dashboard.queues import requeue_refusal
from dashboard.selectors import USER_TIME_ZONE_ATTR, time_zones
from tasks.models import Task
from tasks.selectors import job_task_id
from tasks.services import audit_record


class RequeueError(Exception):
    """No such failed job."""


class RequeueRefused(Exception):
    """The job's task is not in a state the requeued job would resume (the message says why)."""


def rq_job_requeue(*, queue_name: str, job_id: str, user: User) -> None:
    """Move a failed job back onto its queue, audited as `requeue`. A `run_task` job is
    requeued only while its task would be taken by it (dashboard.queues.requeue_refusal):
    RequeueRefused otherwise, naming why."""
    if queue_name not in settings.HARNESS_QUEUES:
        raise RequeueError(f"unknown queue {queue_name!r}")
    queue = django_rq.get_queue(queue_name)
    registry = queue.failed_job_registry
    missing = RequeueError(f"job {job_id} is not in the failed-job registry of {queue_name}")
    if job_id not in registry:
        raise missing
    task_id = job_task_id(Job.fetch(job_id, connection=queue.connection))
    with transaction.atomic():
        # Locked while the job goes back on the queue: a decision or a recovery that would
        # enqueue the task waits, and the job's worker cannot take the task before the commit.
        task = Task.objects.select_for_update().filter(id=task_id).first() if task_id else None
        if task_id:
            refusal = requeue_refusal(job_id=job_id, task=task)
            if refusal:
                raise RequeueRefused(f"job {job_id} not requeued: {refusal}")
        try:
            registry.requeue(job_id)
        except (NoSuchJobError, InvalidJobOperation) as exc:
            raise missing from exc
        audit_record(
            user=user,
            action="requeue",
            task_id=task.id if task is not None else None,
            target=f"rq:{queue_name}:{job_id}",
            before={"registry": "failed"},
            after={"queue": queue_name},
        )


def preference_time_zone_set(*, user: User, time_zone: str) -> UserPreference:
    """Show `user` every time in `time_zone` (an IANA name), or in the browser's zone ("")."""
    if time_zone and time_zone not in time_zones():
        raise ValueError(f"unknown time zone {time_zone[:64]!r}")
    preference, _ = UserPreference.objects.update_or_create(
        user=user, defaults={"time_zone": time_zone}
    )
    setattr(user, USER_TIME_ZONE_ATTR, time_zone)  # what selectors.user_time_zone answers
    return preference
