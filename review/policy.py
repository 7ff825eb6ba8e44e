"""The risk policy: which tool calls run, pause for a human, or are refused.

Rules come from `harness.yaml` (`review_rules`) and the task spec's `review.always`; the
first matching rule in order decides. With no matching rule, calls run (`allow`)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from harness_site.config import ReviewRuleConfig, harness_config
from tasks.tools.registry import ToolSpec


@dataclass(frozen=True)
class PolicyDecision:
    action: str  # allow | review | deny
    rules: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    expires_after_s: float | None = None
    on_expiry: str = "reject"
    approvals_required: int = 1
    forbid_creator: bool = False


ALLOW = PolicyDecision(action="allow")

_PATH_KEYS = ("path", "src", "dst", "target")


def _paths(args: dict[str, Any]) -> list[str]:
    return [str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)]


def _glob_match(path: str, pattern: str) -> bool:
    # `**/*.conf` should also match a top-level `app.conf`.
    return fnmatch.fnmatch(path, pattern) or (
        pattern.startswith("**/") and fnmatch.fnmatch(path, pattern[3:])
    )


def rule_matches(rule: ReviewRuleConfig, *, tool: ToolSpec, args: dict[str, Any]) -> bool:
    if rule.tool is not None and rule.tool != tool.name:
        return False
    if rule.risk is not None and rule.risk != tool.risk:
        return False
    if rule.path_glob is not None and not any(_glob_match(p, rule.path_glob) for p in _paths(args)):
        return False
    if rule.command_regex is not None:
        command = args.get("command")
        if not isinstance(command, str) or not re.search(rule.command_regex, command):
            return False
    if rule.url_host is not None:
        host = urlsplit(str(args.get("url", ""))).hostname or ""
        if not fnmatch.fnmatch(host, rule.url_host):
            return False
    return True


def _describe(rule: ReviewRuleConfig) -> dict[str, Any]:
    return rule.model_dump(exclude_none=True)


def policy_rules() -> list[ReviewRuleConfig]:
    return list(harness_config().review_rules)


def evaluate(*, tool: ToolSpec, args: dict[str, Any], spec: dict[str, Any] | None = None
             ) -> PolicyDecision:
    """Decide one call. `spec` is the task's stored TaskSpec (for per-task overrides)."""
    always = set(((spec or {}).get("review") or {}).get("always") or [])
    for rule in policy_rules():
        if rule_matches(rule, tool=tool, args=args):
            if rule.action == "allow" and tool.name not in always:
                return PolicyDecision(action="allow", rules=[_describe(rule)], reason=rule.reason)
            if rule.action == "allow":
                continue
            return PolicyDecision(
                action=rule.action,
                rules=[_describe(rule)],
                reason=rule.reason or f"matched rule {rule.name}",
                expires_after_s=rule.expires_after,
                on_expiry=rule.on_expiry,
                approvals_required=rule.approvals_required,
                forbid_creator=rule.forbid_creator,
            )
    if tool.name in always:
        return PolicyDecision(
            action="review",
            rules=[{"name": "task-review-override", "tool": tool.name, "action": "review"}],
            reason=f"this task asks for review of every {tool.name} call",
        )
    return ALLOW
