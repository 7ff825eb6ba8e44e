"""What a standing rule matches, and whether it may stand in for a human's approval of a
call (now, or still when an approved call is about to run).

The rule fields come from the server only: `suggestions` derives them from the call under
review, and a decision names one of them by its id (a hash of its fields). Matching is stricter
than the policy's review rules, which must catch a call if any of its paths matches: here every
path of the call must match, path by path and segment by segment (`*` never crosses a `/`), in
normal form (no `.`, `..` or empty segment); a command prefix admits no shell operator after it;
a URL must have exactly the origin; every other argument is pinned or free
(review.standing.arguments)."""

from __future__ import annotations

from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

from django.db.models import Q
from django.utils import timezone

from harness_base.config import compile_pattern
from review.models import ReviewRule, RuleKind, RuleScope
from review.policy import PolicyDecision
from review.selectors.access import user_can_decide
from review.standing.arguments import arguments_pinned, pattern_keys
from review.standing.offers import CONTROL, normal_path, url_origin
from tasks.canonical import canonical_hash
from tasks.models import Task
from tasks.paths import call_paths


def _segments_match(path: str, pattern: str) -> bool:
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(map(fnmatchcase, parts, wanted))


def rule_allows(rule: ReviewRule, *, tool: str, arguments: dict[str, Any]) -> bool:
    """Whether the standing rule's fields match this call, every argument of it (see the
    module docstring and review.standing.arguments). A rule with no field beyond its tool
    matches nothing."""
    if rule.tool != tool:
        return False
    pinned = rule.pinned_arguments
    if not isinstance(pinned, dict):
        return False
    if not (
        rule.path_glob or rule.command_regex or rule.url_origin or rule.arguments_hash or pinned
    ):
        return False
    if rule.arguments_hash:
        # Every argument, exactly: the pinned ones are part of it.
        if canonical_hash(arguments) != rule.arguments_hash:
            return False
    else:
        patterned = pattern_keys(path_glob=rule.path_glob, command_regex=rule.command_regex)
        wanted = arguments_pinned(tool=tool, arguments=arguments, patterned=patterned)
        if canonical_hash(wanted) != canonical_hash(pinned):
            return False
    if rule.path_glob:
        paths = call_paths(arguments)
        if not paths or not all(
            normal_path(p) and _segments_match(p, rule.path_glob) for p in paths
        ):
            return False
    if rule.command_regex:
        command = arguments.get("command")
        if not isinstance(command, str) or CONTROL.search(command):
            return False
        try:
            if not compile_pattern(rule.command_regex).search(command):
                return False
        except ValueError:
            return False
    return not (rule.url_origin and url_origin(arguments.get("url")) != rule.url_origin)


def held_reason(rule: ReviewRule, *, task: Task, decision: PolicyDecision) -> str:
    """Why this matching rule cannot allow the call ("" when it can)."""
    if rule.paused:
        return f"standing rule {rule.name} is paused: {rule.paused_reason}"
    if decision.approvals_required > 1:
        return (
            f"the policy asks {decision.approvals_required} approvals; standing rule "
            f"{rule.name} stands in for one"
        )
    if decision.forbid_creator and task.created_by_id == rule.created_by_id:
        return (
            f"four-eyes: standing rule {rule.name} was made by this task's creator, who may "
            "not approve its calls"
        )
    if any(r.get("source") == "task spec" for r in decision.rules):
        return "this task's spec asks for a review of every call of this tool"
    if rule.created_by is None or not user_can_decide(rule.created_by):
        return f"the creator of standing rule {rule.name} may no longer decide reviews"
    return ""


def standing_rule_lapsed(
    rule: ReviewRule, *, task: Task, decision: PolicyDecision, now: datetime
) -> str:
    """Why a rule that approved a call no longer stands behind it when the call is about to
    run ("" while it does): review.recheck, for a call approved in an earlier job."""
    if rule.revoked_at is not None:
        return f"standing rule {rule.name} was revoked: {rule.revoked_reason}"
    if not rule.enabled:
        return f"standing rule {rule.name} was disabled"
    if rule.until is None or rule.until <= now:
        return f"standing rule {rule.name} ended at {rule.until.isoformat() if rule.until else '?'}"
    return held_reason(rule, task=task, decision=decision)


def standing_rule_for(
    *, task: Task, tool: str, arguments: dict[str, Any], decision: PolicyDecision
) -> tuple[ReviewRule | None, str]:
    """For a call the policy sends to review: the standing rule that allows it -> (rule, ""),
    or a matching one that may not -> (rule, why), or (None, ""). One query, on the
    (kind, tool) index, only for calls that would otherwise wait for a human."""
    if decision.action != "review":
        return None, ""
    rules = (
        ReviewRule.objects.filter(
            kind=RuleKind.STANDING,
            enabled=True,
            revoked_at__isnull=True,
            tool=tool,
            until__gt=timezone.now(),
        )
        .filter(
            Q(scope=RuleScope.EVERYONE)
            | (
                Q(scope=RuleScope.CREATOR, scope_user_id=task.created_by_id)
                if task.created_by_id is not None
                else Q(pk__in=[])
            )
        )
        .select_related("created_by")
        .order_by("paused", "id")
    )
    held: tuple[ReviewRule | None, str] = (None, "")
    for rule in rules:
        if not rule_allows(rule, tool=tool, arguments=arguments):
            continue
        why = held_reason(rule, task=task, decision=decision)
        if not why:
            return rule, ""
        if held[0] is None:
            held = (rule, why)
    return held
