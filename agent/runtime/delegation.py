"""Delegate calls (multiagent/delegation.py): a step's children start together, the parent
waits for them without a worker, and their outcomes become the calls' results."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agent.runtime.ends import Paused
from agent.runtime.ledger import ledger_row
from agent.runtime.review_gate import pause_for_review
from agent.runtime.run import Run
from multiagent import delegation
from review import policy
from tasks import services
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.models import ToolCall, ToolCallStatus
from tasks.spec import DELEGATE_TOOL
from tasks.states import TaskStatus
from tasks.tools.registry import ToolSpec, registry


def await_delegations(run: Run) -> None:
    """The delegate calls of this step start their children together; the parent then
    waits without a worker until all of them have ended, and their outcomes become the
    calls' results (agent.runtime.call_again replays them from the ledger)."""
    state = run.state
    tool = registry.get(DELEGATE_TOOL)
    new: list[tuple[ToolCall, delegation.Delegation]] = []
    refused: list[ToolCall] = []
    started: list[ToolCall] = []
    for call in state.pending[state.next_call :]:
        if call.tool != DELEGATE_TOOL or call.raw_error:
            continue
        row, _ = ledger_row(run, call, tool)
        if row.status == ToolCallStatus.RUNNING:
            started.append(row)
        elif row.status in (ToolCallStatus.PROPOSED, ToolCallStatus.APPROVED):
            plan = delegation.delegation_plan(
                spec=run.spec,
                title=run.task.title,
                call_id=call.call_id,
                # An approved call starts with the arguments the reviewer approved.
                arguments=row.arguments,
                steps_used=state.budget.steps,
                tokens_used=state.budget.tokens,
                user=run.task.created_by,
            )
            if isinstance(plan, str):
                services.toolcall_transition(
                    call=row,
                    to=ToolCallStatus.FAILED,
                    fields={
                        "error_class": "invalid_call",
                        "error_message": plan,
                        "result": {"observation": plan},
                    },
                    write=False,
                )
                refused.append(row)
            elif row.status == ToolCallStatus.PROPOSED and _delegation_denied(run, row, tool, plan):
                refused.append(row)
            else:
                new.append((row, plan))
    if new:
        now = timezone.now()
        for row, plan in new:
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.RUNNING,
                now=now,
                fields={"attempts": 1},
                write=False,
            )
            run.event(
                EventType.DELEGATED,
                {"call_id": row.call_id, "agent": plan.args.agent, "goal": plan.args.goal},
            )
        run.pause(
            to=TaskStatus.WAITING_CHILDREN,
            trigger="before_delegate",
            reason=f"waiting for {len(new) + len(started)} child task(s)",
            extra=[*refused, *(row for row, _ in new)],
            then=lambda _checkpoint: delegation.delegation_start(
                parent=run.task, delegations=[plan for _, plan in new]
            ),
        )
    children = delegation.delegation_children(
        parent_id=run.task_id, call_ids=[row.call_id for row in started]
    )
    if any(not child.is_terminal for child in children.values()):
        try:
            run.pause(
                to=TaskStatus.WAITING_CHILDREN,
                trigger=None,
                reason="waiting for child tasks",
                extra=refused,
            )
        except Paused:
            # A child that ended after the read above found its parent still running and woke
            # nobody: now that the parent waits (committed), look again, under the group lock.
            delegation.delegation_wake(parent_id=run.task_id)
            raise
    for row in started:
        child = children.get(row.call_id)
        delegation.delegation_settle(row=row, child=child)
        tokens, cost = delegation.child_usage(child)
        state.budget.tokens += tokens
        state.budget.cost_usd += cost
        run.event(
            EventType.DELEGATION_FINISHED,
            {
                "call_id": row.call_id,
                "status": row.status,
                "child": (row.result or {}).get("task_id"),
            },
        )
    if started or refused:
        run.commit(trigger=None, extra=[*refused, *started])


def _delegation_denied(run: Run, row: ToolCall, tool: ToolSpec, plan: Any) -> bool:
    """A delegate call meets the review policy like any other call before its child
    starts: denied, it is refused (True); to be reviewed, the task pauses until a human
    decides (an approved call starts its child when the task resumes)."""
    decision = policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec)
    if decision.action == "review":
        pause_for_review(run, row, tool, plan.args, decision)
    if decision.action != "deny":
        return False
    what = f"{tool.name} was denied by policy: {decision.reason}"
    feedback = compact_feedback(
        what=what,
        expected="a call the policy allows",
        check="do the work yourself or explain in the final answer why it is needed",
    )
    services.toolcall_transition(
        call=row,
        to=ToolCallStatus.DENIED,
        fields={
            "error_class": "denied",
            "error_message": what,
            "result": {"observation": feedback},
        },
        write=False,
    )
    run.event(
        EventType.TOOL_REFUSED,
        {"call_id": row.call_id, "tool": row.tool, "error_class": "denied", "feedback": what},
    )
    return True
