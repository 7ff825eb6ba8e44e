"""Dashboard services: operator actions on RQ itself (the task actions live in tasks and
checkpoints services), and each user's own preferences."""

from __future__ import annotations

import django_rq
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from rq.exceptions import InvalidJobOperation, NoSuchJobError

from dashboard.models import UserPreference
from dashboard.queues import job_task_id
from dashboard.selectors import time_zones
from tasks.models import Task
from tasks.services import audit_record


class RequeueError(Exception):
    pass


def rq_job_requeue(*, queue_name: str, job_id: str, user: AbstractBaseUser) -> None:
    """Move a failed job back onto its queue, audited as `requeue`."""
    if queue_name not in settings.HARNESS_QUEUES:
        raise RequeueError(f"unknown queue {queue_name!r}")
    queue = django_rq.get_queue(queue_name)
    registry = queue.failed_job_registry
    try:
        job = registry.requeue(job_id)
    except (NoSuchJobError, InvalidJobOperation) as exc:
        raise RequeueError(
            f"job {job_id} is not in the failed-job registry of {queue_name}"
        ) from exc
    task_id = job_task_id(job)
    with transaction.atomic():
        audit_record(
            user=user,
            action="requeue",
            task_id=task_id if task_id and Task.objects.filter(id=task_id).exists() else None,
            target=f"rq:{queue_name}:{job_id}",
            before={"registry": "failed"},
            after={"queue": queue_name},
        )


def preference_time_zone_set(*, user: AbstractBaseUser, time_zone: str) -> UserPreference:
    """Show `user` every time in `time_zone` (an IANA name), or in the browser's zone ("")."""
    if time_zone and time_zone not in time_zones():
        raise ValueError(f"unknown time zone {time_zone[:64]!r}")
    preference, _ = UserPreference.objects.update_or_create(
        user=user, defaults={"time_zone": time_zone}
    )
    return preference
