"""The task list: its sorts and filters (tasks_list), and the day boundaries its date filters
use."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone

from tasks.models import Task, ToolCall


def day_start(day: date) -> datetime:
    """Midnight at the start of `day` in the current time zone (date-range filters)."""
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


# The task list's sorts (`sort=`), each an order one index serves forwards or backwards:
# created -> created_at, status -> task_status_created, title -> task_title_created.
TASK_SORTS: dict[str, tuple[str, ...]] = {
    "-created": ("-created_at",),
    "created": ("created_at",),
    "status": ("status", "-created_at"),
    "-status": ("-status", "created_at"),
    "title": ("title", "created_at"),
    "-title": ("-title", "-created_at"),
}
TASK_SORT_DEFAULT = "-created"


def tasks_list(
    *,
    sort: str = TASK_SORT_DEFAULT,
    status: str | Iterable[str] | None = None,
    q: str | None = None,
    tool: str | None = None,
    error_class: str | None = None,
    fingerprint: str | None = None,
    creator: str | None = None,
    created_from: date | None = None,
    created_to: date | None = None,
    finished_from: datetime | None = None,
    finished_to: datetime | None = None,
    with_children: bool = False,
) -> QuerySet[Task]:
    """Tasks in `sort` order (TASK_SORTS; newest first by default), narrowed by the task
    list's filters (all optional, ANDed);
    `with_children` fetches every listed task's child ids in one more query (the API's
    `children`), not one per task.

    Indexes: status -> task_status_created, error_class -> task_error_finished, fingerprint ->
    task_fprint_finished, creator -> task_creator_created, dates -> created_at / finished_at,
    tool -> toolcall_task_tool (the list's count probes it from task_status_created's `id`)."""
    qs = Task.objects.select_related("created_by").order_by(*TASK_SORTS[sort])
    if with_children:
        qs = qs.prefetch_related(
            Prefetch(
                "children",
                queryset=Task.objects.only("id", "parent_id", "created_at").order_by("created_at"),
            )
        )
    if status:
        statuses = status.split(",") if isinstance(status, str) else list(status)
        qs = qs.filter(status__in=[s for s in statuses if s])
    if q:
        text = Q(title__icontains=q) | Q(goal__icontains=q)
        try:
            text |= Q(id=uuid.UUID(q.strip()))
        except ValueError:
            pass
        qs = qs.filter(text)
    if tool:
        qs = qs.filter(Exists(ToolCall.objects.filter(task=OuterRef("pk"), tool=tool)))
    if error_class:
        qs = qs.filter(error_class=error_class)
    if fingerprint:
        qs = qs.filter(error_fingerprint=fingerprint)
    if creator:
        qs = qs.filter(created_by__username=creator)
    if created_from:
        qs = qs.filter(created_at__gte=day_start(created_from))
    if created_to:
        qs = qs.filter(created_at__lt=day_start(created_to) + timedelta(days=1))
    if finished_from:
        qs = qs.filter(finished_at__gte=finished_from)
    if finished_to:
        qs = qs.filter(finished_at__lt=finished_to)
    return qs
