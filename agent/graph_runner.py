"""Graphs as tasks: an operator-registered LangGraph graph run by an RQ job under the task's
state machine (`agent.jobs.run_task` dispatches here when the spec has `agent`).

    acquire (lease epoch) -> the graph's thread (thread_id = task id) in DjangoCheckpointSaver:
        no checkpoint yet           -> start with spec.agent.input
        interrupts, all decided     -> Command(resume={interrupt id: answer})
        interrupts, not yet reviewed-> open the reviews (a crash came between) and pause
        a static breakpoint, decided-> edits / rejections written with update_state, then None
        a static breakpoint, not yet-> open its reviews and pause
        otherwise                   -> None: continue from the latest checkpoint (retry, resume,
                                       redispatch after a crash, kill -9 or a cancel)
    stream super-steps: each LangGraph checkpoint is a step on the timeline (one fenced write
    of its events and the workspace snapshot taken with it: heartbeat, lease proof, cancel
    flag), each node run and tool call a span; the saver's own writes are fenced on the same
    lease epoch; reviewed calls settle as the graph runs them;
    between super-steps: lease, cancel, session timeout, step budget
    end: interrupts -> one review per action, task waiting_review, the job ends;
         a static breakpoint (next nodes, no interrupts) -> one review per pending tool call
         of the tools node it stops before, else one review of the breakpoint; waiting_review;
         no next node -> succeeded with the graph's answer; an exception -> failed.

What a graph node does between two checkpoints is LangGraph's: a cancel or a lost lease stops
the run at the next super-step boundary, and `turn_timeout_s` bounds one super-step
(LangGraph's step_timeout). Completed nodes of an interrupted super-step are not re-run: their
pending writes are in the checkpointer.
"""

from __future__ import annotations

import importlib
import json
import logging
import time
import typing
from typing import Any, NoReturn

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphRecursionError
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from agent.runtime.attempt import tool_attempt_record, tool_label_known
from agent.runtime.finish import stop_transition
from agent.runtime.run import (
    Paused,
    SessionClock,
    StopRun,
    connection_lost,
    with_lease_loaded,
)
from agent.runtime.watchdog import Watchdog
from agent.tracing import model_call, tool_started
from checkpoints.langgraph import DjangoCheckpointSaver
from checkpoints.models import GraphWorkspace, GraphWrite
from checkpoints.services import graph_workspace_build
from checkpoints.snapshots import snapshot_capture, snapshot_materialise_if_missing
from harness_base import telemetry
from harness_base.config import harness_config, langgraph_entry
from harness_base.metrics import STEP_SECONDS, metric_observe
from review.models import ReviewRequest, ReviewStatus
from review.policy import interrupt_policy
from review.recheck import interrupt_recheck
from review.services.transitions import review_request_open
from tasks import beacon, services
from tasks.events import EventType
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.spec import TaskSpec
from tasks.states import LeaseLost, TaskStatus

log = logging.getLogger(__name__)

RESULT_MAX_CHARS = 5000
TEXT_MAX_CHARS = 500
REVIEW_KIND = "langgraph"
ALL_DECISIONS = ["approve", "edit", "reject", "respond"]
PLAIN_DECISIONS = ["approve", "reject", "respond"]
# A plain interrupt of a graph registered with `interrupt_resume: value`.
VALUE_DECISIONS = ["respond", "reject"]
# A static breakpoint (interrupt_before / interrupt_after): before a tools node, one review per
# pending tool call; anywhere else, one review of going on past it.
BREAKPOINT_TOOL_DECISIONS = ["approve", "edit", "reject"]
BREAKPOINT_DECISIONS = ["approve", "reject"]
BREAKPOINT_MODES = ("breakpoint", "breakpoint_tool")
# Calls whose decision is consumed by the super-step after the resume (no tool result).
SETTLED_BY_STEP = ("plain", "breakpoint")
# The channel key under which a checkpoint's versions_seen records the versions a breakpoint
# stop saw (langgraph.constants.INTERRUPT, no longer public).
INTERRUPT = "__interrupt__"


class GraphNotRegistered(Exception):
    pass


def graph_load(name: str) -> Any:
    """The graph harness.yaml registers as `name`, compiled without a checkpointer of its own
    (the runner attaches the task's). Only operators name code to import."""
    registered = harness_config().langgraph_graphs.get(name)
    if registered is None:
        raise GraphNotRegistered(f"graph {name!r} is not registered in harness.yaml")
    ref = langgraph_entry(registered).graph
    module_name, _, attr_path = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        target = getattr(target, attr)
    if hasattr(target, "compile") and not hasattr(target, "stream"):
        target = target.compile()  # a StateGraph builder
    if not hasattr(target, "stream") or not hasattr(target, "copy"):
        raise GraphNotRegistered(f"{ref} is not a LangGraph graph (compiled or StateGraph)")
    return target


