"""Read-side queries for tasks. Permission-checked lookups live here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet
from django.http import Http404

from tasks.models import Task, TaskEvent, ToolCall


def user_can_view(user: AbstractBaseUser) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def user_can_operate(user: AbstractBaseUser) -> bool:
    """Operators act (cancel, retry, roll back, decide); viewers only read."""
    if not user_can_view(user):
        return False
    if user.is_superuser or user.has_perm("tasks.operate_task"):
        return True
    return user.groups.filter(name="operators").exists()


def access_task(user: AbstractBaseUser, task_id: Any, *, lock: bool = False) -> Task:
    """The task, or Http404 for an unknown or malformed id."""
    qs = Task.objects.all()
    if lock:
        qs = qs.select_for_update()
    try:
        return qs.get(id=task_id)
    except (Task.DoesNotExist, ValueError, TypeError):
        raise Http404("task not found") from None
    except Exception as exc:  # a malformed UUID raises ValidationError from the field
        if exc.__class__.__name__ == "ValidationError":
            raise Http404("task not found") from None
        raise


def tasks_list(*, status: str | None = None, q: str | None = None) -> QuerySet[Task]:
    qs = Task.objects.select_related("created_by").order_by("-created_at")
    if status:
        qs = qs.filter(status__in=[s for s in status.split(",") if s])
    if q:
        qs = qs.filter(Q(title__icontains=q) | Q(goal__icontains=q))
    return qs


def task_events(*, task: Task, after: int | None = None) -> QuerySet[TaskEvent]:
    qs = TaskEvent.objects.filter(task=task).order_by("id")
    if after is not None:
        qs = qs.filter(id__gt=after)
    return qs


def task_tool_calls(*, task: Task) -> QuerySet[ToolCall]:
    return ToolCall.objects.filter(task=task).order_by("id")
