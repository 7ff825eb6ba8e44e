"""The review inbox: the navigation's live summary, the list with its filters and sorts, the
order j/k and "next review" walk, and the filters' choices."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import (
    Case,
    CharField,
    Count,
    DateTimeField,
    Exists,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone

from review.models import ReviewApproval, ReviewRequest, ReviewStatus, ReviewView
from review.selectors.access import user_can_decide

# How many new reviews one summary lists (the browser announces and notifies these).
SUMMARY_NEW_LIMIT = 10


def _not_decidable_by(user: User) -> Q:
    """Pending reviews `user` may not decide: the creator under the creator ban, or one
    they already approved (another operator must)."""
    approved = ReviewApproval.objects.filter(review=OuterRef("pk"), user_id=user.pk)
    return Q(forbid_creator=True, task__created_by_id=user.pk) | Q(Exists(approved))


def reviews_summary(*, user: User, since: int | None = None) -> dict[str, Any]:
    """What the navigation shows `user` live: pending reviews (every role reads them all),
    how many of those `user` may decide, the newest pending id, and the pending reviews
    newer than `since` (oldest first, at most SUMMARY_NEW_LIMIT) each with whether `user`
    may decide it. One aggregate query, plus one for the new ones when `since` is given."""
    pending = ReviewRequest.objects.filter(status=ReviewStatus.PENDING)
    decides = user_can_decide(user)
    blocked = _not_decidable_by(user)
    totals = pending.aggregate(
        pending=Count("id"),
        latest=Max("id"),
        decidable=Count("id", filter=~blocked),
    )
    new: list[dict[str, Any]] = []
    if since is not None and (totals["latest"] or 0) > since:
        rows = (
            pending.filter(id__gt=since)
            .annotate(blocked=Case(When(blocked, then=Value(True)), default=Value(False)))
            .order_by("id")
            .values("id", "tool", "task_id", "task__title", "blocked")[:SUMMARY_NEW_LIMIT]
        )
        new = [
            {
                "id": row["id"],
                "tool": row["tool"],
                "task_id": str(row["task_id"]),
                "task": row["task__title"],
                "decidable": decides and not row["blocked"],
            }
            for row in rows
        ]
    return {
        "pending": totals["pending"],
        "decidable": totals["decidable"] if decides else 0,
        "latest": totals["latest"] or 0,
        "new": new,
    }


# The inbox's sorts (`sort=`), each applied to the pending reviews; decided ones follow, most
# recently decided first. `age`: oldest first (the longest wait is the most urgent).
REVIEW_SORTS = ("age", "newest", "time_left", "risk", "tool")
# Highest risk first for `sort=risk`.
RISK_RANK = {"destructive": 0, "external": 1, "execute": 2, "write": 3, "read": 4}
# `claimed_by=` takes a username, or this for the unclaimed ones.
NOBODY = "nobody"


def _pending(value: Any, output: Any) -> Case:
    return Case(When(status=ReviewStatus.PENDING, then=value), default=None, output_field=output)


def _sort_keys(sort: str) -> list[Any]:
    at = _pending(F("requested_at"), DateTimeField())
    if sort == "newest":
        return [at.desc(nulls_last=True), F("id").desc()]
    keys: list[Any] = []
    if sort == "time_left":
        keys = [_pending(F("expires_at"), DateTimeField()).asc(nulls_last=True)]
    elif sort == "risk":
        rank = Case(
            *(
                When(status=ReviewStatus.PENDING, risk=risk, then=Value(position))
                for risk, position in RISK_RANK.items()
            ),
            When(status=ReviewStatus.PENDING, then=Value(len(RISK_RANK))),
            default=None,
            output_field=IntegerField(),
        )
        keys = [rank.asc(nulls_last=True)]
    elif sort == "tool":
        keys = [_pending(F("tool"), CharField()).asc(nulls_last=True)]
    return [*keys, at.asc(nulls_last=True), F("id").asc()]


def _rule_filter(rule: str) -> Q:
    """Reviews one of whose matched rules is named `rule`."""
    if connection.features.supports_json_field_contains:
        return Q(matched_rules__contains=[{"name": rule}])
    # SQLite (`./harness up` without DATABASE_URL): the stored JSON text holds the name.
    return Q(matched_rules__icontains=json.dumps({"name": rule})[1:-1])


def reviews_list(
    *,
    status: str | None = None,
    tool: str | None = None,
    risk: str | None = None,
    task: str | None = None,
    rule: str | None = None,
    claimed_by: str | None = None,
    assigned_to: User | None = None,
    sort: str = "age",
) -> QuerySet[ReviewRequest]:
    """Pending first, in `sort` order (REVIEW_SORTS; default oldest first), then decided ones,
    most recently decided first. `status` is comma-separated; `task` is a task id or a piece
    of its title; `rule` a matched rule's name; `claimed_by` a username or NOBODY;
    `assigned_to` a user: the reviews assigned to them or to one of their groups."""
    qs = ReviewRequest.objects.select_related(
        "task",
        "task__parent",
        "tool_call",
        "decided_by",
        "standing_rule",
        "claimed_by",
        "assigned_to",
        "assigned_group",
        "edited_by",
    )
    if status:
        qs = qs.filter(status__in=[s for s in status.split(",") if s])
    if tool:
        qs = qs.filter(tool=tool)
    if risk:
        qs = qs.filter(risk=risk)
    if rule:
        qs = qs.filter(_rule_filter(rule))
    if claimed_by == NOBODY:
        qs = qs.filter(claimed_by__isnull=True)
    elif claimed_by:
        qs = qs.filter(claimed_by__username=claimed_by)
    if assigned_to is not None:
        qs = qs.filter(Q(assigned_to=assigned_to) | Q(assigned_group__in=assigned_to.groups.all()))
    if task:
        try:
            qs = qs.filter(task_id=uuid.UUID(task))
        except ValueError:
            qs = qs.filter(task__title__icontains=task)
    pending_first = Case(
        When(status=ReviewStatus.PENDING, then=Value(0)),
        default=Value(1),
        output_field=IntegerField(),
    )
    return qs.annotate(pending_first=pending_first).order_by(
        "pending_first", *_sort_keys(sort), "-decided_at", "-id"
    )


# How far "next review" and j/k look along the inbox's order.
ORDER_WINDOW = 1000


def reviews_pending_order(**filters: Any) -> list[int]:
    """The ids of the pending reviews the inbox shows with these filters, in its order (at
    most ORDER_WINDOW): what j/k walk and "next review" picks from."""
    return list(
        reviews_list(**filters, status=ReviewStatus.PENDING).values_list("id", flat=True)[
            :ORDER_WINDOW
        ]
    )


def review_neighbours(*, order: list[int], review_id: int) -> tuple[int | None, int | None]:
    """(previous, next) of a review along `order`; for one not in it, (None, the first)."""
    if review_id not in order:
        return None, order[0] if order else None
    at = order.index(review_id)
    return (order[at - 1] if at else None), (order[at + 1] if at + 1 < len(order) else None)


def review_next_decidable(*, user: User, order: list[int], after: int) -> int | None:
    """The first review after `after` along `order` (wrapping around) that `user` may decide
    now: still pending, not expired, not already approved by them, not their own task's under
    forbid-creator. None when there is none (or the user decides nothing)."""
    if not user_can_decide(user):
        return None
    at = order.index(after) + 1 if after in order else 0
    candidates = [i for i in order[at:] + order[:at] if i != after]
    decidable = set(
        ReviewRequest.objects.filter(id__in=candidates, status=ReviewStatus.PENDING)
        .exclude(expires_at__lte=timezone.now())
        .exclude(approvals__user=user)
        .exclude(forbid_creator=True, task__created_by=user)
        .values_list("id", flat=True)
    )
    return next((i for i in candidates if i in decidable), None)


def reviews_rules() -> list[str]:
    """The names of the rules that paused the pending reviews (the inbox's rule filter)."""
    names: set[str] = set()
    for rules in ReviewRequest.objects.filter(status=ReviewStatus.PENDING).values_list(
        "matched_rules", flat=True
    )[:ORDER_WINDOW]:
        names.update(
            str(r.get("name")) for r in rules or [] if isinstance(r, dict) and r.get("name")
        )
    return sorted(names)


def reviews_tools() -> list[str]:
    return list(ReviewRequest.objects.order_by("tool").values_list("tool", flat=True).distinct())


def reviews_unopened(*, ids: list[int]) -> list[ReviewRequest]:
    """The pending reviews among `ids` whose page nobody who may decide has opened (no
    ReviewView): a bulk approval asks before deciding them unread."""
    return list(
        ReviewRequest.objects.filter(id__in=ids, status=ReviewStatus.PENDING)
        .exclude(Exists(ReviewView.objects.filter(review=OuterRef("pk"))))
        .select_related("task")
        .order_by("id")
    )
