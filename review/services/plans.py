"""Reviews of kind `plan` (issue #46): one review for a whole dry run. The loop opens it when
a plan task's dry run ends (review_gate_plan, agent.runtime.plan); a reviewer approves the plan
(items not named are approved), approves it with items rejected (each with a reason) or edited
(through the same gate as any edit: schema and policy, edit_validate), or rejects the whole
plan (review_decide_plan). The decision is bound to the plan's hash; rules apply per item: a
denied item cannot be approved, and an item whose rules need two approvers needs two approvals
of the same decision (the review's `approvals_required` is the largest of the approved items').

Approving requeues the task as its execution run (plan_phase `executing`, from the task's
start, against the original workspace), which holds every side effect to the decided items;
rejecting the plan requeues it to end canceled (plan_phase `rejected`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.policy import PolicyDecision, evaluate
from review.previews import plan_item_preview
from review.selectors.access import user_can_decide
from review.selectors.plans import PLAN
from review.services.approvals import approval_add, approver_check, decision_check_open
from review.services.edits import edit_validate
from review.services.errors import ReviewConflict, ReviewForbidden, ReviewInvalid
from review.services.settle import review_settle
from tasks.canonical import canonical_hash
from tasks.selectors import task_tool
from tasks.services import task_lock, task_plan_phase_set

PLAN_HINT = (
    "a plan review takes approve (with plan_hash, and items to reject or edit) or reject "
    "(the whole plan)"
)
# What a decision on a plan review may be, and the hint a wrong one (or review_decide) gets.
PLAN_DECISIONS = (PLAN_HINT, ("approve", "reject"))


def review_decide_plan(
    *,
    review_id: Any,
    user: User,
    decision: str,
    plan_hash: str | None = None,
    items: dict[str, Any] | None = None,
    comment: str = "",
    via: str = ReceiptVia.API,
) -> ReviewRequest:
    """Approve (with per-item decisions) or reject a pending `plan` review (the module
    docstring). Raises ReviewForbidden, ReviewConflict or ReviewInvalid naming the field
    (`plan_hash`, `items.<id>...`); on any of them nothing changes."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators may decide reviews")
    if decision not in ("approve", "reject"):
        raise ReviewInvalid(
            PLAN_HINT, errors=[{"field": "decision", "message": "approve | reject"}]
        )
    if decision == "approve" and not plan_hash:
        raise ReviewInvalid(
            "an approval must name the plan it approves",
            errors=[{"field": "plan_hash", "message": "required: the plan_hash you were shown"}],
        )
    shown = ReviewRequest.objects.select_related("task", "tool_call").get(id=review_id)
    task_id, plan, spec = shown.task_id, shown.plan, shown.task.spec
    if plan is None:
        raise ReviewInvalid(
            "plan_hash and items apply to reviews of kind plan",
            errors=[{"field": "plan_hash", "message": "not for this review's kind"}],
        )
    decided = _items_decided(review=shown, plan=plan, items=items or {}, spec=spec)
    with transaction.atomic():
        task = task_lock(task_id=task_id)
        review = ReviewRequest.objects.select_for_update().get(id=review_id)
        review.task = task
        now = decision_check_open(review=review, task=task, seen_hash=None)
        if decision == "reject":
            review.choice = {"decision": "reject"}
            review.save(update_fields=["choice"])
            return _settle(
                task=task,
                review=review,
                user=user,
                approved=False,
                comment=comment,
                now=now,
                via=via,
            )
        if plan_hash != plan["plan_hash"]:
            raise ReviewConflict(
                "the plan changed since you saw it: reload and decide again",
                errors=[
                    {"field": "plan_hash", "message": f"stale; current is {plan['plan_hash']}"}
                ],
            )
        return _approve(
            task=task, review=review, user=user, decided=decided, comment=comment, now=now, via=via
        )


def _approve(
    *,
    task: Any,
    review: ReviewRequest,
    user: User,
    decided: dict[str, Any],
    comment: str,
    now: Any,
    via: str,
) -> ReviewRequest:
    """One operator's approval of the plan with `decided` (item id -> decision): counted
    toward the approvals the approved items' rules need; the last one settles the review and
    requeues the task as its execution run. Caller holds both locks."""
    approved_items = [i for i, d in decided.items() if d["decision"] != "reject"]
    rules = [d["policy"] for i, d in decided.items() if i in approved_items]
    assert review.plan is not None  # a plan review (review_decide_plan checked)
    review.approvals_required = max([1, *(p.approvals_required for p in rules)])
    review.forbid_creator = any(p.forbid_creator for p in rules)
    approver_check(review=review, task=task, user=user, act="approve its plan", what="this plan")
    choice = {
        "decision": "approve",
        "plan_hash": review.plan["plan_hash"],
        "items": {i: {k: v for k, v in d.items() if k != "policy"} for i, d in decided.items()},
    }
    review.choice = choice
    review.save(update_fields=["approvals_required", "forbid_creator", "choice"])
    if not approval_add(
        task=task,
        review=review,
        user=user,
        arguments_hash=canonical_hash(choice),
        comment=comment,
        now=now,
        via=via,
        decision="approve",
        event={"kind": PLAN, "items": _brief(choice["items"])},
        before={"plan_hash": choice["plan_hash"]},
        after={"items": _brief(choice["items"])},
    ):
        return review
    return _settle(
        task=task, review=review, user=user, approved=True, comment=comment, now=now, via=via
    )


