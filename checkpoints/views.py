"""Checkpoint pages: the rollback preview + confirm page, the diff of two checkpoints, and the
retry / resume buttons of the task page. Thin: read through selectors, act through services."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from checkpoints import recovery, selectors
from checkpoints.models import Checkpoint
from checkpoints.services import CheckpointCorrupted
from checkpoints.snapshots import removed_paths
from harness_base.http import AuthedRequest
from tasks import services
from tasks.models import Task
from tasks.selectors import access_task
from tasks.spec import RETRY_BUDGET_FIELDS, RetryChanges
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.access import operator_required, viewer_required

REFUSALS = (
    recovery.RecoveryConflict,
    recovery.RecoveryInvalid,
    TransitionConflict,
    IllegalTransition,
)


def _rollback_post(
    request: AuthedRequest, task: Task, checkpoint_id: Any
) -> tuple[recovery.RecoveryResult | None, str, int]:
    """The rollback form's POST: (the result, "", 200), or (None, why, 422 / 409) when the
    rollback was refused and nothing changed."""
    try:
        result = recovery.checkpoint_rollback(
            task_id=task.id,
            checkpoint_id=checkpoint_id,
            user=request.user,
            reason=request.POST.get("reason", ""),
            resume=request.POST.get("then") == "resume",
        )
    except REFUSALS as exc:
        status = 422 if isinstance(exc, recovery.RecoveryInvalid) else 409
        return None, str(exc), status
    return result, "", 200


@operator_required
def rollback_page(request: AuthedRequest, task_id: UUID, checkpoint_id: UUID) -> HttpResponse:
    task = access_task(request.user, task_id)
    checkpoint = selectors.checkpoint_get(task=task, checkpoint_id=checkpoint_id)
    error, status = "", 200
    if request.method == "POST":
        result, error, status = _rollback_post(request, task, checkpoint.id)
        if result is not None:
            restored = result.restored
            files = (
                f"{len(restored.written)} file(s) restored, {len(removed_paths(restored))} "
                "removed (files, links, folders)"
                if restored is not None
                # The files could not be restored now (logged): the next run syncs them.
                else "the files are restored when the task next runs"
            )
            messages.success(
                request,
                f"Rolled back to checkpoint #{checkpoint.seq}: {files}; task is "
                f"{result.task.status}.",
            )
            return redirect("tasks:detail", task_id=task.id)
        task.refresh_from_db()
    return render(
        request,
        "checkpoints/rollback.html",
        {
            "task": task,
            "checkpoint": checkpoint,
            "error": error,
            "preview": selectors.rollback_preview(task=task, checkpoint=checkpoint),
            "reason": request.POST.get("reason", ""),
            "then": request.POST.get("then", "hold"),
        },
        status=status,
    )


@operator_required
def graph_rollback_page(request: AuthedRequest, task_id: UUID, checkpoint_id: UUID) -> HttpResponse:
    """Preview, then fork a graph task from one of its LangGraph checkpoints."""
    task = access_task(request.user, task_id)
    error, status = "", 200
    if request.method == "POST":
        result, error, status = _rollback_post(request, task, checkpoint_id)
        if result is not None:
            messages.success(
                request,
                f"Rolled the graph back to checkpoint {checkpoint_id}; task is "
                f"{result.task.status}.",
            )
            return redirect("tasks:detail", task_id=task.id)
        task.refresh_from_db()
    try:
        preview = recovery.graph_rollback_preview(task=task, checkpoint_id=str(checkpoint_id))
    except recovery.RecoveryInvalid as exc:
        raise Http404(exc.message) from None
    return render(
        request,
        "checkpoints/graph_rollback.html",
        {
            "task": task,
            "preview": preview,
            "error": error,
            "reason": request.POST.get("reason", ""),
            "then": request.POST.get("then", "hold"),
        },
        status=status,
    )


@viewer_required
def diff_page(request: AuthedRequest, task_id: UUID) -> HttpResponse:
    task = access_task(request.user, task_id)
    checkpoints = list(Checkpoint.objects.filter(task=task).order_by("seq"))
    by_id = {str(cp.id): cp for cp in checkpoints}
    b = by_id.get(request.GET.get("b", "")) or next(
        (cp for cp in checkpoints if cp.id == task.head_checkpoint_id),
        checkpoints[-1] if checkpoints else None,
    )
    a = (
        by_id.get(request.GET.get("a", ""))
        or (by_id.get(str(b.parent_id)) if b is not None and b.parent_id else None)
        or (checkpoints[0] if checkpoints else None)
    )
    diff, error = None, ""
    if a is not None and b is not None:
        try:
            diff = selectors.checkpoint_diff(a=a, b=b)
        except CheckpointCorrupted as exc:
            error = str(exc)
    return render(
        request,
        "checkpoints/diff.html",
        {
            "task": task,
            "checkpoints": checkpoints,
            "a": a,
            "b": b,
            "diff": diff,
            "error": error,
        },
    )


def _retry_changes(request: AuthedRequest) -> RetryChanges:
    """The retry form's fields (prefilled with the values in force; the service applies only
    those that differ). Raises pydantic's ValidationError for a field out of shape."""
    post = request.POST
    return RetryChanges(
        budget={key: post[key].strip() for key in RETRY_BUDGET_FIELDS if post.get(key, "").strip()},
        model=post.get("model", "").strip() or None,
    )


def _changed(revision: services.SpecRevision | None) -> str:
    if revision is None:
        return ""
    return "; changed " + ", ".join(
        f"{field} {revision.before[field]} → {value}" for field, value in revision.after.items()
    )


COMPENSATION_ACTIONS = tuple(f"compensation_{d}" for d in recovery.COMPENSATION_DECISIONS)


@require_POST
@operator_required
def recover_action(request: AuthedRequest, task_id: UUID) -> HttpResponse:
    """Retry (with the form's spec changes) / resume / auto buttons on the task page, and the
    retry / mark done / skip of a rollback's failed compensation; the
    message says what a retry changed and which strategy `auto` chose, and why."""
    task = access_task(request.user, task_id)
    action = request.POST.get("action")
    reason = request.POST.get("reason", "")
    try:
        if action == "retry":
            result = recovery.task_retry(
                task_id=task.id, user=request.user, reason=reason, changes=_retry_changes(request)
            )
            messages.success(request, f"Retry requested{_changed(result.revision)}.")
        elif action == "resume":
            recovery.task_resume(task_id=task.id, user=request.user, reason=reason)
            messages.success(request, "Resume requested.")
        elif action in COMPENSATION_ACTIONS:
            decision = action.removeprefix("compensation_")
            recovery.compensation_decide(
                task_id=task.id, user=request.user, decision=decision, comment=reason
            )
            messages.success(request, f"Compensation: {decision.replace('_', ' ')}; resuming.")
        else:
            result = recovery.task_recover(
                task_id=task.id, user=request.user, strategy="auto", reason=reason
            )
            messages.success(request, f"Recover (auto) chose {result.kind}: {result.why}.")
    except recovery.RecoveryInvalid as exc:
        messages.error(request, f"{exc.field}: {exc.message}")
    except ValidationError as exc:
        error = exc.errors()[0]
        messages.error(request, f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}")
    except REFUSALS as exc:
        messages.error(request, str(exc))
    return redirect("tasks:detail", task_id=task.id)
