"""Revising a stopped task's spec before it runs again (a retry's budget and model changes),
checked as a new task's spec would be."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from pydantic import ValidationError

from tasks.models import Task
from tasks.services.creation import SpecError, task_spec_check
from tasks.spec import (
    RetryChanges,
    TaskSpec,
    budget_in_force,
    spec_model_name,
)


@dataclass(frozen=True)
class SpecRevision:
    """What a retry changed of a task's spec: {field: value in force} before and after
    (`budget.max_steps`, `model`), for the audit log and the retry's event."""

    before: dict[str, Any]
    after: dict[str, Any]


def _spec_parse(spec: dict[str, Any]) -> TaskSpec:
    try:
        return TaskSpec.model_validate(spec)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "spec"
        raise SpecError(field, error["msg"]) from None


def task_spec_revise(*, task: Task, changes: RetryChanges) -> SpecRevision | None:
    """Change what an operator may change of a stopped task's spec before it runs again (a
    retry): budget fields and an OpenAI-compatible model's name. Only the values that differ
    from those in force are written; None when none does. The new spec is checked as a new
    task's would be (TaskSpec, then task_spec_check as its creator): SpecError naming the field,
    and nothing written. The caller holds the task row (the recovery's transaction)."""
    old = task.spec or {}
    merged = copy.deepcopy(old)
    if changes.budget:
        merged["budget"] = {**(merged.get("budget") or {}), **changes.budget}
    before_model = spec_model_name(old)
    if changes.model is not None:
        if before_model is None:
            kind = (old.get("model") or {}).get("kind") or "a graph"
            raise SpecError(
                "model", f"only an OpenAI-compatible model's name can change; this task runs {kind}"
            )
        merged["model"] = {**merged["model"], "model": changes.model}
    # Parsed as given, then compared by the values in force: a value equal to the one in force
    # (a timeout harness.yaml sets) changes nothing and is not written into the spec.
    wanted = budget_in_force(_spec_parse(merged).model_dump(mode="json"))
    in_force = budget_in_force(old)
    revised = copy.deepcopy(old)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for key in changes.budget:
        if wanted[key] != in_force[key]:
            revised.setdefault("budget", {})[key] = wanted[key]
            before[f"budget.{key}"], after[f"budget.{key}"] = in_force[key], wanted[key]
    if changes.model is not None and changes.model != before_model:
        revised["model"] = merged["model"]
        before["model"], after["model"] = before_model, changes.model
    if not after:
        return None
    spec = _spec_parse(revised)
    task_spec_check(spec, user=task.created_by)
    Task.objects.filter(id=task.id).update(
        spec=spec.model_dump(mode="json", exclude_none=True), updated_at=timezone.now()
    )
    return SpecRevision(before=before, after=after)
