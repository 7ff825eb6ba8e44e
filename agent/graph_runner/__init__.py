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

The modules, from the bottom: `values` (JSON and bounded text of the graph's values),
`loading` (graph_load, graph_thread_config, GraphNotRegistered), `interrupts` (what an
interrupt asks for: interrupt_actions, decisions_of), `replay_answers` (what a replay of a
saved case answers in the nodes' threads: recorded model decisions and ToolNode answers),
`replay` (GraphReplay: the graph checked, its pauses resumed with the recorded answers), then
GraphRun's parts, each importing only the ones listed before it: `core` (state, events, usage,
the fenced write, pause), `tracing` (spans), `calls` (the reviewed calls' rows), `workspace`
(restore, snapshot), `streaming` (the super-steps), `answers` (decided reviews and the resume
value), `asking` (interrupts opened as reviews), `breakpoints` (a static breakpoint's reviews),
`past_breakpoints` (its decisions applied), `start` (the first input), and `run` (GraphRun
itself: execute, settle, stop; graph_task_run, the RQ entry that agent.jobs names as
"agent.graph_runner:graph_task_run"). Callers import from this package.
"""

from __future__ import annotations

from agent.graph_runner.interrupts import decisions_of, interrupt_actions
from agent.graph_runner.loading import GraphNotRegistered, graph_load, graph_thread_config
from agent.graph_runner.run import GraphRun, graph_task_run

__all__ = [
    "GraphNotRegistered",
    "GraphRun",
    "decisions_of",
    "graph_load",
    "graph_task_run",
    "graph_thread_config",
    "interrupt_actions",
]
