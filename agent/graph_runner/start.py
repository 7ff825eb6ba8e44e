"""Where a graph run starts from (GraphRunStart, part of GraphRun): the spec's input on a
new thread; otherwise the latest checkpoint, resumed with the answers to its interrupts, past
its breakpoint, or as it is."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.types import Command

from agent.graph_runner.answers import interrupt_of, stop
from agent.graph_runner.past_breakpoints import GraphRunPastBreakpoints
from agent.graph_runner.values import jsonable
from harness_base import telemetry
from review.models import ReviewStatus
from tasks.events import EventType

BREAKPOINT_MODES = ("breakpoint", "breakpoint_tool")


class GraphRunStart(GraphRunPastBreakpoints):
    """GraphRun's start: first_input, picked_up."""

    def picked_up(self, state: Any) -> str:
        """The run takes the thread up at its latest checkpoint (its id): the calls that were
        in flight, and the workspace as that checkpoint left it."""
        checkpoint_id = str(state.config["configurable"]["checkpoint_id"])
        self.head_at_start = checkpoint_id
        if telemetry.enabled() and isinstance(state.values, dict):
            # (A message without an id is traced whatever this holds: agent.graph_runner.tracing.)
            self.chats_traced = {
                m.id
                for m in state.values.get("messages") or []
                if isinstance(m, AIMessage) and m.id is not None
            }
        self.calls_in_flight()
        self.restore_workspace(checkpoint_id, source=(state.metadata or {}).get("source"))
        return checkpoint_id

    def first_input(self, graph: Any) -> Any:
        state = graph.get_state(self.config)
        if state.created_at is None:
            self.event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            return self.graph_spec.input
        checkpoint_id = self.picked_up(state)
        if state.interrupts:
            # Reviews canceled with the task (cancel, then resume) ask again.
            # (A rejection that stopped the task asks again too.)
            stopped = self.stopped_reviews()
            reviews = [
                r
                for r in self.reviews_of(checkpoint_id)
                if r.status != ReviewStatus.CANCELED and r.id not in stopped
            ]
            if not reviews:
                self.pause_for_reviews(state)  # not asked yet, or asked and canceled
            if any(r.status == ReviewStatus.PENDING for r in reviews):
                self.pause(reason="reviews still pending")
            self.recheck_approvals(reviews)
            refused = [
                r
                for r in reviews
                if (r.interrupt or {}).get("resume") == "value"
                and r.status != ReviewStatus.RESPONDED
            ]
            if refused:  # interrupt_resume: value has no answer that means "no"
                message = (interrupt_of(refused[0]).get("decision") or {}).get("message") or ""
                raise stop(
                    "interrupt_rejected",
                    f"a reviewer rejected the interrupt of {refused[0].tool}"
                    + (f": {message}" if message else ""),
                    reviews,
                )
            answers = self.answers(reviews)
            self.calls_delivered(reviews)
            self.event(
                EventType.GRAPH_RESUMED,
                {"checkpoint_id": checkpoint_id, "answers": jsonable(answers)},
            )
            return Command(resume=answers)
        if state.next:
            asked = [
                r
                for r in self.reviews_of(checkpoint_id)
                if (r.interrupt or {}).get("mode") in BREAKPOINT_MODES
            ]
            if asked or self.breakpoint_at(graph, state):
                self.past_breakpoint(graph, state, asked)
                return None
        self.event(
            EventType.RESUMED,
            {
                "worker": self.worker_id,
                "epoch": self.epoch,
                "graph_checkpoint_id": checkpoint_id,
                "next": list(state.next),
            },
        )
        return None
