"""Going on past a static breakpoint (GraphRunPastBreakpoints, part of GraphRun): ask,
wait or stop on its reviews, or write the reviewers' edits, rejections and responses (a
response is the tool's answer: it never runs) into the graph's state (update_state) so the
resumed run goes past it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agent.graph_runner.answers import GraphRunAnswers, interrupt_of, stop
from agent.graph_runner.breakpoints import GraphRunBreakpoints
from agent.graph_runner.values import jsonable
from agent.graph_runner.workspace import GraphRunWorkspace
from review.models import ReviewRequest, ReviewStatus
from tasks.events import EventType


class GraphRunPastBreakpoints(GraphRunBreakpoints, GraphRunAnswers, GraphRunWorkspace):
    """GraphRun past a breakpoint: past_breakpoint, breakpoint_update."""

    def past_breakpoint(self, graph: Any, state: Any, asked: list[ReviewRequest]) -> None:
        """The run resumes at a breakpoint checkpoint: ask (again), wait, stop, or apply the
        decisions (edits and rejections via update_state) so the resumed run goes past it."""
        checkpoint_id = state.config["configurable"]["checkpoint_id"]
        stopped = self.stopped_reviews()
        reviews = [r for r in asked if r.status != ReviewStatus.CANCELED and r.id not in stopped]
        if not reviews:  # not asked yet, asked and canceled, or the task stopped here
            self.pause_for_breakpoint(graph, state, where=self.breakpoint_at(graph, state))
        if any(r.status == ReviewStatus.PENDING for r in reviews):
            self.pause(reason="reviews still pending")
        self.recheck_approvals(reviews)
        go = [r for r in reviews if r.status == ReviewStatus.APPROVED]
        # Each review's interrupt: its tool call's id, and the decision given.
        call_of: dict[int, str | None] = {
            r.id: interrupt_of(r).get("tool_call_id") for r in reviews
        }
        decision_of: dict[int, dict[str, Any]] = {
            r.id: interrupt_of(r).get("decision") or {} for r in reviews
        }
        # Answered (respond): the response is the tool's answer; the tool never runs.
        responses: dict[str | None, str] = {
            call_of[r.id]: str(decision_of[r.id].get("message"))
            for r in reviews
            if r.status == ReviewStatus.RESPONDED
        }
        refused = [
            r for r in reviews if r.status not in (ReviewStatus.APPROVED, ReviewStatus.RESPONDED)
        ]
        generic = [r for r in refused if interrupt_of(r).get("mode") == "breakpoint"]
        if generic:
            message = decision_of[generic[0].id].get("message") or ""
            raise stop(
                "breakpoint_rejected",
                f"a reviewer stopped the graph at its breakpoint before "
                f"{generic[0].tool}" + (f": {message}" if message else ""),
                reviews,
            )
        edits: dict[str | None, dict[str, Any]] = {
            call_of[r.id]: decision_of[r.id]["edited_action"]["args"]
            for r in go
            if decision_of[r.id].get("type") == "edit"
        }
        rejections: dict[str | None, str] = {
            call_of[r.id]: decision_of[r.id].get("message") or "" for r in refused
        }
        self.calls_delivered(go)
        updated = None
        if edits or rejections or responses:
            updated = self.breakpoint_update(
                graph, state, edits=edits, rejections=rejections, responses=responses
            )
        self.event(
            EventType.GRAPH_RESUMED,
            {
                "checkpoint_id": checkpoint_id,
                "breakpoint": True,
                "approved": [call_of[r.id] or r.tool for r in go],
                "edited": sorted(str(k) for k in edits),
                "rejected": sorted(str(k) for k in rejections),
                "answered": sorted(str(k) for k in responses),
                # What was decided, whole: a replay of a saved case gives it back.
                **_decided("edits", edits),
                **_decided("rejections", rejections),
                **_decided("responses", responses),
                **({"updated_checkpoint_id": updated} if updated else {}),
            },
        )
        self.commit(inserts=self.workspace_snapshot(updated) if updated else [])

    def breakpoint_update(
        self,
        graph: Any,
        state: Any,
        *,
        edits: dict[str | None, dict[str, Any]],
        rejections: dict[str | None, str],
        responses: dict[str | None, str] | None = None,
    ) -> str:
        """Write the reviewers' edits, rejections and responses into the graph's state: the
        edited args replace the AIMessage's tool calls; each rejected call gets a ToolMessage
        saying so, each answered one the response as its ToolMessage (written as the tools node
        when no call runs, so the model runs next; otherwise the turn is split: the calls
        that do not run and their answers, then a message with the calls that run). -> the
        new checkpoint's id."""
        responses = responses or {}
        self.commit()  # the delivered calls are `running` before the state moves on
        tools, calls = self.pending_tool_calls(graph, state)
        messages = state.values["messages"]
        ai = next(m for m in reversed(messages) if isinstance(m, AIMessage))
        calls = [
            {**call, "args": edits[call["id"]]} if call.get("id") in edits else call
            for call in calls
        ]
        refused = [c for c in calls if c.get("id") in rejections or c.get("id") in responses]
        kept = [c for c in calls if c not in refused]
        answers = [
            ToolMessage(content=responses[c["id"]], name=c["name"], tool_call_id=c["id"])
            if c["id"] in responses
            else ToolMessage(
                content=f"A human reviewer rejected this call to {c['name']}; it did not run."
                + (f" Reason: {rejections[c['id']]}" if rejections[c["id"]] else ""),
                name=c["name"],
                tool_call_id=c["id"],
                status="error",
            )
            for c in refused
        ]
        if not kept:
            config = graph.update_state(self.config, {"messages": answers}, as_node=tools)
        elif not refused:
            config = graph.update_state(
                self.config, {"messages": [ai.model_copy(update={"tool_calls": kept})]}
            )
        else:
            config = graph.update_state(
                self.config,
                {
                    "messages": [
                        ai.model_copy(update={"tool_calls": refused}),
                        *answers,
                        AIMessage(content="", tool_calls=kept),
                    ]
                },
            )
        return config["configurable"]["checkpoint_id"]


def _decided(key: str, by_call: dict[str | None, Any]) -> dict[str, Any]:
    """{key: {tool call id: decision}} of a breakpoint's calls (none: {})."""
    named = {str(k): v for k, v in by_call.items() if k is not None}
    return {key: jsonable(named)} if named else {}
