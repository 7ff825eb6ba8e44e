"""Delegation: a parent's `delegate` calls start child tasks with their own loops, workspaces,
ledgers and checkpoints; the parent waits without a worker (`waiting_children`) and is queued
again once every child it waits for has ended; on resume each child's final answer (or its
failure) becomes the result of the call that started it.

The loop calls `delegation_plan` (validate, build the child's spec), `delegation_start` (inside
the transaction that moves the parent to `waiting_children`) and `delegation_settle` (the
outcome of a call whose child ended). A child's end calls `delegation_wake`; the sweep calls
`delegations_wake_ready` for the ends nobody reported (a child canceled on its own, a lost
worker).

Lock contract: `delegation_wake` locks every task of the group in id order (as the
coordinator does) before it reads the children, so it cannot deadlock with a round.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from pydantic import ValidationError

from harness_base.config import harness_config
from multiagent import coordinator
from multiagent.selectors import group_lock, group_root
from multiagent.tools import DelegateArgs
from tasks import services
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.spec import DELEGATE_TOOL, BudgetSpec, TaskSpec
from tasks.states import TERMINAL, TaskStatus

log = logging.getLogger(__name__)

ANSWER_MAX_CHARS = 20_000


@dataclass(frozen=True)
class Delegation:
    """A delegate call the loop can start: its arguments and the child's TaskSpec."""

    call_id: str
    args: DelegateArgs
    spec: TaskSpec


def _child_goal(template: str | None, goal: str, inputs: dict[str, Any]) -> str:
    rendered_inputs = json.dumps(inputs, ensure_ascii=False, sort_keys=True)
    if template is None:
        return f"{goal}\n\nInputs: {rendered_inputs}" if inputs else goal
    # Plain replacement, not str.format: the model's text must not reach a format string.
    return template.replace("{goal}", goal).replace("{inputs}", rendered_inputs)


def delegation_plan(
    *,
    spec: TaskSpec,
    title: str,
    call_id: str,
    arguments: dict[str, Any],
    steps_used: int,
    tokens_used: int,
    user: User | None,
) -> Delegation | str:
    """The child a delegate call would start, or why it cannot start (shown to the model).
    Budgets propagate down: the child gets at most what the parent has left. `user`: the
    parent's creator, whom the child runs for (checked again now: e.g. a replay model's source
    must still be a task they may read)."""
    try:
        args = DelegateArgs.model_validate(arguments)
    except ValidationError as exc:
        return f"invalid delegate arguments: {exc.errors()[0]['msg']}"
    agent = (spec.agents or {}).get(args.agent)
    if agent is None:
        known = ", ".join(sorted(spec.agents or {})) or "(none)"
        return f"unknown agent {args.agent!r}; this task's agents: {known}"
    budget = (agent.budget or BudgetSpec()).model_copy()
    budget.max_steps = max(1, min(budget.max_steps, spec.budget.max_steps - steps_used))
    budget.max_tokens = max(1, min(budget.max_tokens, spec.budget.max_tokens - tokens_used))
    try:
        child = TaskSpec(
            title=f"{title[:150]} / {args.agent}",
            goal=_child_goal(agent.goal_template, args.goal, args.inputs)[:100_000],
            priority=spec.priority,
            model=agent.model,
            tools=agent.tools,
            budget=budget,
            review=agent.review,
            retry=spec.retry,
            system_prompt=agent.system_prompt,
            context=spec.context,
        )
        services.task_spec_check(child, user=user)
    except (ValidationError, services.SpecError) as exc:
        return f"agent {args.agent!r} cannot start: {exc}"
    return Delegation(call_id=call_id, args=args, spec=child)


def delegation_start(*, parent: Task, delegations: list[Delegation]) -> list[Task]:
    """Create (and, after commit, enqueue) one child per delegation. Idempotent: a call that
    already has its child keeps it. Runs inside the transaction pausing the parent."""
    existing = set(
        Task.objects.filter(
            parent=parent, parent_call_id__in=[d.call_id for d in delegations]
        ).values_list("parent_call_id", flat=True)
    )
    children = []
    for item in delegations:
        if item.call_id in existing:
            continue
        children.append(
            services.task_create(
                spec=item.spec,
                user=parent.created_by,
                parent=parent,
                parent_call_id=item.call_id,
                agent_name=item.args.agent,
            )
        )
    return children


