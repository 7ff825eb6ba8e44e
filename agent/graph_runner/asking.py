"""Interrupts are reviews (GraphRunAsking, part of GraphRun): one review, and one graph
call, per action an interrupt asks for; the task waits for them."""

from __future__ import annotations

from typing import Any, NoReturn

from langchain_core.messages import AIMessage

from agent.graph_runner.calls import GraphRunCalls
from agent.graph_runner.core import REVIEW_KIND
from agent.graph_runner.interrupts import interrupt_actions
from agent.graph_runner.values import jsonable
from agent.versions import versions_current
from review.policy import interrupt_policy
from review.services.transitions import review_request_open
from tasks import services
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus


class GraphRunAsking(GraphRunCalls):
    """GraphRun's asking: pause_for_reviews (a checkpoint's interrupts), open_reviews (any
    actions, a breakpoint's too)."""

    def pause_for_reviews(self, state: Any) -> NoReturn:
        checkpoint_id = state.config["configurable"]["checkpoint_id"]
        nodes = {i.id: task.name for task in state.tasks for i in task.interrupts}
        actions = [
            (interrupt.id, nodes.get(interrupt.id, ""), action)
            for interrupt in state.interrupts
            for action in interrupt_actions(
                interrupt,
                node=nodes.get(interrupt.id, "interrupt"),
                resume=self.interrupt_resume,
            )
        ]
        # A batched HumanInTheLoopMiddleware request names its actions by tool and args only:
        # each is the model's tool call with that name and args (in order), whose id tells its
        # result (or the middleware's answer for it) from another call of the same tool.
        values = state.values if isinstance(state.values, dict) else {}
        last_ai = next(
            (m for m in reversed(values.get("messages") or []) if isinstance(m, AIMessage)), None
        )
        unclaimed = list(last_ai.tool_calls) if last_ai is not None else []
        for _id, _node, (tool, args, meta, _preview) in actions:
            if meta.get("mode") != "batched":
                continue
            match = next(
                (
                    c
                    for c in unclaimed
                    if c.get("name") == tool and jsonable(c.get("args") or {}) == args
                ),
                None,
            )
            if match is not None:
                unclaimed.remove(match)
                meta["tool_call_id"] = match.get("id")
        self.open_reviews(checkpoint_id, actions)

    def open_reviews(
        self, checkpoint_id: str, actions: list[tuple[str, str, tuple[str, dict, dict, str]]]
    ) -> NoReturn:
        """One review (and graph call) per (interrupt id, node, action) asked at this
        checkpoint; the task waits for them."""
        self.calls_abandon(keep=checkpoint_id)
        rows: list[tuple[ToolCall, dict[str, Any], str]] = []
        index_of: dict[str, int] = {}
        for interrupt_id, node, (tool, args, meta, preview) in actions:
            index = index_of[interrupt_id] = index_of.get(interrupt_id, -1) + 1
            row = ToolCall(
                task_id=self.task_id,
                # The epoch tells apart a second asking after a cancel.
                call_id=f"lg:{checkpoint_id}:{interrupt_id}:{index}:{self.epoch}"[:100],
                tool=tool[:100],
                arguments=args,
                risk="graph",
                step_index=self.step_index,
            )
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
            meta = {
                **meta,
                "id": interrupt_id,
                "index": index,
                "checkpoint_id": checkpoint_id,
                "node": node,
            }
            rows.append((row, meta, preview))
            self.event(
                EventType.REVIEW_REQUESTED,
                {"call_id": row.call_id, "tool": tool, "interrupt_id": interrupt_id},
            )

        def open_all() -> None:
            for row, meta, preview in rows:
                review_request_open(
                    tool_call=row,
                    checkpoint_id=None,
                    decision=interrupt_policy(tool_name=row.tool, args=row.arguments),
                    preview=preview,
                    kind=REVIEW_KIND,
                    interrupt=meta,
                    versions=versions_current(self),
                )

        self.pause(
            reason=f"graph interrupt: {rows[0][0].tool}",
            inserts=[r[0] for r in rows],
            then=open_all,
        )
