"""Writes of cases and replays: save a finished task as a case, start a replay of a case
(issue #31). Both audited; the callers check the operator role."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from pydantic import ValidationError

from cases.criteria import CaseCriteria, criteria_default
from cases.effects import EffectsUnreadable, command_effects
from cases.models import Case, CaseRun, OnDivergence
from cases.selectors import (
    CaseUnsavable,
    case_unsavable_reason,
    first_checkpoint_files,
    task_recording,
)
from tasks.models import Task
from tasks.services import SpecError, audit_record, task_create
from tasks.spec import TaskSpec, spec_agent_kind
from tasks.states import TERMINAL

MAX_TAGS = 20


def case_save(
    *,
    task: Task,
    user: User | None,
    name: str,
    tags: list[str] | None = None,
    criteria: dict[str, Any] | None = None,
) -> Case:
    """Keep a finished task as a case: its spec, its first checkpoint's workspace, its
    recording and the pass criteria (the defaults of `criteria_default`, with the given keys
    replacing theirs). CaseUnsavable: not finished, nothing recorded, a name taken, bad
    criteria."""
    if task.status not in TERMINAL:
        raise CaseUnsavable(f"the task is {task.status}: only a finished task can be saved")
    if task.is_replay:
        raise CaseUnsavable("a replay cannot be saved as a case; save the task it replays")
    if task.fork_of_id is not None:
        # A fork starts from another task's state and workspace, mid-run: its recording has
        # no first turns, so a replay (which starts from the spec) could not follow it.
        raise CaseUnsavable(
            "a fork cannot be saved as a case (it starts mid-run, from its original's "
            "checkpoint); save the original, or compare the fork with it"
        )
    unsavable = case_unsavable_reason(task=task)
    if unsavable:
        raise CaseUnsavable(unsavable)
    recording = task_recording(task=task)
    if not recording["decisions"]:
        raise CaseUnsavable("the task has no recorded model decisions")
    workspace = first_checkpoint_files(task=task)
    try:
        effects = command_effects(task=task)
    except EffectsUnreadable as exc:
        raise CaseUnsavable(str(exc)) from None
    for call in recording["calls"]:
        if call["call_id"] in effects:
            call["effects"] = effects[call["call_id"]]
    merged = criteria_default(recording).model_dump(mode="json")
    merged.update(criteria or {})
    try:
        checked = CaseCriteria.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CaseUnsavable(f"criteria.{where}: {first['msg']}") from None
    clean_tags = sorted({str(t)[:50] for t in tags or [] if str(t).strip()})[:MAX_TAGS]
    try:
        with transaction.atomic():
            case = Case.objects.create(
                name=name,
                tags=clean_tags,
                source_task_id=task.id,
                spec=task.spec,
                workspace=workspace,
                recording=recording,
                criteria=checked.model_dump(mode="json"),
                created_by=user if user is not None and user.is_authenticated else None,
            )
            audit_record(
                user=user,
                action="case_save",
                task_id=task.id,
                target=f"case {case.id}",
                after={"name": name, "tags": clean_tags},
            )
    except IntegrityError:
        raise CaseUnsavable(f"a case named {name!r} exists already") from None
    return case


def _replay_spec(case: Case, model: dict[str, Any] | None) -> TaskSpec:
    """The case's spec, starting from the case's workspace, with the candidate model if one is
    given (else the runtime plays the recorded decisions: agent.runtime.run)."""
    spec = dict(case.spec)
    if model is not None and spec_agent_kind(spec) is not None:
        # An SDK agent's model is the agent's own code; its case replays what it recorded.
        raise SpecError("model", "a case of an SDK agent replays its recorded decisions only")
    spec["title"] = f"replay: {case.name}"[:200]
    spec["workspace"] = {"files": dict(case.workspace)}
    if model is not None:
        spec["model"] = model
    elif (spec.get("model") or {}).get("kind") == "replay":
        # A recorded replay names a task the case need not outlive; the decisions are the
        # case's own, so the spec's model is a placeholder the runtime replaces.
        spec["model"] = {"kind": "scripted", "script": [{"final": ""}]}
    return TaskSpec.model_validate(spec)


def case_replay_start(
    *,
    case: Case,
    user: User | None,
    model: dict[str, Any] | None = None,
    on_divergence: str = OnDivergence.STOP,
    enqueue: bool = True,
) -> CaseRun:
    """A replay of `case` as a task of its own, against the current code, tools and policy:
    with the recorded decisions (`model` None) or a candidate model spec. SpecError for a
    candidate the user may not run."""
    if on_divergence not in OnDivergence.values:
        raise SpecError("on_divergence", f"one of: {', '.join(OnDivergence.values)}")
    try:
        spec = _replay_spec(case, model)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecError(".".join(str(p) for p in first["loc"]), first["msg"]) from None
    with transaction.atomic():
        # Enqueued when this outer transaction commits: the worker finds the CaseRun.
        task = task_create(spec=spec, user=user, enqueue=enqueue, is_replay=True)
        run = CaseRun.objects.create(
            case=case,
            task=task,
            model="recorded" if model is None else _model_label(spec),
            on_divergence=on_divergence,
            created_by=user if user is not None and user.is_authenticated else None,
        )
        audit_record(
            user=user,
            action="case_replay",
            task_id=task.id,
            target=f"case {case.id}",
            after={"model": run.model, "on_divergence": on_divergence},
        )
    return run


def _model_label(spec: TaskSpec) -> str:
    model = spec.model
    if model is None:
        return "agent"
    return f"{model.kind}:{getattr(model, 'model', '') or ''}".rstrip(":")[:200]
