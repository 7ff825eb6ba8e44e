"""Before a tool call's attempt: a call refused (invalid, failed a check, denied by policy), the
policy gate (a review pauses the task), and an approval rechecked just before it runs."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agent.runtime.attempt import ToolOutcome
from agent.runtime.call_execute import execute
from agent.runtime.replaying import replay_refused, replay_review
from agent.runtime.review_gate import pause_for_review
from agent.runtime.run import Run
from review import policy
from review.recheck import approval_recheck, review_requirements
from tasks import services
from tasks.agent_state import ProposedCall
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.fingerprint import call_targets
from tasks.models import ToolCall, ToolCallStatus
from tasks.tools.registry import ToolSpec


def refuse(
    run: Run,
    row: ToolCall,
    call: ProposedCall,
    *,
    error_class: str,
    what: str,
    expected: str,
    check: str,
    status: str = ToolCallStatus.FAILED,
) -> ToolOutcome:
    if run.oracle is not None:
        replay_refused(run, call, status=status, error_class=error_class, what=what)
    feedback = compact_feedback(what=what, expected=expected, check=check)
    run.state.budget.invalid_calls += error_class in ("invalid_arguments", "invalid_call")
    services.toolcall_transition(
        call=row,
        to=status,
        fields={
            "error_class": error_class,
            "error_message": what,
            "result": {"observation": feedback},
        },
        write=False,
    )
    run.event(
        EventType.TOOL_REFUSED,
        {
            "call_id": call.call_id,
            "tool": call.tool,
            "error_class": error_class,
            "feedback": feedback,
        },
    )
    # Nothing ran: written with the step's next write.
    run.deferred_rows.append(row)
    return ToolOutcome(
        status=status, observation=feedback, error_class=error_class, error_message=what
    )


def refuse_denied(run: Run, row: ToolCall, what: str) -> ToolOutcome:
    """The policy denies the call (`what` says how): it does not run, and the model is told to
    choose a safer action."""
    return refuse(
        run,
        row,
        ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
        error_class="denied",
        status=ToolCallStatus.DENIED,
        what=what,
        expected="a call the policy allows",
        check="choose a safer action or explain in the final answer why it is needed",
    )


def gate_and_execute(
    run: Run,
    row: ToolCall,
    tool: ToolSpec,
    args: Any,
    *,
    review_floor: policy.PolicyDecision | None = None,
) -> ToolOutcome:
    decision = policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec)
    if decision.action == "allow" and review_floor is not None:
        decision = review_floor
    if decision.action == "deny":
        return refuse_denied(run, row, f"{tool.name} was denied by policy: {decision.reason}")
    if decision.action == "review" and run.oracle is not None:
        replay_review(
            run,
            ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
            rules=[str(r.get("name", "")) for r in decision.rules],
        )
    elif decision.action == "review":
        pause_for_review(run, row, tool, args, decision)
    return execute(run, row, tool, args)


def recheck_approval(run: Run, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome | None:
    """An approved call, just before it runs: its approval must still hold
    (review.recheck.approval_recheck: deadline, arguments, approvers, policy, targets). If it
    does not, the call does not run: a policy that now refuses it refuses it; anything else
    reopens it as a new review that says what changed (the policy's requirements now, else
    the old review's), and the task waits for it. None: it still holds (or a standing rule
    approved the reopened call)."""
    ctx = run.tool_context(row)
    check = approval_recheck(
        tool_call=row,
        tool=tool,
        task=run.task,
        targets=lambda: call_targets(tool=tool, ctx=ctx, args=args, arguments=row.arguments),
        now=timezone.now(),
    )
    if check.holds:
        return None
    if check.denied:
        what = f"{tool.name} was approved, but the policy now denies it: {check.policy.reason}"
        return refuse_denied(run, row, what)
    decision = check.policy
    if decision.action != "review" and check.review is not None:
        decision = review_requirements(review=check.review)
    # Pauses, unless a standing rule approves the reopened call: then it runs (returns).
    pause_for_review(
        run, row, tool, args, decision, reopened_from=check.review, changes=check.changes
    )
    return None
