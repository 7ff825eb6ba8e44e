"""What the review statistics count (DIMS, COUNTS, TIMES) and how: one dict per review opened in
some ranges (`facts`), folded into counts and log-scale histograms per dimension and key
(`fold`). The rolls and the reads both go through them, so both agree."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, OuterRef, Subquery

from review.models import (
    DecisionReceipt,
    Notification,
    NotificationStatus,
    ReviewRequest,
    ReviewStatus,
    ReviewView,
)
from review.rollups.targets import configured_targets, review_target_s, rule_target_s
from tasks.rollups import BUCKETS_PER_DOUBLING, MIN_BUCKETED, hour_floor, in_ranges

DIMS = ("rule", "tool", "operator", "via")
COUNTS = (
    "opened",
    "decided",
    "approved",
    "rejected",
    "expired",
    "edited",
    "notifications_failed",
    "unviewed",
    # Decided or expired later than the review's target (review.rollups.targets); under a
    # rule, later than that rule's own target.
    "breached",
)
TIMES = ("first_view", "decision", "on_page")


# Decisions made by a person (a standing rule, the sweep or a recovery decides for nobody).
HUMAN = (ReviewStatus.APPROVED, ReviewStatus.REJECTED, ReviewStatus.RESPONDED)

Key = tuple[datetime | None, str, str]


def _bucket(seconds: float) -> int:
    return math.floor(math.log(max(seconds, MIN_BUCKETED)) * BUCKETS_PER_DOUBLING / math.log(2))


def facts(ranges: tuple[tuple[datetime, datetime], ...]) -> Iterable[dict[str, Any]]:
    """One dict per review opened in `ranges`, with what the statistics count of it."""
    decider_view = ReviewView.objects.filter(
        review_id=OuterRef("pk"), user_id=OuterRef("decided_by_id")
    ).values("first_viewed_at")[:1]
    via = (
        DecisionReceipt.objects.filter(review_id=OuterRef("pk")).order_by("-seq").values("via")[:1]
    )
    failed = (
        Notification.objects.filter(review_id=OuterRef("pk"), status=NotificationStatus.FAILED)
        .order_by()
        .values("review_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    rows = (
        ReviewRequest.objects.filter(in_ranges("requested_at", ranges))
        .annotate(
            first_view=Min("views__first_viewed_at"),
            decider_view=Subquery(decider_view),
            via=Subquery(via),
            failed=Subquery(failed),
        )
        .values(
            "requested_at",
            "tool",
            "status",
            "matched_rules",
            "decided_at",
            "decided_by__username",
            "edited_arguments",
            "first_view",
            "decider_view",
            "via",
            "failed",
        )
        .order_by()
    )
    yield from rows.iterator(chunk_size=2000)


def fold(
    facts: Iterable[dict[str, Any]], *, hourly: bool
) -> tuple[dict[Key, Counter[str]], dict[tuple[Key, str], Counter[int]], int]:
    """(counts by (hour, dim, key), histograms by ((hour, dim, key), kind), pending reviews)."""
    counts: dict[Key, Counter[str]] = defaultdict(Counter)
    hists: dict[tuple[Key, str], Counter[int]] = defaultdict(Counter)
    pending = 0
    configured = configured_targets()
    for fact in facts:
        hour = hour_floor(fact["requested_at"]) if hourly else None
        status = fact["status"]
        pending += status == ReviewStatus.PENDING
        human = status in HUMAN
        decider = (fact["decided_by__username"] or "") if human else ""
        viewed = fact["decider_view"] is not None and fact["decider_view"] <= fact["decided_at"]
        rules = [rule for rule in fact["matched_rules"] if isinstance(rule, dict)]
        settled = human or status == ReviewStatus.EXPIRED
        took = (fact["decided_at"] - fact["requested_at"]).total_seconds() if settled else 0.0
        late = int(settled and took > review_target_s(rules, configured=configured))
        keys = [
            ("rule", str(rule.get("name", "?")), int(settled and took > target))
            for rule in rules
            for target in [rule_target_s(rule, configured=configured)]
        ] or [("rule", "(none)", late)]
        keys += [("tool", fact["tool"], late), ("operator", decider, late)]
        if human:
            keys.append(("via", fact["via"] or "", late))
        # Integers, not booleans: a key of one review shows its counts as they are.
        add = Counter(
            opened=1,
            decided=int(human),
            approved=int(status == ReviewStatus.APPROVED),
            rejected=int(status == ReviewStatus.REJECTED),
            expired=int(status == ReviewStatus.EXPIRED),
            edited=int(status == ReviewStatus.APPROVED and fact["edited_arguments"] is not None),
            notifications_failed=fact["failed"] or 0,
            unviewed=int(human and not viewed),
        )
        times: dict[str, float] = {}
        if fact["first_view"] is not None:
            times["first_view"] = (fact["first_view"] - fact["requested_at"]).total_seconds()
        if human and fact["decided_at"] is not None:
            times["decision"] = (fact["decided_at"] - fact["requested_at"]).total_seconds()
            if viewed:
                times["on_page"] = (fact["decided_at"] - fact["decider_view"]).total_seconds()
        for dim, key, breached in keys:
            counts[(hour, dim, key)].update(add, breached=breached)
            for kind, seconds in times.items():
                hists[((hour, dim, key), kind)][_bucket(seconds)] += 1
    return counts, hists, pending
