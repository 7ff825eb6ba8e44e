"""The risk policy: which tool calls run, pause for a human, or are refused.

Rules come from the admin (`ReviewRule`, enabled ones by position), then `harness.yaml`
(`review_rules`), then the task spec's `review.always`. A matching `deny` from any source
wins, so an admin rule can never unblock a call the configuration refuses; otherwise the first
matching rule in that order decides. With no matching rule, calls run (`allow`) — except
`execute` tools (run_command): they are reviewed unless an explicit allow rule names them, so
the default does not rest on a pattern guessing which commands are dangerous."""

from __future__ import annotations

import dataclasses
import fnmatch
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from harness_base.config import ReviewRuleConfig, compile_pattern, harness_config
from review.policy_rules import policy_rules
from tasks.canonical import canonical_hash
from tasks.paths import PATH_ARGUMENTS, call_paths, glob_match
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
EXECUTE_REVIEW = PolicyDecision(
    action="review",
    rules=[
        {"name": "execute-default", "risk": "execute", "action": "review", "source": "built-in"}
    ],
    reason="commands run only after review unless an allow rule names them",
)


# Tools that change files: deleting one is writing it too.
WRITING_RISKS = frozenset({"write", "destructive"})
# An MCP tool's arguments whose name says they hold a path (`file_path`, `filename`, `dir`…),
# beyond the built-in tools' names (tasks.paths.PATH_ARGUMENTS).
_PATH_LIKE = re.compile(r"path|file|dir|folder|dest|src|source|target", re.IGNORECASE)


def _risk_matches(rule: ReviewRuleConfig, *, tool: ToolSpec) -> bool:
    """`risk: write` in a review or deny rule covers every tool that writes files (risk
    `write` or `destructive`: write_file, append_file, delete_file, an MCP tool's writes), so
    a rule about files is not sidestepped by another writing tool. An allow rule's risk matches
    exactly: an allow never widens to a more dangerous class."""
    if rule.risk is None or rule.risk == tool.risk:
        return True
    return rule.risk == "write" and rule.action != "allow" and tool.risk in WRITING_RISKS


def target_paths(*, tool: ToolSpec, args: dict[str, Any]) -> list[str]:
    """The workspace paths a call names, normalised (`./a//b.conf` is `a/b.conf`): the
    built-in path arguments, and for an MCP tool also every string (or list of strings)
    argument of its inputSchema whose name says it holds a path. What a server does with its
    other arguments, or a shell with its command line, no path rule can see."""
    paths = call_paths(args)
    if tool.input_schema is not None:
        for name in tool.input_schema.get("properties") or {}:
            value = args.get(name)
            if not _PATH_LIKE.search(name) or name in PATH_ARGUMENTS:
                continue
            if isinstance(value, str):
                paths.append(value)
            elif isinstance(value, list):
                paths.extend(item for item in value if isinstance(item, str))
    return [posixpath.normpath(path) for path in paths]


def rule_matches(rule: ReviewRuleConfig, *, tool: ToolSpec, args: dict[str, Any]) -> bool:
    if rule.tool is not None and rule.tool != tool.name:
        return False
    if not _risk_matches(rule, tool=tool):
        return False
    if rule.path_glob is not None:
        hits = [glob_match(p, rule.path_glob) for p in target_paths(tool=tool, args=args)]
        # A review or deny rule is about any path the call names; an allow rule covers the
        # call only if every path it names is inside the glob.
        if not hits or not (all(hits) if rule.action == "allow" else any(hits)):
            return False
    if rule.command_regex is not None:
        command = args.get("command")
        if not isinstance(command, str) or not compile_pattern(rule.command_regex).search(command):
            return False
    if rule.url_host is not None:
        host = urlsplit(str(args.get("url", ""))).hostname or ""
        if not fnmatch.fnmatch(host, rule.url_host):
            return False
    return True


def _describe(rule: ReviewRuleConfig, source: str) -> dict[str, Any]:
    return {**rule.model_dump(exclude_none=True), "source": source}


def rule_decision(rule: ReviewRuleConfig, source: str) -> PolicyDecision:
    return PolicyDecision(
        action=rule.action,
        rules=[_describe(rule, source)],
        reason=rule.reason or f"matched rule {rule.name}",
        expires_after_s=rule.expires_after,
        on_expiry=rule.on_expiry,
        approvals_required=rule.approvals_required,
        forbid_creator=rule.forbid_creator,
    )


def strictest(decisions: list[PolicyDecision]) -> PolicyDecision:
    """Several matching rules at once: a deny wins; otherwise the review needs the most
    approvals any of them asks, bans the creator if any does, and expires at the earliest
    deadline (with that rule's `on_expiry`). The first decision names the reason."""
    denied = [d for d in decisions if d.action == "deny"]
    if denied:
        return denied[0]
    reviews = [d for d in decisions if d.action == "review"]
    if not reviews:
        return decisions[0] if decisions else ALLOW
    expiring = [d for d in reviews if d.expires_after_s]
    soonest = min(expiring, key=lambda d: d.expires_after_s or 0.0) if expiring else reviews[0]
    rules: list[dict[str, Any]] = []
    for d in reviews:
        rules.extend(r for r in d.rules if r not in rules)
    return PolicyDecision(
        action="review",
        rules=rules,
        reason=reviews[0].reason,
        expires_after_s=soonest.expires_after_s,
        on_expiry=soonest.on_expiry,
        approvals_required=max(d.approvals_required for d in reviews),
        forbid_creator=any(d.forbid_creator for d in reviews),
    )


