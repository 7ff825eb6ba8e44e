"""What a LangGraph interrupt asks for (interrupt_actions): one action per decision, with
the decisions it accepts (decisions_of reads a per-call tool approval's response_schema)."""

from __future__ import annotations

import json
import typing
from typing import Any

from agent.graph_runner.values import jsonable

ALL_DECISIONS = ["approve", "edit", "reject", "respond"]
PLAIN_DECISIONS = ["approve", "reject", "respond"]
# A plain interrupt of a graph registered with `interrupt_resume: value`.
VALUE_DECISIONS = ["respond", "reject"]


def interrupt_actions(
    interrupt: Any, *, node: str, resume: str = "envelope"
) -> list[tuple[str, dict, dict, str]]:
    """(tool, arguments, interrupt meta, preview) for each decision an interrupt asks for.
    `resume`: the graph's `interrupt_resume` (harness.yaml), for a plain interrupt."""
    value = interrupt.value
    if isinstance(value, dict) and isinstance(value.get("action_requests"), list):
        configs = {c.get("action_name"): c for c in value.get("review_configs") or []}
        out = []
        for action in value["action_requests"]:
            allowed = (configs.get(action.get("name")) or {}).get("allowed_decisions")
            out.append(
                (
                    str(action.get("name", "action")),
                    jsonable(action.get("args") or {}),
                    {"mode": "batched", "allowed": list(allowed or ALL_DECISIONS)},
                    str(action.get("description", "")),
                )
            )
        return out
    if isinstance(value, dict) and value.get("type") == "tool_approval":
        return [
            (
                str(value.get("name", "tool")),
                jsonable(value.get("args") or {}),
                {
                    "mode": "per_call",
                    "allowed": decisions_of(interrupt.response_schema) or ALL_DECISIONS,
                    "tool_call_id": value.get("tool_call_id"),
                },
                str(value.get("description", "")),
            )
        ]
    arguments = jsonable(value) if isinstance(value, dict) else {"value": jsonable(value)}
    return [
        (
            node,
            arguments,
            {"mode": "plain", "allowed": PLAIN_DECISIONS}
            if resume != "value"
            else {"mode": "plain", "allowed": VALUE_DECISIONS, "resume": "value"},
            json.dumps(arguments, indent=2, ensure_ascii=False, default=str),
        )
    ]


_DECISION_TYPES = {
    "ApproveDecision": "approve",
    "EditDecision": "edit",
    "RejectDecision": "reject",
    "RespondDecision": "respond",
}


def decisions_of(schema: Any) -> list[str]:
    """The decisions a per-call tool approval accepts, read from its response_schema (a
    union of the middleware's decision types)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        name = getattr(node, "__name__", "")
        if name in _DECISION_TYPES and _DECISION_TYPES[name] not in found:
            found.append(_DECISION_TYPES[name])
            return
        for arg in typing.get_args(node):
            walk(arg)

    if schema is not None:
        walk(schema)
    return found
