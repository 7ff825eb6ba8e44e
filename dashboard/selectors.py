"""Read-side queries for the overview and the audit log."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.db.models import Count, Min, QuerySet

from review.models import ReviewRequest, ReviewStatus
from tasks.models import AuditEntry, Task
from tasks.selectors import day_start
from tasks.states import ACTIVE, TaskStatus


def status_counts() -> dict[str, Any]:
    """{"counts": {status: n} for every status, "active": n, "oldest_review_at": datetime}.

    One GROUP BY over task_status_created plus one MIN over review_status_requested."""
    counts = dict(Task.objects.values_list("status").annotate(n=Count("*")).order_by())
    oldest = ReviewRequest.objects.filter(
        status=ReviewStatus.PENDING, task__status=TaskStatus.WAITING_REVIEW
    ).aggregate(at=Min("requested_at"))["at"]
    return {
        "counts": {status: counts.get(status, 0) for status in TaskStatus.values},
        "active": sum(counts.get(status, 0) for status in ACTIVE),
        "oldest_review_at": oldest,
    }


# The actions services audit, offered as suggestions in the audit page's filter.
AUDIT_ACTIONS = ("decide", "edit", "cancel", "retry", "rollback", "resume", "requeue")


def audit_entries(
    *,
    actor: str | None = None,
    action: str | None = None,
    task_id: Any = None,
    date_from: date | None = None,
    date_to: date | None = None,
) -> QuerySet[AuditEntry]:
    """Audit entries newest first, narrowed by the audit page's filters (served by `at`,
    audit_action_at and the task foreign-key index)."""
    qs = AuditEntry.objects.order_by("-at", "-id")
    if actor:
        qs = qs.filter(actor_name=actor)
    if action:
        qs = qs.filter(action=action)
    if task_id:
        qs = qs.filter(task_id=task_id)
    if date_from:
        qs = qs.filter(at__gte=day_start(date_from))
    if date_to:
        qs = qs.filter(at__lt=day_start(date_to) + timedelta(days=1))
    return qs
