"""A graph run (GraphRun) and its RQ entry (graph_task_run): load the graph with the
task's checkpointer, start, stream, then settle (succeeded, or paused for reviews); how LangGraph's
own errors stop it (ended_by: recursion limit, super-step timeout). The ladder, the stop's
last write and the job are agent.sdk_run's."""

from __future__ import annotations

from typing import Any

from langgraph.errors import GraphRecursionError

from agent.graph_runner.drift import graph_drift_at_pickup
from agent.graph_runner.replay import GraphReplay
from agent.graph_runner.replay_answers import GraphReplayDiverged
from agent.graph_runner.start import GraphRunStart
from agent.graph_runner.streaming import GraphRunStreaming
from agent.graph_runner.values import RESULT_MAX_CHARS, text
from agent.graph_runner.versions import graph_version_parts
from agent.runtime.run import StopRun
from agent.versions import version_bodies_flush, versions_current
from tasks.events import EventType
from tasks.models import ToolCallStatus


class GraphRun(GraphRunStart, GraphRunStreaming):
    """One run of a task's graph, from acquire to the job's end. Its parts, from the bottom:
    core, tracing, calls, workspace, streaming, answers, asking, breakpoints,
    past_breakpoints, start."""

    def segment(self) -> str:
        graph = self.load().copy(update={"checkpointer": self.saver, "step_timeout": self.step_s})
        self.version_parts = graph_version_parts(spec=self.task.spec, graph=graph)
        self.saver.versions = versions_current(self)
        version_bodies_flush(self)
        self.boundary_checks()
        graph_drift_at_pickup(self, graph)
        if self.replay is None:
            self.stream(graph, self.first_input(graph))
        else:
            self.replayed(graph, self.replay)
        self.settle(graph)
        return "succeeded"

    def replayed(self, graph: Any, replay: GraphReplay) -> None:
        """A replay's run: each pause for review resumed with the recorded answers, until the
        graph finishes (settle then finds no pause)."""
        with replay.playing(self, graph):
            state = graph.get_state(self.config)
            if state.created_at is None:
                go, value = True, self.first_input(graph)
            else:  # a replay that stopped mid-run: it never waited for a person
                self.picked_up(state)
                go, value = self.replay_resume(graph, state, replay)
            while go:
                self.stream(graph, value)
                go, value = self.replay_resume(graph, graph.get_state(self.config), replay)

    def replay_resume(self, graph: Any, state: Any, replay: GraphReplay) -> tuple[bool, Any]:
        at_breakpoint = bool(self.breakpoint_at(graph, state))

        def update(
            *, edits: dict[Any, Any], rejections: dict[Any, str], responses: dict[Any, str]
        ) -> None:
            self.breakpoint_update(
                graph, state, edits=edits, rejections=rejections, responses=responses
            )

        return replay.resume(self, state, at_breakpoint=at_breakpoint, update=update)

    def ended_by(self, exc: Exception) -> StopRun | None:
        if isinstance(exc, GraphReplayDiverged) and self.replay is not None:
            return self.replay.diverged(self, **(self.replay.divergence or {"reason": str(exc)}))
        if isinstance(exc, GraphRecursionError):
            return StopRun("budget_exceeded", str(exc)[:500])
        if isinstance(exc, TimeoutError):
            return StopRun(
                "timeout", f"a super-step exceeded {self.step_s:g}s (layer: turn): {exc}"
            )
        return None

    def closed(self) -> None:
        self.saver.close()

    def settle(self, graph: Any) -> None:
        state = graph.get_state(self.config)
        if state.interrupts:
            self.pause_for_reviews(state)
        if state.next:  # the run stopped with nodes to go and no interrupt: a breakpoint
            self.pause_for_breakpoint(graph, state, where=self.breakpoint_at(graph, state))
        result = self.answer_of(state.values)
        self.calls_settle(to=ToolCallStatus.SUCCEEDED)  # the graph finished with them
        self.calls_abandon(keep=None)
        self.event(EventType.TASK_FINISHED, {"result": result[:2000]})
        self.write_then(lambda: self.succeed(result, "graph finished"))

    @staticmethod
    def answer_of(values: Any) -> str:
        messages = values.get("messages") if isinstance(values, dict) else None
        if messages:
            content = getattr(messages[-1], "content", messages[-1])
            return text(content, RESULT_MAX_CHARS)
        return text(values, RESULT_MAX_CHARS)

    def stopping(self, stop: StopRun) -> None:
        self.calls_settle(
            to=ToolCallStatus.FAILED,
            error_class=stop.error_class,
            error_message=stop.message[:2000],
        )
        self.calls_abandon(keep=None, only_canceled=True)


def graph_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names a LangGraph graph."""
    return GraphRun.job(task_id=task_id)