def delegation_children(*, parent_id: Any, call_ids: list[str]) -> dict[str, Task]:
    """call_id -> the child that call started."""
    return {
        child.parent_call_id: child
        for child in Task.objects.filter(parent_id=parent_id, parent_call_id__in=call_ids)
    }


def delegation_settle(*, row: ToolCall, child: Task | None) -> None:
    """Turn an ended child into its delegate call's outcome (the loop writes the row)."""
    finished = {"finished_at": child.finished_at if child is not None else None}
    if child is not None and child.status == TaskStatus.SUCCEEDED:
        result = {
            "agent": child.agent_name,
            "task_id": str(child.id),
            "answer": child.result[:ANSWER_MAX_CHARS],
        }
        services.toolcall_transition(
            call=row,
            to=ToolCallStatus.SUCCEEDED,
            fields={**finished, "result": result},
            write=False,
        )
        return
    if child is None:
        what, error_class = "the child task is gone", "child_failed"
    else:
        what = (
            f"sub-agent {child.agent_name!r} (task {child.id}) ended {child.status}: "
            f"{child.error_class}: {child.error_message[:1000]}"
        )
        error_class = "child_canceled" if child.status == TaskStatus.CANCELED else "child_failed"
    result = {
        "observation": compact_feedback(
            what=what,
            expected="the sub-agent's final answer",
            check="delegate again with a clearer goal, do it yourself, or explain the failure",
        ),
        **({"task_id": str(child.id)} if child is not None else {}),
    }
    services.toolcall_transition(
        call=row,
        to=ToolCallStatus.FAILED,
        fields={**finished, "error_class": error_class, "error_message": what, "result": result},
        write=False,
    )


def child_usage(child: Task | None) -> tuple[int, float]:
    """(tokens, cost in USD) a child used, charged to its parent when the call settles."""
    if child is None:
        return 0, 0.0
    return child.tokens_used, float(Decimal(child.cost_usd))


def _awaited(parent: Task) -> list[Task]:
    """The children the parent still waits for: those of its open (running) delegate calls."""
    open_calls = ToolCall.objects.filter(
        task=parent, tool=DELEGATE_TOOL, status=ToolCallStatus.RUNNING
    ).values_list("call_id", flat=True)
    return list(
        Task.objects.filter(parent=parent, parent_call_id__in=list(open_calls)).exclude(
            status__in=TERMINAL
        )
    )


def delegation_wake(*, parent_id: Any) -> bool:
    """Queue a waiting parent whose children have all ended, after the coordinator's global
    checkpoint of the group (trigger `children_finished`, if configured). False when the
    parent does not wait or still waits for a child."""
    with transaction.atomic():
        parent = Task.objects.filter(id=parent_id).first()
        if parent is None:
            return False
        root = group_root(parent)
        group_lock(root_id=root.id)
        parent.refresh_from_db()
        if parent.status != TaskStatus.WAITING_CHILDREN or _awaited(parent):
            return False
        if "children_finished" in harness_config().multi_agent.global_checkpoints:
            try:
                coordinator.round_start(
                    root_id=root.id, trigger="children_finished", reason="children finished"
                )
            except coordinator.RoundConflict as exc:
                services.event_record(
                    task_id=parent.id,
                    type=EventType.GLOBAL_CHECKPOINT_SKIPPED,
                    payload={"reason": str(exc)},
                )
        task = services.task_transition(
            task_id=parent.id,
            to=TaskStatus.QUEUED,
            expect_from=[TaskStatus.WAITING_CHILDREN],
            reason="children finished",
        )
        services.task_enqueue(task=task)
        return True


def delegations_wake_ready() -> int:
    """The sweep's pass: wake every waiting parent whose children have all ended."""
    woken = 0
    for parent_id in Task.objects.filter(status=TaskStatus.WAITING_CHILDREN).values_list(
        "id", flat=True
    )[:500]:
        try:
            woken += delegation_wake(parent_id=parent_id)
        except Exception:  # one broken group must not stop the sweep
            log.exception("waking parent %s failed", parent_id)
    return woken
