"""A graph task replaying a saved case (GraphReplay, issue #47), on the SDK agents' replay
(agent.sdk_run.replay): the chat models of the graph's nodes are answered with the recorded
model decisions in turn order, and its ToolNodes' calls are matched with the recorded ones by
the same oracle; a tool whose effect stays in the replay's own workspace (`risk` `read` or
`write` in the LangChain tool's metadata, or `replay: live`) runs and its answer is checked,
any other is answered from the recording without running (in the nodes' threads:
agent.graph_runner.replay_answers). In the run's own thread: a graph a replay cannot answer is
refused before it starts, each pause for review is resumed with the recorded answers, and
what diverged in a node's thread is raised (`diverged_check`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel
from langgraph.types import Command

from agent.graph_runner.replay_answers import NodeAnswers, replaying
from cases.selectors import replay_setup
from cases.selectors.graph import graph_answered
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import Task, TaskEvent


class GraphReplay(NodeAnswers):
    """The replay of a graph task: what it answers in the nodes' threads (NodeAnswers), the
    graph checked, the pauses resumed."""

    def __init__(self, setup: Any, *, turn: int, resumed: int = 0) -> None:
        super().__init__(setup, turn=turn)
        self.tool_nodes: tuple[str, ...] = setup.tool_nodes
        self.resumes: tuple[dict[str, Any], ...] = setup.graph_resumes
        # The pauses for review this replay has resumed (a resumed replay: its earlier ones).
        self.resumed = resumed

    @classmethod
    def of(cls, task: Task) -> GraphReplay | None:
        setup = replay_setup(task_id=task.id) if task.is_replay else None
        if setup is None:
            return None
        # A resumed replay: the calls its graph already ran, and the turns already answered.
        made = [
            (str(result.get("tool")), canonical_hash(arguments))
            for result, arguments in graph_answered(task.id)
        ]
        events = TaskEvent.objects.filter(task_id=task.id)
        return cls(
            dataclasses.replace(setup, made=[*setup.made, *made]),
            turn=events.filter(type=EventType.MODEL_DECISION).count(),
            resumed=events.filter(type=EventType.GRAPH_RESUMED).count(),
        )

    def position(self, run: Any) -> tuple[int, int]:
        return run.turn_index, run.step_index

    # --- in the run's thread -----------------------------------------------------------------

    @contextmanager
    def playing(self, run: Any, graph: Any) -> Iterator[None]:
        """Around the graph's stream: the graph checked (`refuse_unanswerable`), the model's
        answers and the tool wrapper installed, and this replay the one they serve."""
        self.refuse_unanswerable(run, graph)
        with replaying(self, graph):
            yield

    def refuse_unanswerable(self, run: Any, graph: Any) -> None:
        """A graph whose recorded tool results came from a node that is not a ToolNode, or
        that has subgraphs, stops before it starts: a replay could not answer those calls
        without running them."""
        tool_nodes = {
            name
            for name, node in graph.nodes.items()
            if isinstance(getattr(node, "bound", None), ToolNode)
        }
        outside = sorted(set(self.tool_nodes) - tool_nodes)
        nested = sorted(
            name for name, node in graph.nodes.items() if isinstance(node.bound, Pregel)
        )
        if not outside and not nested:
            return
        reason = (
            f"node(s) {', '.join(outside)} ran tools outside a ToolNode"
            if outside
            else f"node(s) {', '.join(nested)} are subgraphs"
        )
        raise self.diverged(
            run,
            call_id="",
            tool="",
            args={},
            reason=f"{reason}: a replay cannot answer their calls without running them",
        )

    def resume(
        self, run: Any, state: Any, *, at_breakpoint: bool, update: Callable[..., Any]
    ) -> tuple[bool, Any]:
        """Where the graph stopped (its state): (False, None) when it finished; else (True,
        the input that goes on: None after a crash, or the recorded answers of this pause for
        review, in the order the graph asks (a breakpoint's approval: None, its edits,
        rejections and responses written first by `update`, GraphRun.breakpoint_update). A pause the
        recording did not have, or whose interrupts are not those it answered, is the
        divergence: a replay never waits for a person."""
        if not state.interrupts and not state.next:
            return False, None
        if not state.interrupts and not at_breakpoint:
            return True, None  # stopped mid-run (a crash): it goes on from its checkpoint
        where: dict[str, Any] = {"call_id": "", "tool": "", "args": {}}
        if self.resumed >= len(self.resumes):
            raise self.diverged(
                run, **where, reason="the graph stopped for a review the recording did not have"
            )
        recorded = self.resumes[self.resumed]
        checkpoint_id = state.config["configurable"]["checkpoint_id"]
        if state.interrupts:
            answers = recorded.get("answers")
            if answers is None or len(answers) != len(state.interrupts):
                reason = (
                    f"the graph stopped for {len(state.interrupts)} interrupt(s); the recording "
                    + (
                        "resumed a breakpoint there"
                        if answers is None
                        else f"answered {len(answers)}"
                    )
                )
                raise self.diverged(run, **where, reason=reason)
            value: Any = Command(
                resume={i.id: answer for i, answer in zip(state.interrupts, answers, strict=True)}
            )
        else:
            if not recorded.get("breakpoint"):
                raise self.diverged(
                    run,
                    **where,
                    reason="the graph stopped at a breakpoint; the recording answered interrupts",
                )
            decided = {k: recorded.get(k) or {} for k in ("edits", "rejections", "responses")}
            if any(decided.values()):  # written into the graph's state, as the run did
                update(**decided)
            value = None
        self.resumed += 1
        run.event(
            EventType.GRAPH_RESUMED,
            {"checkpoint_id": checkpoint_id, "replayed": True, **recorded},
        )
        return True, value

    def diverged_check(self, run: Any) -> None:
        """Raise the divergence a node's thread found (on the run's timeline)."""
        if self.divergence is not None:
            raise self.diverged(run, **self.divergence)
