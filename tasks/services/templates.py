"""Saved task templates: a spec (a new one, or a task's) saved under its creator's name, and a
task started from one with changed inputs. Both go through the checks and the creation of
`POST /api/v1/tasks` (task_spec_check, task_create): a template is only ever a spec waiting
to be started."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from tasks.models import Task, TaskTemplate
from tasks.services.audit import audit_record
from tasks.services.creation import task_create, task_spec_check
from tasks.spec import TaskSpec


def spec_changed(spec: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`spec` with `changes` laid over it: an object (the workspace's files, the budget, an
    agent's settings) merges key by key, anything else (a list, a text, a number) replaces.
    Nothing is validated here: the caller validates the result as a whole TaskSpec."""
    merged = dict(spec)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = spec_changed(merged[key], value)
        else:
            merged[key] = value
    return merged


def template_create(
    *,
    name: str,
    spec: TaskSpec,
    user: User,
    source_task: Task | None = None,
) -> TaskTemplate:
    """Save `spec` as `user`'s template `name`, checked as a new task's spec would be (SpecError
    names the field) so that a template that saves also starts, as long as the configuration
    holds."""
    task_spec_check(spec, user=user)
    with transaction.atomic():
        template = TaskTemplate.objects.create(
            name=name,
            spec=spec.model_dump(mode="json", exclude_none=True),
            created_by=user,
            source_task=source_task,
        )
        audit_record(
            user=user,
            action="template_create",
            task_id=source_task.id if source_task is not None else None,
            target=f"template {template.id}",
            after={"name": name, "title": spec.title},
        )
    return template


def template_start(
    *, template: TaskTemplate, user: User, changes: dict[str, Any] | None = None
) -> Task:
    """Start a task from `template` with `changes` laid over its spec (spec_changed). The result
    is validated as a TaskSpec (pydantic's ValidationError names the field) and created by
    task_create (SpecError names the field), exactly as `POST /api/v1/tasks` would."""
    spec = TaskSpec.model_validate(spec_changed(template.spec, changes or {}))
    return task_create(spec=spec, user=user)
