"""Pausing for approvals (RunApprovals, part of PydanticAIRun): the DeferredToolRequests the
agent ended with become ledger rows awaiting review and one review each (kind
`pydantic-ai`), opened with the pause's checkpoint; the task waits for them."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, NoReturn

from pydantic_ai import DeferredToolRequests

from agent.pydantic_ai_runner.constants import DECISIONS, KIND, REVIEW_KIND
from agent.pydantic_ai_runner.endings import RunEndings
from agent.pydantic_ai_runner.messages import jsonable, messages_dump
from agent.runtime.run import StopRun
from agent.versions import versions_current
from review.policy import interrupt_policy
from review.services.transitions import review_request_open
from tasks import services
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus


class RunApprovals(RunEndings):
    """The approvals an agent asked for, made reviews."""

    def pause_for_approvals(self, requests: DeferredToolRequests, messages: list[Any]) -> NoReturn:
        if requests.calls:
            raise StopRun(
                "unsupported",
                "external tool calls (CallDeferred) are not supported: "
                + ", ".join(c.tool_name for c in requests.calls),
            )
        self.sdk["messages"] = messages_dump(messages)
        inserts: list[ToolCall] = []
        updates: list[tuple[Any, list[str]]] = []
        asked: list[tuple[ToolCall, Any]] = []
        for part in requests.approvals:
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
            asked.append((row, part))
            self.event(
                EventType.REVIEW_REQUESTED,
                {"call_id": call_id, "tool": row.tool, "tool_call_id": part.tool_call_id},
            )
        self.sdk["deferred"] = [
            {"call_id": row.call_id, "tool_call_id": part.tool_call_id} for row, part in asked
        ]

        def open_reviews(checkpoint: Any) -> None:
            for row, part in asked:
                meta = (requests.metadata or {}).get(part.tool_call_id) or {}
                harness = meta.get("harness") if isinstance(meta, dict) else None
                decision = interrupt_policy(tool_name=row.tool, args=row.arguments)
                if harness and harness.get("rules"):
                    decision = dataclasses.replace(
                        decision, rules=harness["rules"], reason=harness.get("reason", "")
                    )
                elif decision.rules and decision.rules[0].get("name") == "langgraph-interrupt":
                    decision = dataclasses.replace(
                        decision,
                        rules=[{"name": "requires-approval", "action": "review", "source": KIND}],
                        reason="the agent's tool requires approval",
                    )
                review_request_open(
                    tool_call=row,
                    checkpoint_id=checkpoint.id if checkpoint else None,
                    decision=decision,
                    preview=json.dumps(row.arguments, indent=2, ensure_ascii=False, default=str),
                    kind=REVIEW_KIND,
                    interrupt={
                        "mode": "per_call",
                        "sdk": KIND,
                        "allowed": DECISIONS,
                        "id": part.tool_call_id,
                        "tool_call_id": part.tool_call_id,
                        "index": 0,
                    },
                    versions=versions_current(self),
                )

        self.pause(
            reason=f"approval: {asked[0][0].tool}",
            trigger="before_review",
            inserts=inserts,
            updates=updates,
            then=open_reviews,
        )
