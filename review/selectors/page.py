"""What the review page shows besides the review itself: its link, comments, targets, files,
approvers, matched rules in words and an MCP tool's facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from pydantic import ValidationError

from review.models import ReviewComment, ReviewRequest
from tasks.paths import PathEscapeError, call_paths, shared_relative, validate_relative_path
from tasks.tools.mcp import MCP_DEFAULT_HINTS
from tasks.tools.registry import ToolSpec


def review_url(*, review_id: Any) -> str:
    """The review page, at HARNESS_BASE_URL (links in the API and in notifications)."""
    return f"{settings.HARNESS_BASE_URL.rstrip('/')}/reviews/{review_id}/"


def review_comments(*, review: ReviewRequest) -> QuerySet[ReviewComment]:
    return review.comments.select_related("user")


def _target_state(target: dict[str, Any]) -> str:
    if "unverified" in target:
        return "(could not be read)"
    if "refused" in target:
        return "(refused by the tool)"
    if target["kind"] == "file":
        sha = target.get("sha256")
        return f"sha256 {sha[:12]}" if sha else "(absent)"
    if target["kind"] in ("folder", "workspace"):
        return f"{target.get('files')} files, tree {str(target.get('tree'))[:12]}"
    if target["kind"] == "http":
        return f"{target.get('method')} via {target.get('address')}"
    if target["kind"] == "mcp":
        return f"tool list {str(target.get('tool_list'))[:12]}"
    return ""


def review_targets_text(*, review: ReviewRequest) -> list[dict[str, str]]:
    """The recorded targets of a review as the page shows them: {key, state}."""
    return [
        {"key": str(t.get("key", "")), "state": _target_state(t)}
        for t in review.target_fingerprint.get("targets") or []
        if t.get("kind") != "command"
    ]


def review_file_paths(*, review: ReviewRequest) -> list[str]:
    """The workspace files the call names (its path arguments), as a snapshot's manifest
    spells them, for "see the current file" links; paths the tools would refuse and
    /shared/ paths (not in the task's workspace) are left out."""
    paths = []
    for path in call_paths(review.arguments):
        if shared_relative(path) is not None:
            continue
        try:
            paths.append(str(validate_relative_path(path)))
        except PathEscapeError:
            continue
    return list(dict.fromkeys(paths))


def review_approvers(*, review: ReviewRequest) -> list[dict[str, Any]]:
    return [
        {
            "user": a.user.get_username(),
            "at": a.at,
            "arguments_hash": a.arguments_hash,
            "comment": a.comment,
        }
        for a in review.approvals.select_related("user")
    ]


_MATCHERS = (
    ("tool", "tool is {}"),
    ("risk", "risk is {}"),
    ("path_glob", "path matches {}"),
    ("command_regex", "command matches /{}/"),
    ("url_host", "URL host matches {}"),
)


def duration_text(seconds: float) -> str:
    """14400 -> "4h", 90 -> "1m 30s"."""
    seconds = int(round(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts)


@dataclass(frozen=True)
class RuleText:
    name: str
    source: str
    condition: str
    action: str
    reason: str
    extra: str


def rule_text(rule: dict[str, Any], *, expires: bool = True) -> RuleText:
    """A matched rule in words, for "why was this paused?". `expires`: whether the review
    has a deadline at all; a rule's expiry is not stated for one that has none (an
    unknown-outcome review carries its call's earlier rules, but waits for a person)."""
    condition = " and ".join(fmt.format(rule[key]) for key, fmt in _MATCHERS if rule.get(key))
    extra = []
    if rule.get("approvals_required", 1) > 1:
        extra.append(f"needs {rule['approvals_required']} approvals from distinct operators")
    if rule.get("forbid_creator"):
        extra.append("the task's creator may not approve")
    if expires and rule.get("expires_after"):
        extra.append(
            f"expires after {duration_text(rule['expires_after'])}, then "
            f"{rule.get('on_expiry', 'reject')}"
        )
    return RuleText(
        name=rule.get("name", "?"),
        source=rule.get("source", ""),
        condition=condition or "every call",
        action=rule.get("action", "review"),
        reason=rule.get("reason", ""),
        extra="; ".join(extra),
    )


def review_mcp_facts(*, review: ReviewRequest, tool: ToolSpec | None) -> dict[str, Any] | None:
    """What the review page shows about an MCP server's tool: the server, the tool's own name,
    its description, each annotation (declared, or MCP's default) and whether the arguments
    under review satisfy the tool's inputSchema."""
    if tool is None or not tool.server:
        return None
    declared = tool.annotations or {}
    hints = [
        {
            "name": name,
            "value": declared[name] if isinstance(declared.get(name), bool) else default,
            "declared": isinstance(declared.get(name), bool),
        }
        for name, default in MCP_DEFAULT_HINTS.items()
    ]
    try:
        tool.args_model.model_validate(review.arguments)
        schema_check = ""
    except ValidationError as exc:
        schema_check = "; ".join(str(item["msg"]) for item in exc.errors())
    return {
        "server": tool.server,
        "tool": tool.name.partition("__")[2],
        "description": tool.description,
        "title": declared.get("title", ""),
        "hints": hints,
        "risk": tool.risk,
        "idempotent": tool.idempotent,
        "schema_check": schema_check,
    }
