"""Writes of a task's other fields for the apps above (docs/architecture.md, "Each app writes only
its own models"): a recovery's fork head and reset, review outcomes counted, a cancel request,
a global checkpoint round's hold. None writes a status or a field derived from it (the
transition functions do); each runs inside its caller's transaction, under the caller's locks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import F
from django.utils import timezone

from tasks.agent_state import AgentState
from tasks.models import Task


def _recovery_reset(*, task: Task, rollback: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {"cancel_requested": False, "retry_at": None}
    if rollback:
        fields["rollback_count"] = task.rollback_count + 1
    return {**fields, "updated_at": timezone.now()}


def task_fork_head(*, task: Task, checkpoint_id: Any, state: AgentState, rollback: bool) -> None:
    """A recovery forked the task: the new checkpoint `checkpoint_id`, holding `state`, is its
    head, its step and usage go back to the state's, a pending cancel and a retry time are
    dropped and a rollback (`rollback`) is counted. The recovery's transaction holds the task
    row; its status moves next, by task_transition."""
    Task.objects.filter(id=task.id).update(
        head_checkpoint_id=checkpoint_id,
        current_step=state.step_index,
        steps_used=state.budget.steps,
        tokens_used=state.budget.tokens,
        **_recovery_reset(task=task, rollback=rollback),
    )


def task_recovery_reset(*, task: Task, rollback: bool = False, step: int | None = None) -> None:
    """A graph task's recovery: drop a pending cancel and a retry time; a rollback is counted
    and goes back to `step`. The recovery's transaction holds the task row."""
    fields = {} if step is None else {"current_step": step}
    Task.objects.filter(id=task.id).update(
        **fields, **_recovery_reset(task=task, rollback=rollback)
    )


def task_review_outcome_count(*, task_id: Any, rejected: bool, edited: bool) -> None:
    """A person rejected one of the task's calls, or approved it with edited arguments
    (review.services, in the decision's transaction, the task row locked): count it on the
    task (`calls_rejected`, `calls_edited`)."""
    fields = {}
    if rejected:
        fields["calls_rejected"] = F("calls_rejected") + 1
    if edited:
        fields["calls_edited"] = F("calls_edited") + 1
    if fields:
        Task.objects.filter(id=task_id).update(**fields)


def task_plan_phase_set(*, task: Task, phase: str) -> None:
    """A plan task's plan was decided (review.services.plans, in the decision's transaction,
    the task row locked): `executing` (approved) or `rejected`."""
    Task.objects.filter(id=task.id).update(plan_phase=phase)
    task.plan_phase = phase


def task_review_outcomes_set(*, task_id: Any, rejected: int, edited: int) -> None:
    """A rollback undid calls: the task's counts of rejected and edited calls are those the
    review app recounted over the calls still on its branch (in the rollback's transaction,
    the task row locked)."""
    Task.objects.filter(id=task_id).update(calls_rejected=rejected, calls_edited=edited)


def task_cancel_request(*, task_id: Any) -> None:
    """Ask the worker running the task to stop at its next boundary (the caller holds the row
    and records the event)."""
    Task.objects.filter(id=task_id).update(cancel_requested=True)


def tasks_hold(*, task_ids: Iterable[Any], round_id: Any) -> None:
    """Hold the tasks for a global checkpoint round: no worker acquires a held task."""
    Task.objects.filter(id__in=list(task_ids)).update(hold_round_id=round_id)


def tasks_release(*, round_id: Any) -> None:
    """Clear the hold of the round's tasks."""
    Task.objects.filter(hold_round_id=round_id).update(hold_round_id=None)
