"""The policy for a hosted tool of an SDK agent (web search, file search, code interpreter,
image generation: the model's provider runs it inside the model's turn). Its arguments exist
only once the model chose them in that turn, after the call ran: the only decision the harness
can take before the call is whether the turn may use the tool at all. So the rules are read
by the tool's name, and a rule naming the tool counts whatever argument conditions it has
(`path_glob`, `command_regex`, `url_host` cannot be checked before the call: failing safe,
they are taken as matching). A rule naming no tool and no risk, without conditions, covers
every tool, hosted ones too; risk rules do not (a hosted tool's risk is `hosted`)."""

from __future__ import annotations

from typing import Any

from review.policy import ALLOW, PolicyDecision, rule_decision, strictest
from review.policy_rules import policy_rules

HOSTED_RISK = "hosted"


def hosted_tool_policy(*, tool_name: str, spec: dict[str, Any] | None) -> PolicyDecision:
    """allow (the turn may use the tool), review (a person first allows a turn to use it) or
    deny (no turn is offered the tool) for the hosted tool `tool_name`."""
    decisions = []
    for source, rule in policy_rules():
        if rule.action not in ("review", "deny") or rule.risk is not None:
            continue
        conditional = rule.path_glob or rule.command_regex or rule.url_host
        if rule.tool == tool_name or (rule.tool is None and not conditional):
            decisions.append(rule_decision(rule, source))
    always = set(((spec or {}).get("review") or {}).get("always") or [])
    if tool_name in always:
        decisions.append(
            PolicyDecision(
                action="review",
                rules=[
                    {
                        "name": "task-review-override",
                        "tool": tool_name,
                        "action": "review",
                        "source": "task spec",
                    }
                ],
                reason=f"this task asks for review of every {tool_name} call",
            )
        )
    return strictest(decisions) if decisions else ALLOW
