"""Mixed versions in a rolling deploy (issue #43 item 4): a worker never runs a task whose head
checkpoint a newer harness version wrote. It hands the task back to its queue for a newer
worker, recording so once (`version_handed_back`), and leaves it queued: the task never goes
back to older code."""

from __future__ import annotations

import logging
import random
from typing import Any

from django.conf import settings
from rq import get_current_job

from checkpoints.versions import checkpoint_versions
from harness_base.queues import RESUME_QUEUE
from harness_base.versions import harness_version, version_newer
from tasks import services
from tasks.events import EventType
from tasks.models import Task, TaskEvent
from tasks.states import TaskStatus

log = logging.getLogger(__name__)

HANDED_BACK = "handed_back"


def graph_head_version(*, task_id: Any) -> str:
    """The harness version that wrote a graph task's latest graph checkpoint ("" if none)."""
    return str((checkpoint_versions(task_id=task_id).get("harness") or {}).get("version") or "")


def task_hand_back_if_newer(*, task_id: Any, status: str, head_version: str, worker: str) -> bool:
    """Whether the task was handed back: it is queued and `head_version` is newer than this
    worker's. Then it is enqueued again on the lane its job came by - at once the first time,
    after a short jittered delay when this worker's version handed it back before (an older
    worker that picks it again does not spin) - and the first hand-back by this version is
    recorded on the task."""
    own = harness_version()["version"]
    if status != TaskStatus.QUEUED or not head_version or not version_newer(head_version, own):
        return False
    task = Task.objects.filter(id=task_id, status=TaskStatus.QUEUED).first()
    if task is None:
        return False
    job = get_current_job()
    payload = {"head_version": head_version, "worker_version": own}
    before = TaskEvent.objects.filter(
        task_id=task_id,
        type=EventType.VERSION_HANDED_BACK,
        payload__head_version=head_version,
        payload__worker_version=own,
    ).exists()
    if not before:
        services.event_record(
            task_id=task_id,
            type=EventType.VERSION_HANDED_BACK,
            payload={**payload, "worker": worker},
        )
    delay = settings.HARNESS_CAPACITY_RETRY_S * (1 + random.random()) if before else None
    services.task_enqueue(
        task=task,
        delay_s=delay,
        decided=job is not None and job.origin == RESUME_QUEUE,
    )
    log.info(
        "task %s: head written by harness %s, this worker runs %s: handed back",
        task_id,
        head_version,
        own,
    )
    return True
