"""A call that waits for a human: the review service gates it (review.services), and the run
pauses in waiting_review with a `before_review` checkpoint in the same write. Unless a standing
rule allows it (review.standing): then the rule's approval is written and the call runs."""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from agent.runtime.run import Run
from agent.versions import versions_current
from review.models import ReviewRequest
from review.policy import PolicyDecision
from review.services.drift_gate import review_gate_version_drift
from review.services.gates import ReviewPause, review_gate, review_gate_unknown_outcome
from review.services.plan_gate import review_gate_plan
from review.services.standing_rules import review_gate_standing, standing_rules_distrust
from review.standing import standing_rule_for
from tasks.fingerprint import previewed
from tasks.models import TaskEvent, ToolCall
from tasks.states import TaskStatus
from tasks.tools.registry import ToolSpec

log = logging.getLogger(__name__)


def _pause_for_human(run: Run, row: ToolCall, *, reason: str) -> ReviewPause:
    """The pause a review gate ends the job with (review.services.ReviewPause)."""

    def pause(events: list[TaskEvent], open_review: Any) -> NoReturn:
        run.pending_events.extend(events)
        run.pause(
            to=TaskStatus.WAITING_REVIEW,
            trigger="before_review",
            reason=reason,
            extra=[row],
            then=lambda checkpoint: open_review(checkpoint.id if checkpoint else None),
        )

    return pause


def pause_for_review(
    run: Run,
    row: ToolCall,
    tool: ToolSpec,
    args: Any,
    decision: PolicyDecision,
    *,
    reopened_from: ReviewRequest | None = None,
    changes: list[str] | None = None,
    standing: bool = True,
) -> None:
    """The policy said `review`. A standing rule that allows the call approves it (one write,
    then the call runs: returns); otherwise record the state of its targets with the preview
    computed against it, and pause until a human decides. A reopened review (the approval of
    `reopened_from` no longer holds) records what changed (`changes`). `standing=False`: no
    standing rule stands in (a call that departs from an approved plan)."""
    rule, held = (
        standing_rule_for(task=run.task, tool=tool.name, arguments=row.arguments, decision=decision)
        if standing
        else (None, "")
    )
    preview, fingerprint = previewed(
        tool=tool, ctx=run.tool_context(row), args=args, arguments=row.arguments
    )
    if rule is not None and not held:

        def write(events: list[TaskEvent], record: Any) -> None:
            run.pending_events.extend(events)
            run.commit(trigger=None, extra=[row], then=lambda _checkpoint: record())

        review_gate_standing(
            tool_call=row,
            rule=rule,
            decision=decision,
            preview=preview,
            step_index=run.state.step_index,
            write=write,
            target_fingerprint=fingerprint,
            reopened_from=reopened_from,
            changes=changes,
            versions=versions_current(run),
        )
        return
    log.info("task %s: %s waits for review (%s)", run.task_id, tool.name, decision.reason)
    review_gate(
        tool_call=row,
        decision=decision,
        preview=preview,
        step_index=run.state.step_index,
        pause=_pause_for_human(run, row, reason=f"review: {tool.name}"),
        standing_rule=rule,
        held=held,
        target_fingerprint=fingerprint,
        reopened_from=reopened_from,
        changes=changes,
        versions=versions_current(run),
    )


def pause_for_plan(run: Run, row: ToolCall, *, plan: dict[str, Any]) -> NoReturn:
    """A plan task's dry run ended: its `plan` review opens (agent.runtime.plan) on `row`,
    the call standing for the plan, and the task waits."""
    log.info("task %s: the plan waits for review (%d items)", run.task_id, len(plan["items"]))
    review_gate_plan(
        tool_call=row,
        plan=plan,
        step_index=run.state.step_index,
        pause=_pause_for_human(run, row, reason="plan review"),
    )


def distrust_standing_rules(row: ToolCall, *, error: str) -> None:
    """A call that failed with a permanent error: a standing rule that allowed it pauses
    itself. Only a written row can have been allowed by one (the allowance writes it)."""
    if row.pk is not None:
        standing_rules_distrust(tool_call_ids=[row.pk], cause="failed", detail=error[:200])


def escalate_unknown_outcome(run: Run, row: ToolCall, *, message: str | None = None) -> NoReturn:
    """A non-idempotent call that may have taken effect: a human decides what happened."""
    review_gate_unknown_outcome(
        tool_call=row,
        step_index=run.state.step_index,
        message=message,
        pause=_pause_for_human(run, row, reason=f"unknown outcome: {row.tool}"),
        versions=versions_current(run),
    )


def pause_for_version_drift(
    run: Run,
    row: ToolCall,
    *,
    drift: dict[str, Any],
    policy: PolicyDecision | None,
    reopened_from: ReviewRequest | None = None,
    changes: list[str] | None = None,
) -> NoReturn:
    """The code changed under this call in a way that touches it: it does not run (whatever
    approved it was given under other code); a `version_drift` review asks how to go on."""
    log.info("task %s: %s waits for a version_drift review", run.task_id, row.tool)
    review_gate_version_drift(
        tool_call=row,
        step_index=run.state.step_index,
        drift=drift,
        policy=policy,
        pause=_pause_for_human(run, row, reason=f"version drift: {row.tool}"),
        versions=versions_current(run),
        reopened_from=reopened_from,
        changes=changes,
    )
