"""Pydantic AI agents as tasks: an operator-registered `pydantic_ai.Agent` (harness.yaml
`pydantic_ai_agents`) run by an RQ job under the task's state machine (`agent.jobs.run_task`
dispatches here when the spec's agent kind is `pydantic-ai`).

    acquire (lease epoch) -> the head checkpoint (the harness's own, verified):
        none yet                    -> start with spec.agent.input as the user prompt
        approvals asked, all decided-> DeferredToolResults: ToolApproved(override_args=...) /
                                       ToolDenied(message) by the reviewers' decisions
        approvals asked, pending    -> pause again
        otherwise                   -> continue from the message history (a retry, resume,
                                       redispatch after a crash, kill -9, a rollback)
    Agent.iter node by node: each model response is a checkpoint (`after_model`: the message
    history, ModelMessagesTypeAdapter JSON, + a workspace snapshot), each finished tools node
    closes a step (`after_step`); between nodes: lease, cancel, session timeout, step budget.
    Every tool call goes through HarnessTools.wrap_tool_execute: a ledger row (call_id =
    `<gen>.<step>.<tool_call_id>`) written `running` before the tool runs (in one write with
    the `after_model` checkpoint) and settled after it (written with the step's `after_step`,
    or at once while another call of the node still runs), so a crash never runs an executed
    tool again (its stored result is replayed); our review rules decide the call (deny -> the
    model is told; review -> ApprovalRequired). A step is two durable writes.
    end: DeferredToolRequests -> one review per approval (kind `pydantic-ai`), waiting_review,
         the job ends; any other output -> succeeded; an exception -> failed.

The database connection belongs to the job's thread: the agent's event loop runs in that
thread and every database write is called from it inline (agent.sdk_run.inline), no hop.

The modules, from the bottom: `constants` (the kind, the decisions, the bounds, the transient
model errors), `agents` (agent_load, agent_model), `messages` (the message history and values
as JSON), `deps` (TaskDeps), then PydanticAIRun's parts: `core` (RunCore: the state, events,
usage and the one fenced write `commit`), `endings` (pause, escalate, retry_model, finish,
finish_stopped), `tool_results` (tool_end, tool_deferred, write_row, outcome_written), `tool_calls`
(tool_begin, Plan, Escalate), `capability` (HarnessTools, the hook every tool call goes
through), `recording` (after_node, record_model_response), `decisions` (the reviewers'
decisions, recheck_approvals), `approvals` (pause_for_approvals), `resume` (start_or_resume),
`drive` (Agent.iter node by node), and `run` (PydanticAIRun itself, its `execute`, and the job
pydantic_ai_task_run: agent.jobs names it `agent.pydantic_ai_runner:pydantic_ai_task_run`).
Callers import from this package; code inside it imports the module that holds a name.
"""

from __future__ import annotations

from agent.pydantic_ai_runner.agents import AgentNotRegistered, agent_load, agent_model
from agent.pydantic_ai_runner.capability import HarnessTools
from agent.pydantic_ai_runner.constants import (
    DECISIONS,
    DEFAULT_RISK,
    KIND,
    RESULT_MAX_CHARS,
    REVIEW_KIND,
    TEXT_MAX_CHARS,
    TRANSIENT_MODEL_ERRORS,
)
from agent.pydantic_ai_runner.deps import TaskDeps
from agent.pydantic_ai_runner.messages import messages_dump, messages_load
from agent.pydantic_ai_runner.run import PydanticAIRun, pydantic_ai_task_run
from agent.pydantic_ai_runner.tool_calls import Escalate, Plan

__all__ = [
    "DECISIONS",
    "DEFAULT_RISK",
    "KIND",
    "RESULT_MAX_CHARS",
    "REVIEW_KIND",
    "TEXT_MAX_CHARS",
    "TRANSIENT_MODEL_ERRORS",
    "AgentNotRegistered",
    "Escalate",
    "HarnessTools",
    "Plan",
    "PydanticAIRun",
    "TaskDeps",
    "agent_load",
    "agent_model",
    "messages_dump",
    "messages_load",
    "pydantic_ai_task_run",
]
