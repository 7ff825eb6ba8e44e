"""Matched rules as the metrics' `rule` label (harness_base.metrics), pending reviews per
label, and the rules whose target time to decision a review missed (review.rollups.targets)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from harness_base.config import harness_config
from harness_base.metrics import label_bounded
from review.models import ReviewRequest, ReviewStatus
from review.rollups.targets import configured_targets, review_target_s, rule_target_s

# The names of the rules the harness itself writes into `matched_rules` (review.policy,
# review.services): with harness.yaml's rule names, every value the metrics' `rule` label takes.
BUILT_IN_RULES = frozenset(
    {"execute-default", "task-review-override", "langgraph-interrupt", "unknown-outcome"}
)


def review_rule_labels(*, matched_rules: Any) -> list[str]:
    """A review's matched rules as metric labels (harness_base.metrics): harness.yaml's and the
    built-in rules by name, any other (a standing rule a person saved) as `other`, none as
    `none`; each once."""
    known = BUILT_IN_RULES | {rule.name for rule in harness_config().review_rules}
    names = [str(rule.get("name", "")) for rule in matched_rules or () if isinstance(rule, dict)]
    labels = {label_bounded(name, known) for name in names}
    return sorted(labels) or ["none"]


def reviews_pending_by_rule() -> tuple[dict[str, int], datetime | None]:
    """Pending reviews per rule label (review_rule_labels: a review matching two rules counts
    under both; every harness.yaml review rule named) and when the oldest was requested (None:
    none pending). Reads the pending reviews' rules only, from `review_status_requested`
    (status leads): the few a person has not decided yet, whatever the history's size."""
    pending = ReviewRequest.objects.filter(status=ReviewStatus.PENDING)
    # harness.yaml's review rules are there at 0 too: "none pending" is a value, not a gap.
    counts = {r.name: 0 for r in harness_config().review_rules if r.action == "review"}
    for matched in pending.values_list("matched_rules", flat=True).iterator(chunk_size=2000):
        for label in review_rule_labels(matched_rules=matched):
            counts[label] = counts.get(label, 0) + 1
    oldest = pending.order_by("requested_at").values_list("requested_at", flat=True).first()
    return counts, oldest


def review_breached_labels(*, matched_rules: Any, waited_s: float) -> list[str]:
    """The rule labels of a review whose own target (rule_target_s) `waited_s` exceeds; a
    review without rules under `none`, against the default target."""
    rules = [rule for rule in matched_rules or () if isinstance(rule, dict)]
    if not rules:
        return ["none"] if waited_s > review_target_s(()) else []
    configured = configured_targets()
    late = [rule for rule in rules if waited_s > rule_target_s(rule, configured=configured)]
    return review_rule_labels(matched_rules=late) if late else []


def reviews_past_target(*, now: datetime) -> list[dict[str, Any]]:
    """The pending reviews open longer than their target (the strictest of their rules'),
    longest over first: {id, tool, rules, waited_s, target_s}. Reads the pending few."""
    configured = configured_targets()
    late = []
    for review_id, tool, matched, requested_at in ReviewRequest.objects.filter(
        status=ReviewStatus.PENDING
    ).values_list("id", "tool", "matched_rules", "requested_at"):
        waited_s = (now - requested_at).total_seconds()
        target_s = review_target_s(matched, configured=configured)
        if waited_s > target_s:
            names = [str(r.get("name", "?")) for r in matched or () if isinstance(r, dict)]
            late.append(
                {
                    "id": review_id,
                    "tool": tool,
                    "rules": names,
                    "waited_s": waited_s,
                    "target_s": target_s,
                }
            )
    return sorted(late, key=lambda r: r["target_s"] - r["waited_s"])


def reviews_past_target_by_rule(*, now: datetime) -> dict[str, int]:
    """Pending reviews past their rule's target, per rule label (every harness.yaml review
    rule named, at 0 when none is late)."""
    counts = {r.name: 0 for r in harness_config().review_rules if r.action == "review"}
    for matched, requested_at in ReviewRequest.objects.filter(
        status=ReviewStatus.PENDING
    ).values_list("matched_rules", "requested_at"):
        waited_s = (now - requested_at).total_seconds()
        for label in review_breached_labels(matched_rules=matched, waited_s=waited_s):
            counts[label] = counts.get(label, 0) + 1
    return counts
