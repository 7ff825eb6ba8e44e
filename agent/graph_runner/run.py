"""A graph run (GraphRun) and its RQ entry (graph_task_run): load the graph with the
task's checkpointer, start, stream, then settle (succeeded, or paused for reviews) or stop
(failed, canceled, timed out)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from langgraph.errors import GraphRecursionError

from agent.graph_runner.drift import graph_drift_at_pickup
from agent.graph_runner.loading import GraphNotRegistered, graph_load
from agent.graph_runner.start import GraphRunStart
from agent.graph_runner.streaming import GraphRunStreaming
from agent.graph_runner.values import text
from agent.graph_runner.versions import graph_version_parts
from agent.runtime.finish import stop_transition
from agent.runtime.run import Paused, StopRun, connection_lost, with_lease_loaded
from agent.versions import version_bodies_flush, versions_current
from tasks import services
from tasks.events import EventType
from tasks.models import ToolCallStatus
from tasks.states import LeaseLost, TaskStatus

log = logging.getLogger(__name__)

RESULT_MAX_CHARS = 5000


class GraphRun(GraphRunStart, GraphRunStreaming):
    """One run of a task's graph, from acquire to the job's end. Its parts, from the bottom:
    core, tracing, calls, workspace, streaming, answers, asking, breakpoints,
    past_breakpoints, start."""

    def execute(self) -> str:
        self.watchdog.start()
        try:
            graph = (self.graph or graph_load(self.spec.agent.graph)).copy(
                update={"checkpointer": self.saver, "step_timeout": self.step_s}
            )
            self.version_parts = graph_version_parts(spec=self.task.spec, graph=graph)
            self.saver.versions = versions_current(self)
            version_bodies_flush(self)
            self.boundary_checks()
            graph_drift_at_pickup(self, graph)
            first = self.first_input(graph)
            self.stream(graph, first)
            self.settle(graph)
            return "succeeded"
        except Paused:
            return "paused"
        except LeaseLost as exc:
            log.warning("task %s: %s; stopping without further writes", self.task_id, exc)
            return "lease_lost"
        except StopRun as stop:
            return self.finish_stopped(stop)
        except GraphRecursionError as exc:
            return self.finish_stopped(StopRun("budget_exceeded", str(exc)[:500]))
        except TimeoutError as exc:
            return self.finish_stopped(
                StopRun("timeout", f"a super-step exceeded {self.step_s:g}s (layer: turn): {exc}")
            )
        except (GraphNotRegistered, ImportError, AttributeError) as exc:
            if self.graph is not None:  # raised by the graph's own code, not by loading it
                log.exception("task %s: graph failed", self.task_id)
                return self.finish_stopped(StopRun("graph_error", f"{type(exc).__name__}: {exc}"))
            return self.finish_stopped(StopRun("graph_not_registered", str(exc)))
        except Exception as exc:  # the graph's own error: the task fails, its state is kept
            if connection_lost(exc):
                raise  # not the task's failure: with_lease gives the task back
            log.exception("task %s: graph failed", self.task_id)
            return self.finish_stopped(StopRun("graph_error", f"{type(exc).__name__}: {exc}"))
        finally:
            self.watchdog.finish()
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
        with transaction.atomic():
            self.commit()
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.SUCCEEDED,
                expect_epoch=self.epoch,
                reason="graph finished",
                fields={"result": result, **self.usage()},
            )

    @staticmethod
    def answer_of(values: Any) -> str:
        messages = values.get("messages") if isinstance(values, dict) else None
        if messages:
            content = getattr(messages[-1], "content", messages[-1])
            return text(content, RESULT_MAX_CHARS)
        return text(values, RESULT_MAX_CHARS)

    def finish_stopped(self, stop: StopRun) -> str:
        self.calls_settle(
            to=ToolCallStatus.FAILED,
            error_class=stop.error_class,
            error_message=stop.message[:2000],
        )
        self.calls_abandon(keep=None, only_canceled=True)
        self.event(
            EventType.TASK_STOPPED,
            {
                "error_class": stop.error_class,
                "message": stop.message[:2000],
                **getattr(stop, "payload", {}),
            },
        )
        try:
            with transaction.atomic():
                self.commit()
                to = stop_transition(
                    task_id=self.task_id, epoch=self.epoch, stop=stop, usage=self.usage()
                )
        except LeaseLost:
            return "lease_lost"
        return str(to)


def graph_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names a LangGraph graph."""
    return with_lease_loaded(
        task_id=task_id,
        load=graph_load,
        name_key="graph",
        run=lambda task, worker_id, loaded: GraphRun(task, worker_id, graph=loaded).execute(),
    )
