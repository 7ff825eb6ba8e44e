"""Review SLA targets (harness.yaml `sla: {decide_within: …}` per review rule, `review_sla`
the default): the target of one matched rule (`rule_target_s`) and of a review, the strictest
of its rules' (`review_target_s`). A review decided (or expired) later than its target, or
still open past it, breached it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from harness_base.config import harness_config


def _configured() -> dict[str, float]:
    return {
        rule.name: rule.sla.decide_within
        for rule in harness_config().review_rules
        if rule.sla is not None
    }


def rule_target_s(rule: Any, *, configured: dict[str, float] | None = None) -> float:
    """Seconds to decision a review matching `rule` (a `matched_rules` entry) should take: the
    target the rule carried when it matched, else harness.yaml's rule of that name (reviews
    opened before it had one), else the default."""
    if isinstance(rule, dict):
        sla = rule.get("sla")
        if isinstance(sla, dict) and isinstance(sla.get("decide_within"), int | float):
            return float(sla["decide_within"])
        by_name = _configured() if configured is None else configured
        if str(rule.get("name", "")) in by_name:
            return by_name[str(rule["name"])]
    return harness_config().review_sla.decide_within


def review_target_s(matched_rules: Any, *, configured: dict[str, float] | None = None) -> float:
    """The strictest target of a review's matched rules (the default without rules)."""
    by_name = _configured() if configured is None else configured
    targets = [rule_target_s(rule, configured=by_name) for rule in matched_rules or ()]
    return min(targets, default=harness_config().review_sla.decide_within)


def configured_targets() -> dict[str, float]:
    """harness.yaml's targets by rule name, read once for a pass over many reviews."""
    return _configured()


def breached(
    *, requested_at: datetime, settled_at: datetime | None, target_s: float, now: datetime
) -> bool:
    """Whether a review took (or has taken, while open: `settled_at` None) longer than
    `target_s` to decide."""
    return ((settled_at or now) - requested_at).total_seconds() > target_s
