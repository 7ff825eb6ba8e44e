"""The fork and adopt pages (issue #31 item 5): "Fork…" from one of a task's checkpoints shows
that checkpoint's agent state as a form — the system prompt, the latest messages, the pending
calls' arguments (JSON), the budget — and starts a sibling with whatever the operator changed;
"Adopt this branch" rolls the original forward to a finished fork's head. Thin: the form's
changed fields become `ForkEdits`, the services in checkpoints.fork do the rest."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from checkpoints import recovery, selectors
from checkpoints.fork import ForkEdits, ForkRefused, task_adopt, task_fork
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from harness_base.http import AuthedRequest
from tasks.agent_state import AgentState
from tasks.errors import NotFound
from tasks.selectors import access_task
from tasks.spec import RETRY_BUDGET_FIELDS, budget_in_force
from tasks.states import IllegalTransition, TransitionConflict
from tasks.web.access import operator_required

# Messages offered for editing by default (the newest); `?all=1` offers every one.
RECENT_MESSAGES = 20
BUDGET_LABELS = {
    "max_steps": "max steps",
    "max_tokens": "max tokens",
    "session_timeout_s": "session timeout (s)",
    "turn_timeout_s": "turn timeout (s)",
    "tool_timeout_s": "tool timeout (s)",
}


def _text(value: str) -> str:
    """A textarea's value as the browser sends it (CRLF line ends), as the state holds it."""
    return value.replace("\r\n", "\n")


def _edits(post: Any, state: AgentState, budget: dict[str, Any]) -> ForkEdits:
    """The form's changed fields as ForkEdits (unchanged ones are left out, so the sibling's
    state differs from the checkpoint exactly where the operator typed). Raises ForkRefused
    naming the form field for a pending call's arguments that are not a JSON object."""
    edits: dict[str, Any] = {"messages": [], "pending_args": {}}
    for index, message in enumerate(state.messages):
        name = f"message-{index}"
        if name in post and _text(post[name]) != message.content:
            if index == 0 and message.role == "system":
                edits["system_prompt"] = _text(post[name])
            else:
                edits["messages"].append({"index": index, "content": _text(post[name])})
    for call in state.pending:
        name = f"pending-{call.call_id}"
        if name not in post:
            continue
        try:
            args = json.loads(post[name])
        except ValueError as exc:
            raise ForkRefused(name, f"not JSON: {exc}") from None
        if not isinstance(args, dict):
            raise ForkRefused(name, "the arguments must be a JSON object")
        if args != call.args:
            edits["pending_args"][call.call_id] = args
    changed = {
        key: _number(key, post[key].strip())
        for key in RETRY_BUDGET_FIELDS
        if post.get(key, "").strip() and post[key].strip() != _shown(budget.get(key))
    }
    if changed:
        edits["budget"] = changed
    try:
        return ForkEdits.model_validate(edits)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ForkRefused(".".join(str(p) for p in first["loc"]), first["msg"]) from None


def _number(key: str, text: str) -> int | float:
    """A budget field as a number (steps and tokens whole); the bounds are the spec's."""
    try:
        return int(text) if key in ("max_steps", "max_tokens") else float(text)
    except ValueError:
        kind = "a whole number" if key in ("max_steps", "max_tokens") else "a number of seconds"
        raise ForkRefused(f"budget.{key}", f"{kind} is expected, not {text[:40]!r}") from None


def _shown(value: Any) -> str:
    """A budget value as the form shows it (so an untouched field counts as unchanged)."""
    if value is None:
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


@operator_required
def fork_page(request: AuthedRequest, task_id: UUID, checkpoint_id: UUID) -> HttpResponse:
    task = access_task(request.user, task_id)
    checkpoint = selectors.checkpoint_get(task=task, checkpoint_id=checkpoint_id)
    try:
        state = checkpoint_decode(checkpoint).state
    except CheckpointCorrupted as exc:
        messages.error(request, f"Cannot fork from checkpoint #{checkpoint.seq}: {exc}")
        return redirect("tasks:detail", task_id=task.id)
    budget = budget_in_force(task.spec)
    error, status = None, 200
    if request.method == "POST":
        try:
            sibling = task_fork(
                task=task,
                checkpoint_id=checkpoint.id,
                user=request.user,
                edits=_edits(request.POST, state, budget),
                reason=request.POST.get("reason", "")[:2000],
            )
        except ForkRefused as exc:
            error, status = exc, 422
        else:
            messages.success(
                request, f"Forked from checkpoint #{checkpoint.seq} of {task.title}: queued."
            )
            return redirect("tasks:detail", task_id=sibling.id)
    show_all = request.GET.get("all") == "1"
    first_shown = 0 if show_all else max(0, len(state.messages) - RECENT_MESSAGES)
    pending = {
        call.call_id: {
            "call": call,
            "number": number,
            "value": request.POST.get(
                f"pending-{call.call_id}", json.dumps(call.args, indent=2, ensure_ascii=False)
            ),
        }
        for number, call in enumerate(state.pending)
    }
    rows: list[dict[str, Any]] = [
        {
            "index": index,
            "message": message,
            "value": request.POST.get(f"message-{index}", message.content),
            "editable": index >= first_shown or (index == 0 and message.role == "system"),
            # An assistant message that is tool calls reads as the calls: each with its
            # arguments, a pending one editable in place.
            "calls": [
                {
                    "call": call,
                    "args": json.dumps(call.args, indent=2, ensure_ascii=False),
                    "pending": pending.get(call.call_id),
                }
                for call in message.calls or []
            ],
        }
        for index, message in enumerate(state.messages)
    ]
    placed = {
        call["call"].call_id
        for row in rows
        if row["editable"]
        for call in row["calls"]
        if call["pending"]
    }
    return render(
        request,
        "checkpoints/fork.html",
        {
            "task": task,
            "checkpoint": checkpoint,
            "state": state,
            "rows": rows,
            "hidden": sum(1 for row in rows if not row["editable"]),
            "pending": [p for call_id, p in pending.items() if call_id not in placed],
            "pending_count": len(pending),
            "budget": [
                (key, BUDGET_LABELS[key], request.POST.get(key, _shown(budget.get(key))))
                for key in RETRY_BUDGET_FIELDS
            ],
            "error": error,
            "reason": request.POST.get("reason", ""),
        },
        status=status,
    )


@require_POST
@operator_required
def adopt_action(request: AuthedRequest, task_id: UUID) -> HttpResponse:
    """ "Adopt this branch" from the task page's family of forks: the original (`task_id`)
    rolls forward to the fork's head and resumes; the reason is required (audited)."""
    task = access_task(request.user, task_id)
    sibling_id = request.POST.get("sibling_id", "")
    try:
        sibling = access_task(request.user, sibling_id)
    except NotFound:  # a stale or tampered form
        messages.error(request, "sibling_id: no such fork")
        return redirect("tasks:detail", task_id=task.id)
    try:
        adopted = task_adopt(
            task_id=task.id,
            sibling=sibling,
            user=request.user,
            reason=request.POST.get("reason", "")[:2000],
        )
    except (ForkRefused, recovery.RecoveryInvalid) as exc:
        messages.error(request, f"{exc.field}: {exc.message}")
    except (recovery.RecoveryConflict, TransitionConflict, IllegalTransition) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Adopted the branch {sibling.title}: the task is {adopted.status}."
        )
    return redirect("tasks:detail", task_id=task.id)
