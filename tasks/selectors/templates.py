"""Saved task templates as their owner reads them (tasks.models.TaskTemplate)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from tasks.errors import NotFound
from tasks.models import TaskTemplate
from tasks.selectors.access import user_can_create


def templates_of(user: User | None) -> QuerySet[TaskTemplate]:
    """The templates `user` saved, newest first; none for a user who may not create tasks (a
    creator demoted to viewer keeps their rows but cannot use them)."""
    if not user_can_create(user):
        return TaskTemplate.objects.none()
    return TaskTemplate.objects.filter(created_by=user).order_by("-created_at")


def access_template(user: User | None, template_id: Any) -> TaskTemplate:
    """`user`'s own template. Another person's template, an unknown id and a malformed one are
    all NotFound: a template is private to its creator (what it holds may be their workspace
    files), so the answer does not say whether it exists."""
    try:
        return templates_of(user).get(id=template_id)
    except (TaskTemplate.DoesNotExist, ValueError, TypeError, ValidationError):
        raise NotFound("template not found") from None
