"""Cancel (task_cancel): now, or at the running worker's next boundary; down to the task's
children."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from tasks import services
from tasks.events import EventType
from tasks.models import Task
from tasks.signals import history_superseded
from tasks.states import TERMINAL, TaskStatus, TransitionConflict


def task_cancel(*, task_id: Any, user: User, reason: str = "") -> Task:
    """Cancel now when no worker holds the task; otherwise ask the worker to stop at its next
    boundary (it also stops a running tool). Cancel propagates down: every child task still
    going is canceled too."""
    actor = user.get_username()
    with transaction.atomic():
        for child_id in (
            Task.objects.filter(parent_id=task_id)
            .exclude(status__in=TERMINAL)
            .values_list("id", flat=True)
        ):
            task_cancel(task_id=child_id, user=user, reason=reason or f"parent {task_id} canceled")
        task = Task.objects.select_for_update().get(id=task_id)
        if task.status in TERMINAL:
            raise TransitionConflict(f"task is already {task.status}")
        if task.status == TaskStatus.RUNNING:
            services.task_cancel_request(task_id=task_id)
            services.event_record(
                task_id=task_id,
                type=EventType.CANCEL_REQUESTED,
                payload={"reason": reason},
                actor=actor,
            )
            services.audit_record(
                user=user,
                action="cancel",
                task_id=task_id,
                reason=reason,
                before={"status": task.status},
                after={"cancel_requested": True},
            )
            task.cancel_requested = True
            return task
        before = {"status": task.status}
        task = services.task_transition(
            task_id=task_id,
            to=TaskStatus.CANCELED,
            reason=reason or "canceled by operator",
            actor=actor,
            fields={"error_class": "canceled", "error_message": reason},
        )
        history_superseded.send(sender=None, task_id=task_id, comment=f"task canceled by {actor}")
        services.audit_record(
            user=user,
            action="cancel",
            task_id=task_id,
            reason=reason,
            before=before,
            after={"status": task.status},
        )
        return task
