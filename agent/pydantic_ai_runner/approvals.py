"""Pausing for approvals and external calls (RunApprovals, part of PydanticAIRun): the
DeferredToolRequests the agent ended with become ledger rows awaiting review and one review
each (kind `pydantic-ai`), opened with the pause's checkpoint; the task waits for them. An
approval (`approvals`) is approved, edited or rejected; an external call (`calls`: a tool that
raised CallDeferred, or one declared external) is answered: the operator's `respond` is the
tool's result (decisions), a rejection a failed call the model is told of."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, NoReturn

from pydantic_ai import DeferredToolRequests

from agent.pydantic_ai_runner.constants import DECISIONS, EXTERNAL_DECISIONS, KIND, REVIEW_KIND
from agent.pydantic_ai_runner.endings import RunEndings
from agent.pydantic_ai_runner.messages import jsonable
from agent.versions import versions_current
from review.policy import PolicyDecision, interrupt_policy
from review.services.transitions import review_request_open
from tasks import services
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus

# Why a call is reviewed when no rule of ours names it: the agent asked (approval) or the
# agent's tool is answered by a person (external).
_ASKED = {
    False: ("requires-approval", "the agent's tool requires approval"),
    True: ("external-tool", "the agent's tool waits for its result from a person"),
}


def _policy(row: ToolCall, meta: Any, *, external: bool) -> PolicyDecision:
    """The review's rules: ours for the call (approvals, four-eyes, expiry), else the reason
    the agent asked."""
    harness = meta.get("harness") if isinstance(meta, dict) else None
    decision = interrupt_policy(tool_name=row.tool, args=row.arguments)
    if harness and harness.get("rules"):
        return dataclasses.replace(
            decision, rules=harness["rules"], reason=harness.get("reason", "")
        )
    if decision.rules and decision.rules[0].get("name") == "langgraph-interrupt":
        name, reason = _ASKED[external]
        return dataclasses.replace(
            decision, rules=[{"name": name, "action": "review", "source": KIND}], reason=reason
        )
    return decision


class RunApprovals(RunEndings):
    """The approvals and external calls an agent asked for, made reviews."""

    def pause_for_approvals(self, requests: DeferredToolRequests, messages: list[Any]) -> NoReturn:
        self.sdk["messages"] = self.messages_dumped(messages)
        inserts: list[ToolCall] = []
        updates: list[tuple[Any, list[str]]] = []
        asked: list[tuple[ToolCall, Any, bool]] = []
        parts = [(p, False) for p in requests.approvals] + [(p, True) for p in requests.calls]
        for part, external in parts:
            call_id = self.call_id(part.tool_call_id)
            row = self.ledger.get(call_id)
            if row is None:
                row = ToolCall(
                    task_id=self.task_id,
                    call_id=call_id,
                    tool=part.tool_name[:100],
                    arguments=jsonable(part.args_as_dict()),
                    risk=KIND,
                    step_index=self.state.step_index,
                )
                services.toolcall_transition(
                    call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False
                )
                inserts.append(row)
            else:
                if row.status != ToolCallStatus.AWAITING_REVIEW:
                    services.toolcall_transition(
                        call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False
                    )
                updates.append((row, ["status"]))
            asked.append((row, part, external))
            self.event(
                EventType.REVIEW_REQUESTED,
                {
                    "call_id": call_id,
                    "tool": row.tool,
                    "tool_call_id": part.tool_call_id,
                    **({"external": True} if external else {}),
                },
            )
        self.sdk["deferred"] = [
            {
                "call_id": row.call_id,
                "tool_call_id": part.tool_call_id,
                **({"external": True} if external else {}),
            }
            for row, part, external in asked
        ]

        def open_reviews(checkpoint: Any) -> None:
            for row, part, external in asked:
                meta = (requests.metadata or {}).get(part.tool_call_id) or {}
                review_request_open(
                    tool_call=row,
                    checkpoint_id=checkpoint.id if checkpoint else None,
                    decision=_policy(row, meta, external=external),
                    preview=json.dumps(row.arguments, indent=2, ensure_ascii=False, default=str),
                    kind=REVIEW_KIND,
                    interrupt={
                        "mode": "external" if external else "per_call",
                        "sdk": KIND,
                        "allowed": EXTERNAL_DECISIONS if external else DECISIONS,
                        "id": part.tool_call_id,
                        "tool_call_id": part.tool_call_id,
                        "index": 0,
                    },
                    versions=versions_current(self),
                )

        self.pause(
            reason=f"{'external call' if asked[0][2] else 'approval'}: {asked[0][0].tool}",
            trigger="before_review",
            inserts=inserts,
            updates=updates,
            then=open_reviews,
        )
