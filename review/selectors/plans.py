"""A plan task's plan (issue #46; review.services.plans): the decided plan an execution run is
held to (plan_for_execution), and the plan with every item's state for the API and the pages
(task_plan): approved, rejected or edited by the decision, then executed, or departed with how
(the execution run's calls marked by agent.runtime.plan)."""

from __future__ import annotations

from typing import Any

from review.models import ReviewRequest, ReviewStatus
from tasks.models import Task, ToolCall, ToolCallStatus

# The kind of a plan task's one review (opened by review.services.plan_gate).
PLAN = "plan"


def plan_review_latest(*, task_id: Any) -> ReviewRequest | None:
    return (
        ReviewRequest.objects.filter(task_id=task_id, kind=PLAN)
        .select_related("decided_by")
        .order_by("-requested_at", "-id")
        .first()
    )


def plan_for_execution(*, task_id: Any) -> dict[str, Any] | None:
    """The approved plan of the task, as its execution run matches calls against it: each item
    with its `planned` arguments, the `arguments` approved (None: rejected), the decision,
    the rejection's reason and the state of its targets the plan saw (and, edited, the state
    of the edited call's targets when the plan was decided)."""
    review = plan_review_latest(task_id=task_id)
    if review is None or review.status != ReviewStatus.APPROVED or not review.choice:
        return None
    decided = review.choice.get("items") or {}
    items = []
    for item in (review.plan or {}).get("items", []):
        decision = decided.get(item["id"]) or {"decision": "approve"}
        items.append(
            {
                "id": item["id"],
                "tool": item["tool"],
                "planned": item["arguments"],
                "arguments": decision.get("arguments")
                if decision["decision"] != "reject"
                else None,
                "decision": decision["decision"],
                "comment": decision.get("comment", ""),
                "target_hash": item["target_fingerprint"].get("hash"),
                # An edited item: the state of the edited call's targets at the decision.
                "edited_fingerprint": decision.get("target_fingerprint"),
            }
        )
    return {
        "review_id": review.id,
        "decided_by": review.decided_by.get_username() if review.decided_by else "",
        "items": items,
    }


_STATE = {"approve": "approved", "reject": "rejected", "edit": "edited"}


def task_plan(*, task: Task) -> dict[str, Any] | None:
    """The task's plan with each item's state (None: the task has no plan review yet)."""
    review = plan_review_latest(task_id=task.id)
    if review is None or review.plan is None:
        return None
    plan: dict[str, Any] = review.plan
    decided = (review.choice or {}).get("items") or {}
    calls: dict[str, list[ToolCall]] = {}
    for call in ToolCall.objects.filter(task_id=task.id).exclude(plan_item="").order_by("id"):
        calls.setdefault(call.plan_item, []).append(call)
    items = []
    for item in plan["items"]:
        decision = decided.get(item["id"])
        state = "pending" if review.status == ReviewStatus.PENDING else "rejected"
        if review.status == ReviewStatus.APPROVED:
            state = _STATE[(decision or {"decision": "approve"})["decision"]]
        departed = ""
        for call in calls.get(item["id"], []):
            if call.plan_mark == "in_plan" and call.status == ToolCallStatus.SUCCEEDED:
                state = "executed"
            elif call.plan_mark == "departed":
                departed = _departure_of(call)
        if departed and state != "executed":
            state = "departed"
        items.append(
            {
                **{k: item[k] for k in ("id", "call_id", "tool", "arguments", "preview", "risk")},
                "rules": item["rules"],
                "simulated": item["simulated"],
                "after_simulated": item["after_simulated"],
                "state": state,
                "decision": {
                    k: v for k, v in decision.items() if k not in ("preview", "target_fingerprint")
                }
                if decision
                else None,
                # An edited item: what the edited call would do, previewed at the decision.
                "edited_preview": (decision or {}).get("preview", ""),
                "departed": departed,
                "calls": [c.call_id for c in calls.get(item["id"], [])],
            }
        )
    return {
        "review_id": review.id,
        "status": review.status,
        "plan_hash": plan["plan_hash"],
        "estimate": plan["estimate"],
        "phase": task.plan_phase,
        "items": items,
    }


def _departure_of(call: ToolCall) -> str:
    """How a call departed from its item: the reason of the review it paused for."""
    reason = call.reviews.order_by("-id").values_list("reason", flat=True).first() or ""
    return reason.removeprefix("departs from the plan: ")