def evaluate(
    *, tool: ToolSpec, args: dict[str, Any], spec: dict[str, Any] | None = None
) -> PolicyDecision:
    """Decide one call. `spec` is the task's stored TaskSpec (for per-task overrides)."""
    always = set(((spec or {}).get("review") or {}).get("always") or [])
    matched = [
        (source, rule)
        for source, rule in policy_rules()
        if rule_matches(rule, tool=tool, args=args)
    ]
    for source, rule in matched:
        if rule.action == "deny":
            return rule_decision(rule, source)
    for source, rule in matched:
        if rule.action == "allow" and tool.name in always:
            continue
        if rule.action == "allow":
            return PolicyDecision(
                action="allow", rules=[_describe(rule, source)], reason=rule.reason
            )
        reviews = [(s, r) for s, r in matched if r.action == "review"]
        return strictest([rule_decision(r, s) for s, r in reviews])
    if tool.name in always:
        return PolicyDecision(
            action="review",
            rules=[
                {
                    "name": "task-review-override",
                    "tool": tool.name,
                    "action": "review",
                    "source": "task spec",
                }
            ],
            reason=f"this task asks for review of every {tool.name} call",
        )
    if tool.risk == "execute":
        return EXECUTE_REVIEW
    return ALLOW


def policy_hash(decision: PolicyDecision) -> str:
    """sha256 of the policy behind a decision: the rules that matched (name, source and their
    whole content) and every harness.yaml rule. Recorded with a review; an approved call whose
    policy hash changed is evaluated again before it runs (review.recheck)."""
    return canonical_hash(
        {
            "matched": decision.rules,
            "harness_yaml": [
                rule.model_dump(mode="json") for rule in harness_config().review_rules
            ],
        }
    )


@dataclass(frozen=True)
class _GraphAction:
    """What rule_matches reads of a tool, for an action a LangGraph graph asks a human about."""

    name: str
    risk: str = "graph"
    input_schema: dict[str, Any] | None = None


def graph_action_policy(
    *, tool_name: str, args: dict[str, Any], risk: str = "graph"
) -> PolicyDecision:
    """The rules about an action a LangGraph graph asks a human about (matched by tool name and
    arguments, as for a harness tool): a deny wins, else the strictest review, else allow.
    `risk`: what an agent SDK's tool declares (an MCP server's annotations), for risk rules."""
    action = _GraphAction(name=tool_name, risk=risk)
    # The ignore: rule_matches is typed for a ToolSpec; it reads only the name and risk that
    # _GraphAction carries (a Protocol of what it reads would drop it).
    decisions = [
        rule_decision(rule, source)
        for source, rule in policy_rules()
        if rule.action in ("review", "deny") and rule_matches(rule, tool=action, args=args)  # type: ignore[arg-type]
    ]
    return strictest(decisions)


@dataclass(frozen=True)
class _AgentTool:
    """What rule_matches reads of a tool of an operator-registered agent (Pydantic AI): its
    name, the risk its metadata declares, and its JSON schema (for path-named arguments)."""

    name: str
    risk: str
    input_schema: dict[str, Any] | None = None


def agent_tool_policy(
    *,
    tool_name: str,
    args: dict[str, Any],
    risk: str,
    input_schema: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
) -> PolicyDecision:
    """Decide one call of an operator-registered agent's tool as for a harness tool (`evaluate`:
    harness.yaml and admin rules by tool name, risk and arguments, the spec's `review.always`,
    `execute` reviewed by default)."""
    tool = _AgentTool(name=tool_name, risk=risk, input_schema=input_schema)
    # The ignore: evaluate is typed for a ToolSpec; it reads only what _AgentTool carries.
    return evaluate(tool=tool, args=args, spec=spec)  # type: ignore[arg-type]


def interrupt_policy(*, tool_name: str, args: dict[str, Any]) -> PolicyDecision:
    """How a LangGraph interrupt is reviewed. The graph already decided to ask a human, so it
    is always a review; the rules matching the action set approvals, four-eyes and expiry. A
    matching deny rule is the reason the reviewer is shown, and no one may approve the action
    (review.services refuses it): it can only be rejected or answered."""
    decision = graph_action_policy(tool_name=tool_name, args=args)
    if decision.action in ("review", "deny"):
        return dataclasses.replace(decision, action="review")
    return PolicyDecision(
        action="review",
        rules=[{"name": "langgraph-interrupt", "action": "review", "source": "graph"}],
        reason="the graph asks for a human decision",
    )