def graph_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names a LangGraph graph."""
    return with_lease_loaded(
        task_id=task_id,
        load=graph_load,
        name_key="graph",
        run=lambda task, worker_id, loaded: GraphRun(task, worker_id, graph=loaded).execute(),
    )


def graph_thread_config(*, task_id: Any, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": str(task_id), "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _text(value: Any, limit: int = TEXT_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more]"


class GraphRun:
    def __init__(self, task: Task, worker_id: str, *, graph: Any = None) -> None:
        self.graph = graph
        self.task = task
        self.task_id = task.id
        self.epoch = task.lease_epoch
        self.worker_id = worker_id
        self.spec = TaskSpec.model_validate(task.spec)
        timeouts = harness_config().timeouts
        budget = self.spec.budget
        self.session_s = budget.session_timeout_s or timeouts.session_s
        self.step_s = budget.turn_timeout_s or timeouts.turn_s
        self.session = SessionClock(task)
        self.human_wait_s = task.human_wait_s
        self.run_started = time.monotonic()
        self.seconds_before = task.seconds_used
        self.steps_used = task.steps_used
        self.step_index = task.current_step
        self.cancel_seen = task.cancel_requested
        self.pending_events: list[Any] = []
        # ToolCall rows whose outcome the next fenced write saves: {pk: (row, fields)}.
        self.pending_calls: dict[int, tuple[ToolCall, set[str]]] = {}
        # Graph calls whose decision the graph was resumed with, outcome not known yet:
        # {pk: (row, interrupt meta)}. Settled by the tool's result, by the super-step that
        # consumed the decision (a plain interrupt), or when the run ends.
        self.delivered: dict[int, tuple[ToolCall, dict[str, Any]]] = {}
        self.head_at_start: str | None = None
        self.node_started: dict[str, float] = {}
        # For the metrics: the tools the graph's ToolNodes hold (the labels a tool call may
        # have) and when the super-step being run began (the last checkpoint streamed).
        self.tool_names: frozenset[str] = frozenset()
        self.step_began = time.monotonic()
        self.run_started_ns = time.time_ns()
        # Ids of the AIMessages traced as `chat` spans, or in the state this run resumed from
        # (a middleware's node writes its model's message again).
        self.chats_traced: set[str] = set()
        self.saver = DjangoCheckpointSaver(task_id=task.id, epoch=self.epoch)
        self.config = {
            **graph_thread_config(task_id=task.id),
            "recursion_limit": budget.max_steps + 10,
        }
        self.workspace = task.workspace_path
        registered = harness_config().langgraph_graphs.get(self.spec.agent.graph)
        self.interrupt_resume = (
            langgraph_entry(registered).interrupt_resume if registered else "envelope"
        )
        self.config["configurable"]["harness_workspace"] = str(self.workspace)
        # LangGraph checkpoint ids whose workspace snapshot is stored (or known to be).
        self.snapshotted: set[str] = set()
        self.watchdog = Watchdog(
            task_id=task.id, epoch=self.epoch, interval_s=settings.HARNESS_HEARTBEAT_S
        )

    # -- bookkeeping -------------------------------------------------------------------------

    def event(self, type: str, payload: dict[str, Any]) -> None:
        self.pending_events.append(
            services.event_build(
                task_id=self.task_id, type=type, payload=payload, step_index=self.step_index
            )
        )

    def usage(self) -> dict[str, Any]:
        return {
            "current_step": self.step_index,
            "steps_used": self.steps_used,
            "seconds_used": self.seconds_before + (time.monotonic() - self.run_started),
        }

    def commit(self, *, inserts: list[Any] = (), **fields: Any) -> None:
        """One fenced write: lease proof + heartbeat + usage + this step's events (+ rows,
        + the tool calls settled since the last write)."""
        self.cancel_seen = services.task_fenced_write(
            task_id=self.task_id,
            epoch=self.epoch,
            inserts=[*inserts, *self.pending_events],
            updates=[(row, sorted(names)) for row, names in self.pending_calls.values()],
            **{**self.usage(), **fields},
        )
        self.pending_events = []
        self.pending_calls = {}

    # -- the graph's reviewed calls ----------------------------------------------------------

    def call_move(self, row: ToolCall, to: str, **fields: Any) -> None:
        """Move a graph call to `to`, saved by the next fenced write (the one place this
        module changes a ToolCall's status)."""
        names = _toolcall_status(row, to, fields)
        _row, known = self.pending_calls.get(row.pk, (row, set()))
        self.pending_calls[row.pk] = (row, known | names)

    def calls_delivered(self, reviews: list[ReviewRequest]) -> None:
        """The graph is resumed with these decisions: the approved calls run now."""
        for review in reviews:
            row = review.tool_call
            if row is not None and row.status == ToolCallStatus.APPROVED:
                self.call_move(row, ToolCallStatus.RUNNING)
                self.delivered[row.pk] = (row, review.interrupt or {})

    def calls_in_flight(self) -> None:
        """Calls a run that died (kill -9, lost lease) had resumed the graph with: they are
        still running, and this run settles them."""
        for review in ReviewRequest.objects.filter(
            task_id=self.task_id, kind=REVIEW_KIND, tool_call__status=ToolCallStatus.RUNNING
        ).select_related("tool_call"):
            self.delivered[review.tool_call.pk] = (review.tool_call, review.interrupt or {})

    def calls_abandon(self, *, keep: str | None, only_canceled: bool = False) -> None:
        """Calls the graph will never be resumed with: those whose review was canceled (a
        cancel or rollback; the graph asks again with a new call) and, unless `only_canceled`,
        those asked at another checkpoint than `keep` (a rollback went back before them; None:
        the graph finished). They fail."""
        for review in ReviewRequest.objects.filter(
            task_id=self.task_id,
            kind=REVIEW_KIND,
            tool_call__status__in=[ToolCallStatus.AWAITING_REVIEW, ToolCallStatus.APPROVED],
        ).select_related("tool_call"):
            if review.tool_call_id in self.pending_calls:
                continue
            canceled = review.status == ReviewStatus.CANCELED
            elsewhere = (review.interrupt or {}).get("checkpoint_id") != keep
            if canceled or (elsewhere and not only_canceled):
                self.call_move(
                    review.tool_call,
                    ToolCallStatus.FAILED,
                    error_class="review_canceled" if canceled else "superseded",
                    error_message=(
                        "its review was canceled; the graph asks again"
                        if canceled
                        else "the graph moved on without this decision"
                    ),
                )

    def calls_settle(self, *, message: Any = None, to: str = "", **fields: Any) -> ToolCall | None:
        """A tool message settles the delivered call of that tool (by tool call id when the
        interrupt named one; -> its row); without a message, every delivered call goes `to` —
        or, with neither, the plain interrupts, whose decision the super-step just stored
        consumed. Each settled call is an `execute_tool` span, from when it was delivered."""
        for pk, (row, meta) in list(self.delivered.items()):
            if message is not None:
                wanted = meta.get("tool_call_id")
                if meta.get("mode") in SETTLED_BY_STEP or (
                    getattr(message, "tool_call_id", None) != wanted
                    if wanted
                    else getattr(message, "name", "") != row.tool
                ):
                    continue
                failed = getattr(message, "status", "success") == "error"
                self.call_move(
                    row,
                    ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED,
                    result={"content": _text(message.content)},
                    **(
                        {"error_class": "tool_error", "error_message": _text(message.content)}
                        if failed
                        else {}
                    ),
                )
                del self.delivered[pk]
                self.call_traced(row)
                return row
            if to or meta.get("mode") in SETTLED_BY_STEP:
                self.call_move(row, to or ToolCallStatus.SUCCEEDED, **fields)
                del self.delivered[pk]
                self.call_traced(row)
        return None

    # -- spans (agent/tracing.py): what the stream shows of tool attempts and model calls ----

    def call_traced(self, row: ToolCall) -> None:
        """A reviewed call, settled: its attempt from its delivery (at most this run's start)."""
        if not telemetry.enabled():
            return
        started = row.started_at.timestamp() * 1e9 if row.started_at else 0
        traced = tool_started(
            tool=row.tool,
            call_id=row.call_id,
            attempt=max(row.attempts, 1),
            arguments=row.arguments,
            start_ns=max(int(started), self.run_started_ns),
        )
        traced.finished(
            status=row.status,
            error_class=row.error_class if row.status == ToolCallStatus.FAILED else "",
            error_message=row.error_message,
            result=row.result,
        )
        traced.end()

    def node_traced(self, messages: list[Any], settled: set[str], started: float | None) -> None:
        """A node's new AIMessages that report token usage are `chat` spans and its tool messages
        that settled no reviewed call are `execute_tool` spans (gen_ai.tool.call.id: the tool
        call id of the graph), each as long as the node ran."""
        now = time.monotonic()
        start_ns = time.time_ns() - int((now - started) * 1e9) if started is not None else None
        for message in messages:
            if (
                isinstance(message, AIMessage)
                and message.usage_metadata
                and (message.id is None or message.id not in self.chats_traced)
            ):
                if message.id is not None:
                    self.chats_traced.add(message.id)
                meta = message.response_metadata or {}
                usage = message.usage_metadata
                model = str(meta.get("model_name") or meta.get("model") or "")
                model_call(
                    provider=meta.get("model_provider"), model=model, start_ns=start_ns
                ).ended(
                    input_tokens=usage.get("input_tokens"),
                    output_tokens=usage.get("output_tokens"),
                    finish_reason=str(
                        meta.get("finish_reason")
                        or ("tool_calls" if message.tool_calls else "stop")
                    ),
                    response_model=model,
                )
            elif isinstance(message, ToolMessage) and message.tool_call_id not in settled:
                failed = message.status == "error"
                traced = tool_started(
                    tool=str(message.name or ""),
                    call_id=message.tool_call_id,
                    attempt=1,
                    arguments=None,
                    start_ns=start_ns,
                )
                traced.finished(
                    status=ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED,
                    error_class="tool_error" if failed else "",
                    error_message=_text(message.content) if failed else "",
                    result=message.content,
                )
                traced.end()

    def boundary_checks(self) -> None:
        if self.watchdog.lease_lost.is_set():
            raise LeaseLost("heartbeat found the lease taken")
        if self.watchdog.cancel_requested.is_set() or self.cancel_seen:
            raise StopRun("canceled", "canceled by operator")
        elapsed = self.session.elapsed_s() - self.human_wait_s
        if elapsed > self.session_s:
            self.event(EventType.TIMEOUT, {"layer": "session", "limit_s": self.session_s})
            raise StopRun(
                "timeout", f"session timeout: {self.session_s:g}s exceeded (layer: session)"
            )
        if self.steps_used >= self.spec.budget.max_steps:
            raise StopRun("budget_exceeded", f"max_steps={self.spec.budget.max_steps} reached")

    # -- the run -----------------------------------------------------------------------------

    def execute(self) -> str:
        self.watchdog.start()
        try:
            graph = (self.graph or graph_load(self.spec.agent.graph)).copy(
                update={"checkpointer": self.saver, "step_timeout": self.step_s}
            )
            self.boundary_checks()
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

    def first_input(self, graph: Any) -> Any:
        state = graph.get_state(self.config)
        if state.created_at is None:
            self.event(EventType.TASK_STARTED, {"worker": self.worker_id, "epoch": self.epoch})
            return self.spec.agent.input
        checkpoint_id = state.config["configurable"]["checkpoint_id"]
        self.head_at_start = checkpoint_id
        if telemetry.enabled() and isinstance(state.values, dict):
            self.chats_traced = {
                m.id for m in state.values.get("messages") or [] if isinstance(m, AIMessage)
            }
        self.calls_in_flight()
        self.restore_workspace(checkpoint_id, source=(state.metadata or {}).get("source"))
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
                message = (refused[0].interrupt.get("decision") or {}).get("message") or ""
                raise _stop(
                    "interrupt_rejected",
                    f"a reviewer rejected the interrupt of {refused[0].tool}"
                    + (f": {message}" if message else ""),
                    reviews,
                )
            answers = self.answers(reviews)
            self.calls_delivered(reviews)
            self.event(
                EventType.GRAPH_RESUMED,
                {"checkpoint_id": checkpoint_id, "answers": _jsonable(answers)},
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

    def stream(self, graph: Any, first: Any) -> None:
        # Nodes are handed the workspace as configurable `harness_workspace`: it exists before
        # the first of them runs.
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.commit()
        # Each super-step is bounded by step_timeout (the turn timeout): the run promises its
        # worker to be heard from within that, again after everything the stream yields.
        beacon.expect("turn", self.step_s)
        self.tool_names = frozenset(
            name
            for node in graph.nodes.values()
            if isinstance(getattr(node, "bound", None), ToolNode)
            for name in node.bound.tools_by_name
        )
        self.step_began = time.monotonic()
        for mode, chunk in graph.stream(
            first, self.config, stream_mode=["checkpoints", "tasks"], durability="sync"
        ):
            if mode == "tasks" and "result" not in chunk:
                self.node_started[chunk["id"]] = time.monotonic()
            elif mode == "tasks":
                self.record_node(chunk)
            elif mode == "checkpoints":
                self.record_super_step(chunk)
                self.boundary_checks()
            beacon.expect("turn", self.step_s)
        beacon.progress()

    def restore_workspace(self, checkpoint_id: str, *, source: str | None) -> None:
        """Rebuild the workspace from the head checkpoint's snapshot when it holds no files
        here (another machine, a wiped disk). After a rollback (the head is its fork and no
        node has written against it yet) bring it in line with the snapshot wherever it is."""
        snapshot = (
            GraphWorkspace.objects.filter(task_id=self.task_id, checkpoint_id=checkpoint_id)
            .values_list("snapshot", flat=True)
            .first()
        )
        if snapshot is None:
            return
        self.snapshotted.add(checkpoint_id)
        sync = (
            source == "fork"
            and not GraphWrite.objects.filter(
                thread_id=str(self.task_id), checkpoint_ns="", checkpoint_id=checkpoint_id
            ).exists()
        )
        if snapshot_materialise_if_missing(workspace=self.workspace, manifest=snapshot, sync=sync):
            self.event(EventType.WORKSPACE_MATERIALISED, {"graph_checkpoint_id": checkpoint_id})

    def workspace_snapshot(self, checkpoint_id: str) -> list[GraphWorkspace]:
        """The workspace as this checkpoint leaves it, to store with the super-step's events.
        LangGraph streams a checkpoint before the next super-step's nodes start, so no node
        is writing meanwhile. Incremental: unchanged folders are only stat'ed."""
        if checkpoint_id in self.snapshotted:
            return []
        if (
            not self.snapshotted
            and GraphWorkspace.objects.filter(
                task_id=self.task_id, checkpoint_id=checkpoint_id
            ).exists()
        ):  # the head this run resumed from, already stored by an earlier run
            self.snapshotted.add(checkpoint_id)
            return []
        self.snapshotted.add(checkpoint_id)
        snapshot = snapshot_capture(task_id=self.task_id, workspace=self.workspace)
        return [
            graph_workspace_build(
                task_id=self.task_id, checkpoint_id=checkpoint_id, snapshot=snapshot
            )
        ]

    def record_super_step(self, chunk: dict[str, Any]) -> None:
        metadata = chunk.get("metadata") or {}
        step = int(metadata.get("step", 0))
        now = time.monotonic()
        if metadata.get("source") == "loop" and step > 0:
            self.steps_used += 1
            metric_observe(STEP_SECONDS, now - self.step_began)
        self.step_began = now
        self.step_index = max(step, 0)
        checkpoint_id = chunk["config"]["configurable"]["checkpoint_id"]
        snapshot = self.workspace_snapshot(checkpoint_id)
        if checkpoint_id != self.head_at_start:
            self.calls_settle()  # a super-step after the resume: plain decisions consumed
        self.event(
            EventType.GRAPH_STEP,
            {
                "checkpoint_id": checkpoint_id,
                "step": step,
                "source": metadata.get("source"),
                "parents": metadata.get("parents") or {},
                "next": list(chunk.get("next") or []),
                **({"workspace_files": snapshot[0].snapshot["files"]} if snapshot else {}),
            },
        )
        self.commit(inserts=snapshot)

    def record_node(self, chunk: dict[str, Any]) -> None:
        result = chunk.get("result")
        writes = result if isinstance(result, dict) else {}
        messages = writes.get("messages")
        messages = messages if isinstance(messages, list) else []
        started = self.node_started.pop(chunk["id"], None)
        seconds = time.monotonic() - started if started else 0.0
        error = chunk.get("error")
        self.event(
            EventType.GRAPH_NODE,
            {
                "node": chunk["name"],
                "graph_task_id": chunk["id"],
                "duration_ms": round(seconds * 1000, 3),
                "error_class": type(error).__name__ if error else "",
                "error": _text(error) if error else "",
                "writes": sorted(str(k) for k in writes),
                "interrupts": len(chunk.get("interrupts") or []),
                # the tools this node ran (a ToolNode's results)
                "tool": ", ".join(
                    str(getattr(m, "name", ""))
                    for m in messages
                    if getattr(m, "type", "") == "tool"
                ),
            },
        )
        settled: set[str] = set()
        for message in messages:
            for call in getattr(message, "tool_calls", None) or []:
                self.event(
                    EventType.GRAPH_TOOL_CALL,
                    {
                        "node": chunk["name"],
                        "tool": call.get("name"),
                        "tool_call_id": call.get("id"),
                        "arguments": _jsonable(call.get("args")),
                    },
                )
            if getattr(message, "type", "") == "tool":
                self.record_tool_result(message, seconds)
                if self.calls_settle(message=message) is not None:
                    settled.add(getattr(message, "tool_call_id", ""))
                self.event(
                    EventType.GRAPH_TOOL_RESULT,
                    {
                        "node": chunk["name"],
                        "tool": getattr(message, "name", ""),
                        "tool_call_id": getattr(message, "tool_call_id", ""),
                        "status": getattr(message, "status", "success"),
                        "content": _text(message.content),
                    },
                )
        if telemetry.enabled():
            self.node_traced(messages, settled, started)

    def record_tool_result(self, message: Any, seconds: float) -> None:
        """A ToolNode's result in the metrics, like an attempt of the harness's own loop. The
        node runs its calls together and reports no time per call: each is given the node's.
        An error result is a call the ToolNode refused or whose error it caught (bad
        arguments, an unknown tool): `permanent`. A tool whose exception fails the node
        leaves no result, and counts as the node's failure only."""
        failed = getattr(message, "status", "success") == "error"
        tool_attempt_record(
            tool=tool_label_known(getattr(message, "name", ""), self.tool_names),
            seconds=seconds,
            error_class="permanent" if failed else "",
        )

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
            return _text(content, RESULT_MAX_CHARS)
        return _text(values, RESULT_MAX_CHARS)

    # -- interrupts are reviews --------------------------------------------------------------

    def reviews_of(self, checkpoint_id: str) -> list[ReviewRequest]:
        """The reviews of the interrupts at this checkpoint (a reopened one: its new review)."""
        return [
            review
            for review in ReviewRequest.objects.filter(
                task_id=self.task_id, kind=REVIEW_KIND, reopened_as__isnull=True
            )
            if (review.interrupt or {}).get("checkpoint_id") == checkpoint_id
        ]

    def recheck_approvals(self, reviews: list[ReviewRequest]) -> None:
        """Just before the graph is resumed with them, approved actions are checked again
        (review.recheck.interrupt_recheck: deadline, approvers, policy). One that no longer
        holds is not delivered: a new pending review of it says what changed, and the task
        waits for it."""
        now = timezone.now()
        drifted = [
            (review, check)
            for review in reviews
            if review.status == ReviewStatus.APPROVED
            for check in [interrupt_recheck(review=review, task=self.task, now=now)]
            if not check.holds
        ]
        if not drifted:
            return
        for review, check in drifted:
            self.call_move(review.tool_call, ToolCallStatus.AWAITING_REVIEW)
            self.event(
                EventType.REVIEW_REQUESTED,
                {
                    "call_id": review.tool_call.call_id,
                    "tool": review.tool,
                    "reopened_from": review.id,
                    "changes": check.changes,
                },
            )

        def reopen() -> None:
            for review, check in drifted:
                review_request_open(
                    tool_call=review.tool_call,
                    checkpoint_id=None,
                    decision=check.policy,
                    preview=review.preview,
                    kind=REVIEW_KIND,
                    interrupt={k: v for k, v in review.interrupt.items() if k != "decision"},
                    reopened_from=review,
                    changes=check.changes,
                )

        self.pause(
            reason=f"graph interrupt: approval no longer holds: {drifted[0][0].tool}", then=reopen
        )

    @staticmethod
    def answers(reviews: list[ReviewRequest]) -> dict[str, Any]:
        """Command(resume=...) by interrupt id: a batched HumanInTheLoopMiddleware request gets
        {"decisions": [...]} in action order, any other interrupt its single answer."""
        answers: dict[str, Any] = {}
        batched: dict[str, list[tuple[int, Any]]] = {}
        for review in reviews:
            interrupt = review.interrupt
            decision = (
                interrupt["decision"]
                if "decision" in interrupt
                else {"type": "reject", "message": ""}
            )
            if interrupt["mode"] == "batched":
                batched.setdefault(interrupt["id"], []).append((interrupt["index"], decision))
            else:
                answers[interrupt["id"]] = decision
        for interrupt_id, decisions in batched.items():
            answers[interrupt_id] = {"decisions": [d for _i, d in sorted(decisions)]}
        return answers

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
                    if c.get("name") == tool and _jsonable(c.get("args") or {}) == args
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
                )

        self.pause(
            reason=f"graph interrupt: {rows[0][0].tool}",
            inserts=[r[0] for r in rows],
            then=open_all,
        )

    # -- static breakpoints are reviews too --------------------------------------------------

    def breakpoint_at(self, graph: Any, state: Any) -> str:
        """ "before" / "after" when LangGraph stopped the run at this checkpoint for one of the
        graph's static breakpoints (interrupt_before / interrupt_after), as its loop decides
        it: a breakpoint node is due and a channel changed since the last stop. "" if not."""
        if state.interrupts or not state.next or (state.metadata or {}).get("source") == "update":
            return ""
        before = getattr(graph, "interrupt_before_nodes", None) or ()
        after = getattr(graph, "interrupt_after_nodes", None) or ()
        if not before and not after:
            return ""
        saved = self.saver.get_tuple(state.config)
        if saved is None:
            return ""
        checkpoint = saved.checkpoint
        seen = checkpoint["versions_seen"].get(INTERRUPT, {})
        if not any(
            version > seen.get(channel, type(version)())
            for channel, version in checkpoint["channel_versions"].items()
        ):
            return ""
        if _any_named(before, state.next):
            return "before"
        if after and saved.parent_config is not None:
            ran = graph.get_state(saved.parent_config).next
            if _any_named(after, ran):
                return "after"
        return ""

    def pending_tool_calls(self, graph: Any, state: Any) -> tuple[str, list[dict[str, Any]]]:
        """(the tools node, the tool calls of the last AIMessage it has not answered yet) when
        a node the graph goes on to is a ToolNode; else ("", [])."""
        tools = next(
            (
                name
                for name in state.next
                if isinstance(getattr(graph.nodes.get(name), "bound", None), ToolNode)
            ),
            "",
        )
        values = state.values if isinstance(state.values, dict) else {}
        messages = values.get("messages") or []
        last_ai = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=None)
        if not tools or last_ai is None:
            return "", []
        answered = {m.tool_call_id for m in messages[last_ai + 1 :] if isinstance(m, ToolMessage)}
        calls = [c for c in messages[last_ai].tool_calls if c.get("id") not in answered]
        return (tools, calls) if calls else ("", [])

    def pause_for_breakpoint(self, graph: Any, state: Any, *, where: str) -> NoReturn:
        checkpoint_id = state.config["configurable"]["checkpoint_id"]
        nodes = list(dict.fromkeys(state.next))
        tools, calls = self.pending_tool_calls(graph, state)
        where = where or "before"
        if calls:
            actions = [
                (
                    "breakpoint",
                    tools,
                    (
                        str(call["name"]),
                        _jsonable(call.get("args") or {}),
                        {
                            "mode": "breakpoint_tool",
                            "allowed": BREAKPOINT_TOOL_DECISIONS,
                            "tool_call_id": call.get("id"),
                            "breakpoint": where,
                        },
                        f"The graph stopped at its breakpoint before the `{tools}` node, "
                        f"which runs this call:\n\n"
                        + json.dumps(
                            {"tool": call["name"], "args": call.get("args")},
                            indent=2,
                            ensure_ascii=False,
                            default=str,
                        ),
                    ),
                )
                for call in calls
            ]
        else:
            arguments = {"breakpoint": where, "next": nodes}
            actions = [
                (
                    "breakpoint",
                    ", ".join(nodes),
                    (
                        ", ".join(nodes),
                        arguments,
                        {
                            "mode": "breakpoint",
                            "allowed": BREAKPOINT_DECISIONS,
                            "breakpoint": where,
                        },
                        f"The graph stopped at a breakpoint ({where}); next: "
                        f"{', '.join(nodes)}. Approve to go on, reject to stop the task.",
                    ),
                )
            ]
        self.event(
            EventType.GRAPH_BREAKPOINT,
            {"checkpoint_id": checkpoint_id, "breakpoint": where, "next": nodes},
        )
        self.open_reviews(checkpoint_id, actions)

    def stopped_reviews(self) -> set[int]:
        """The reviews whose rejection stopped the task (`_stop`): a retry asks again."""
        return {
            review_id
            for payload in self.task.events.filter(type=EventType.TASK_STOPPED).values_list(
                "payload", flat=True
            )
            for review_id in (payload or {}).get("stopped_reviews", [])
        }

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
        refused = [r for r in reviews if r.status != ReviewStatus.APPROVED]
        generic = [r for r in refused if r.interrupt.get("mode") == "breakpoint"]
        if generic:
            message = (generic[0].interrupt.get("decision") or {}).get("message") or ""
            raise _stop(
                "breakpoint_rejected",
                f"a reviewer stopped the graph at its breakpoint before "
                f"{generic[0].tool}" + (f": {message}" if message else ""),
                reviews,
            )
        edits = {
            r.interrupt.get("tool_call_id"): r.interrupt["decision"]["edited_action"]["args"]
            for r in go
            if (r.interrupt.get("decision") or {}).get("type") == "edit"
        }
        rejections = {
            r.interrupt.get("tool_call_id"): (r.interrupt.get("decision") or {}).get("message")
            or ""
            for r in refused
        }
        self.calls_delivered(go)
        updated = None
        if edits or rejections:
            updated = self.breakpoint_update(graph, state, edits=edits, rejections=rejections)
        self.event(
            EventType.GRAPH_RESUMED,
            {
                "checkpoint_id": checkpoint_id,
                "breakpoint": True,
                "approved": [r.interrupt.get("tool_call_id") or r.tool for r in go],
                "edited": sorted(str(k) for k in edits),
                "rejected": sorted(str(k) for k in rejections),
                **({"updated_checkpoint_id": updated} if updated else {}),
            },
        )
        self.commit(inserts=self.workspace_snapshot(updated) if updated else [])

    def breakpoint_update(
        self,
        graph: Any,
        state: Any,
        *,
        edits: dict[str, dict[str, Any]],
        rejections: dict[str, str],
    ) -> str:
        """Write the reviewers' edits and rejections into the graph's state: the edited args
        replace the AIMessage's tool calls; each rejected call gets a ToolMessage saying so
        (written as the tools node when every call was rejected, so the model runs next;
        otherwise the turn is split: the rejected calls and their answers, then a message
        with the calls that run). -> the new checkpoint's id."""
        self.commit()  # the delivered calls are `running` before the state moves on
        tools, calls = self.pending_tool_calls(graph, state)
        messages = state.values["messages"]
        ai = next(m for m in reversed(messages) if isinstance(m, AIMessage))
        calls = [
            {**call, "args": edits[call["id"]]} if call.get("id") in edits else call
            for call in calls
        ]
        refused = [c for c in calls if c.get("id") in rejections]
        kept = [c for c in calls if c.get("id") not in rejections]
        answers = [
            ToolMessage(
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

    def pause(self, *, reason: str, inserts: list[Any] = (), then: Any = None) -> NoReturn:
        with transaction.atomic():
            self.commit(inserts=list(inserts))
            if then is not None:
                then()
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.WAITING_REVIEW,
                expect_epoch=self.epoch,
                reason=reason[:500],
                fields={"worker_id": ""},
            )
        raise Paused()

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
                    _jsonable(action.get("args") or {}),
                    {"mode": "batched", "allowed": list(allowed or ALL_DECISIONS)},
                    str(action.get("description", "")),
                )
            )
        return out
    if isinstance(value, dict) and value.get("type") == "tool_approval":
        return [
            (
                str(value.get("name", "tool")),
                _jsonable(value.get("args") or {}),
                {
                    "mode": "per_call",
                    "allowed": decisions_of(interrupt.response_schema) or ALL_DECISIONS,
                    "tool_call_id": value.get("tool_call_id"),
                },
                str(value.get("description", "")),
            )
        ]
    arguments = _jsonable(value) if isinstance(value, dict) else {"value": _jsonable(value)}
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


def _stop(error_class: str, message: str, reviews: list[ReviewRequest]) -> StopRun:
    """The task stops on these decided reviews (its `task_stopped` event names them, so a
    retry asks again instead of stopping on them once more)."""
    stop = StopRun(error_class, message)
    stop.payload = {"stopped_reviews": [r.id for r in reviews]}
    return stop


def _any_named(nodes: Any, names: Any) -> bool:
    """Whether a breakpoint list ("*" or node names) names any of `names`."""
    return bool(names) and (nodes == "*" or any(name in nodes for name in names))


def _toolcall_status(row: ToolCall, to: str, fields: dict[str, Any]) -> set[str]:
    """Move a graph call to `to` on the row, unsaved (tasks.services.toolcall_transition sets
    the status and the times it implies); -> the fields to save."""
    services.toolcall_transition(call=row, to=to, fields=fields, write=False)
    return {"status", "started_at", "finished_at", *fields}
