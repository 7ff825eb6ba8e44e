"""An approval stays true until the effect: it is checked again, in one place
(`approval_recheck`), just before the approved call runs, and a decision re-reads the call's
local targets (`review_targets_now`).

A review records what it is about: the arguments (`arguments_hash`), the state of the call's
targets (`target_fingerprint`, tasks.fingerprint) and the policy that paused it
(`policy_hash`). Between the approval and the moment the worker runs the call the world can
move; the worker runs it only if all of this still holds:

- the review is approved and not past its deadline *now*;
- the arguments are exactly the approved ones;
- every approver may still approve (active, still an operator);
- the policy, evaluated again for these arguments, asks for no more than was given (no deny,
  no more approvals, no four-eyes rule the approvers break);
- every target is as recorded (a target that cannot be read is a change: fail closed).

Anything else is a change: the call does not run, and the loop opens a new review that says
what changed (agent.runtime.call_gate)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from review.models import ReviewApproval, ReviewRequest, ReviewStatus
from review.policy import PolicyDecision, evaluate, interrupt_policy
from review.selectors.access import user_can_decide
from review.standing import standing_rule_lapsed
from tasks.canonical import canonical_hash
from tasks.fingerprint import call_targets, fingerprint_changes
from tasks.models import Task, ToolCall
from tasks.selectors import group_shared_path, task_tool
from tasks.tools.registry import ToolContext, ToolSpec

SINCE_APPROVED = "since you approved"
SINCE_SHOWN = "since the review was shown"


@dataclass(frozen=True)
class Recheck:
    """The outcome of re-checking an approval: `changes` empty means it still holds. `policy`
    is the policy's decision now (a reopened review asks for what it asks); `denied`: it now
    refuses the call."""

    review: ReviewRequest | None
    policy: PolicyDecision
    changes: list[str] = field(default_factory=list)
    denied: bool = False

    @property
    def holds(self) -> bool:
        return not self.changes


# The re-check runs before every approved call: its two reads are plain SQL (no ORM query
# compilation, which cost more than the round trips). What it and a reopened review read of
# the approved review (the preview, the largest column, stays deferred; a standing rule is
# loaded when the review is one's).
_APPROVED_REVIEW_FIELDS = (
    "id",
    "task_id",
    "tool_call_id",
    "kind",
    "status",
    "requested_at",
    "expires_at",
    "decided_by_id",
    "original_arguments",
    "edited_arguments",
    "target_fingerprint",
    "matched_rules",
    "reason",
    "on_expiry",
    "approvals_required",
    "forbid_creator",
    "standing_rule_id",
)
_APPROVED_REVIEW_SQL = (
    f"SELECT {', '.join(_APPROVED_REVIEW_FIELDS)} FROM {ReviewRequest._meta.db_table} "
    "WHERE tool_call_id = %s AND status = %s ORDER BY decided_at DESC, id DESC LIMIT 1"
)


def _approved_review(*, tool_call: ToolCall) -> ReviewRequest | None:
    found = list(
        ReviewRequest.objects.raw(_APPROVED_REVIEW_SQL, [tool_call.pk, ReviewStatus.APPROVED])
    )
    return found[0] if found else None


@functools.cache
def _approvers_sql() -> str:
    user = get_user_model()
    groups = user.groups.through
    return (
        f"SELECT u.id, u.is_active AND (u.is_superuser OR EXISTS (SELECT 1 FROM "
        f"{groups._meta.db_table} ug JOIN {Group._meta.db_table} g ON g.id = ug.group_id "
        "WHERE ug.user_id = u.id AND g.name = %s)) "
        f"FROM {ReviewApproval._meta.db_table} a JOIN {user._meta.db_table} u ON u.id = a.user_id "
        "WHERE a.review_id = %s AND a.arguments_hash = %s ORDER BY a.at"
    )


def _approvers(review: ReviewRequest, approved_hash: str) -> list[tuple[Any, bool]]:
    """(user id, may still decide) for everyone whose approval counts. One query answers for
    the usual approver (active, and a superuser or in `operators`: user_can_decide says yes to
    them); anyone else goes through user_can_decide itself."""
    with connection.cursor() as cursor:
        cursor.execute(_approvers_sql(), ["operators", review.pk, approved_hash])
        rows = [(user_id, bool(surely)) for user_id, surely in cursor.fetchall()]
    if not rows and review.decided_by_id is not None:  # decided without approvals (an outcome)
        rows = [(review.decided_by_id, False)]
    users = get_user_model().objects.in_bulk([uid for uid, surely in rows if not surely])
    return [(uid, surely or user_can_decide(users.get(uid))) for uid, surely in rows]


def _username(user_id: Any) -> str:
    user = get_user_model().objects.filter(pk=user_id).first()
    return user.get_username() if user is not None else f"#{user_id}"


def review_requirements(*, review: ReviewRequest) -> PolicyDecision:
    """What a review asked for, as a policy decision: a review reopened on those terms (its
    targets changed, the policy asks nothing now) asks the same again."""
    wait = (review.expires_at - review.requested_at).total_seconds() if review.expires_at else None
    return PolicyDecision(
        action="review",
        rules=review.matched_rules,
        reason=review.reason,
        expires_after_s=wait,
        on_expiry=review.on_expiry,
        approvals_required=review.approvals_required,
        forbid_creator=review.forbid_creator,
    )


def _policy_changes(*, policy: PolicyDecision, approvers: list[Any], creator_id: Any) -> list[str]:
    """What the policy now asks beyond what the approvers gave."""
    if policy.action != "review":
        return []
    rule = next(
        (r for r in policy.rules if r.get("approvals_required") == policy.approvals_required),
        policy.rules[0] if policy.rules else {},
    )
    name = rule.get("name", "the policy")
    changes = []
    counted = approvers
    if policy.forbid_creator and creator_id in approvers:
        changes.append(f"rule {name} now forbids the task's creator to approve")
        counted = [user_id for user_id in approvers if user_id != creator_id]
    if len(counted) < policy.approvals_required:
        changes.append(
            f"rule {name} now needs {policy.approvals_required} approvals (given: {len(counted)})"
        )
    return changes


def _expiry_changes(review: ReviewRequest, now: datetime) -> list[str]:
    if review.expires_at is not None and now >= review.expires_at:
        return [f"the approval expired at {review.expires_at.isoformat()} before the call ran"]
    return []


def _approver_changes(review: ReviewRequest, approved_hash: str) -> tuple[list[Any], list[str]]:
    """(the approvers who may still decide, one change per approver who may not)."""
    valid, changes = [], []
    for user_id, may_decide in _approvers(review, approved_hash):
        if may_decide:
            valid.append(user_id)
        else:
            changes.append(f"approver {_username(user_id)} no longer may approve")
    return valid, changes


def interrupt_recheck(*, review: ReviewRequest, task: Task, now: datetime) -> Recheck:
    """Whether the approval of a LangGraph interrupt's action still holds, just before the
    graph is resumed with it (agent.graph_runner; the graph runs the action, so its targets are
    the graph's own): not past its deadline, every approver still allowed, and the review
    policy for the action, evaluated again, asking no more than was given. Reads only."""
    policy = interrupt_policy(tool_name=review.tool, args=review.arguments)
    changes = _expiry_changes(review, now)
    valid, approver_changes = _approver_changes(review, canonical_hash(review.arguments))
    changes += approver_changes
    changes += _policy_changes(policy=policy, approvers=valid, creator_id=task.created_by_id)
    return Recheck(review=review, policy=policy, changes=changes)


def approval_recheck(
    *,
    tool_call: ToolCall,
    tool: ToolSpec,
    task: Task,
    targets: Callable[[], list[dict[str, Any]]],
    now: datetime,
) -> Recheck:
    """Whether the approval of `tool_call` still holds, just before it runs. `targets` reads
    the call's targets as they are now (the worker's tool context). Reads only."""
    review = _approved_review(tool_call=tool_call)
    policy = evaluate(tool=tool, args=tool_call.arguments, spec=task.spec)
    if review is None:
        return Recheck(review=None, policy=policy, changes=["no approval of this call was found"])
    if policy.action == "deny":
        return Recheck(
            review=review,
            policy=policy,
            changes=[f"the policy now refuses this call: {policy.reason}"],
            denied=True,
        )
    changes = _expiry_changes(review, now)
    approved_hash = canonical_hash(review.arguments)
    if (
        canonical_hash(tool_call.arguments) != approved_hash
        or tool_call.arguments_hash != approved_hash
    ):
        changes.append("the arguments changed after the approval")
    valid, approver_changes = _approver_changes(review, approved_hash)
    changes += approver_changes
    if review.kind in ("policy", "version_drift"):
        changes += _policy_changes(policy=policy, approvers=valid, creator_id=task.created_by_id)
    if review.kind == "standing_rule" and review.standing_rule is not None:
        # A rule's approval holds while the rule would still give it (paused, ended…: not).
        lapsed = standing_rule_lapsed(review.standing_rule, task=task, decision=policy, now=now)
        if lapsed:
            changes.append(lapsed)
    if review.target_fingerprint.get("targets") is not None:
        changes += fingerprint_changes(
            recorded=review.target_fingerprint, current=targets(), since=SINCE_APPROVED
        )
    return Recheck(review=review, policy=policy, changes=changes)


def review_tool_context(*, review: ReviewRequest) -> ToolContext:
    """A tool context outside a worker (a decision, a reopened review's preview): the task's
    workspace and its group's shared directory, nothing running."""
    return ToolContext(
        task_id=str(review.task_id),
        call_id=review.tool_call.call_id,
        workspace=review.task.workspace_path,
        timeout_s=0.0,
        shared=group_shared_path(review.task),
    )


def review_targets_now(
    *, review: ReviewRequest, arguments: dict[str, Any] | None = None
) -> tuple[ToolSpec | None, ToolContext, Any, list[dict[str, Any]]]:
    """(the tool, the context, the validated arguments, the targets on this machine's disk as
    they are now) of a review's call with `arguments` (default: the ones under review): what a
    decision compares with what the reviewer saw."""
    arguments = review.arguments if arguments is None else arguments
    tool = task_tool(task_id=review.task_id, name=review.tool)
    ctx = review_tool_context(review=review)
    if tool is None:
        return None, ctx, None, []
    args = tool.args_model.model_validate(arguments)
    return (
        tool,
        ctx,
        args,
        call_targets(tool=tool, ctx=ctx, args=args, arguments=arguments, local=True),
    )


def review_target_changes(*, review: ReviewRequest, current: list[dict[str, Any]]) -> list[str]:
    """What of the review's local targets differs from what it recorded (and showed)."""
    if review.target_fingerprint.get("targets") is None:
        return []
    return fingerprint_changes(
        recorded=review.target_fingerprint, current=current, since=SINCE_SHOWN, partial=True
    )
