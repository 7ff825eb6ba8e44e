"""What a review of kind `plan` adds to a review (review.services.plans): the plan's hash, its
items and its cost estimate; null on every other kind of review."""

from __future__ import annotations

from typing import Any

from ninja import Schema

from review.models import ReviewRequest

ITEM_FIELDS = (
    "id",
    "call_id",
    "tool",
    "arguments",
    "preview",
    "risk",
    "rules",
    "approvals_required",
    "simulated",
    "after_simulated",
)


class PlanFields(Schema):
    # The hash an approval of the plan sends back (`plan_hash`).
    plan_hash: str | None = None
    # The intended effects in order: id, tool, arguments, preview, risk, the rules matching it,
    # the approvals they need, and whether it was simulated or came after a simulated result.
    items: list[dict[str, Any]] | None = None
    # The dry run's usage: tokens, cost_usd, steps.
    estimate: dict[str, Any] | None = None

    @staticmethod
    def resolve_plan_hash(obj: ReviewRequest) -> str | None:
        return obj.plan["plan_hash"] if obj.plan else None

    @staticmethod
    def resolve_items(obj: ReviewRequest) -> list[dict[str, Any]] | None:
        if not obj.plan:
            return None
        return [{k: item.get(k) for k in ITEM_FIELDS} for item in obj.plan["items"]]

    @staticmethod
    def resolve_estimate(obj: ReviewRequest) -> dict[str, Any] | None:
        return obj.plan["estimate"] if obj.plan else None