def _settle(
    *,
    task: Any,
    review: ReviewRequest,
    user: User,
    approved: bool,
    comment: str,
    now: Any,
    via: str,
) -> ReviewRequest:
    """The plan decided: the task's plan phase, then the review settled as any (the call
    standing for the plan approved or rejected, the receipt, the task requeued)."""
    task_plan_phase_set(task=task, phase="executing" if approved else "rejected")
    return review_settle(
        task=task,
        review=review,
        user=user,
        status=ReviewStatus.APPROVED if approved else ReviewStatus.REJECTED,
        comment=comment,
        reason="plan approved" if approved else "plan rejected",
        approved=review.tool_call.arguments if approved else None,
        now=now,
        via=via,
    )


def _brief(items: dict[str, Any]) -> dict[str, Any]:
    """The decided items for the event and the audit: without an edit's preview and targets."""
    return {
        i: {k: v for k, v in d.items() if k not in ("preview", "target_fingerprint")}
        for i, d in items.items()
    }


def _items_decided(
    *, review: ReviewRequest, plan: dict[str, Any], items: dict[str, Any], spec: dict[str, Any]
) -> dict[str, Any]:
    """Every item's decision: approve (not named), reject (with its reason) or edit (its
    arguments through edit_validate, with the preview of the edited call and the state of its
    targets now, which the execution run holds it to), each with the policy its approved
    arguments meet. A
    named id the plan lacks, a rejection without a reason, or an approved item the policy
    denies is ReviewInvalid naming `items.<id>`."""
    task_id = review.task_id
    known = {item["id"]: item for item in plan["items"]}
    for item_id in items:
        if item_id not in known:
            raise ReviewInvalid(
                f"the plan has no item {item_id!r}",
                errors=[{"field": f"items.{item_id}", "message": "not an item of this plan"}],
            )
    out: dict[str, Any] = {}
    for item_id, item in known.items():
        given = items.get(item_id) or {"decision": "approve"}
        kind = given.get("decision")
        field = f"items.{item_id}"
        if kind == "reject":
            reason = str(given.get("comment") or "").strip()
            if not reason:
                raise ReviewInvalid(
                    "a rejected item needs a reason",
                    errors=[{"field": f"{field}.comment", "message": "required for reject"}],
                )
            out[item_id] = {
                "decision": "reject",
                "comment": reason[:2000],
                "policy": PolicyDecision(action="allow"),
            }
            continue
        if kind not in ("approve", "edit"):
            raise ReviewInvalid(
                "an item's decision is reject or edit",
                errors=[{"field": f"{field}.decision", "message": "reject | edit"}],
            )
        arguments = given.get("arguments") if kind == "edit" else item["arguments"]
        out[item_id] = {
            "decision": kind,
            "arguments": arguments,
            "policy": _item_policy(
                task_id=task_id,
                item=item,
                arguments=arguments,
                spec=spec,
                field=field,
                edited=kind == "edit",
            ),
        }
        if kind == "edit" and isinstance(arguments, dict):  # _item_policy validated the edit
            preview, fingerprint = plan_item_preview(
                review=review, tool_name=item["tool"], arguments=arguments
            )
            out[item_id] |= {"preview": preview, "target_fingerprint": fingerprint}
    return out


def _item_policy(
    *,
    task_id: Any,
    item: dict[str, Any],
    arguments: Any,
    spec: dict[str, Any],
    field: str,
    edited: bool,
) -> PolicyDecision:
    """The policy on an approved item's arguments: an edit through the edit gate (schema,
    deny), an unedited item re-evaluated (a deny rule now matching it cannot be approved)."""
    try:
        if edited:
            return edit_validate(
                task_id=task_id, tool_name=item["tool"], arguments=arguments, spec=spec
            )
        tool = task_tool(task_id=task_id, name=item["tool"])
        if tool is None:
            raise ReviewConflict(f"tool {item['tool']!r} is no longer available")
        policy = evaluate(tool=tool, args=arguments, spec=spec)
    except ReviewInvalid as exc:
        raise ReviewInvalid(
            f"item {item['id']}: {exc.message}",
            errors=[
                {"field": f"{field}.{e.get('field', 'arguments')}", "message": e["message"]}
                for e in (exc.errors or [{"message": exc.message}])
            ],
        ) from None
    if policy.action == "deny":
        raise ReviewInvalid(
            f"item {item['id']} ({item['tool']}) is denied by policy: {policy.reason}; reject it",
            errors=[{"field": field, "message": "denied by policy: reject it"}],
        )
    return policy
