"""OpenAI Agents SDK agents as tasks: an operator-registered `agents.Agent` (harness.yaml
`openai_agents`) run by an RQ job under the task's state machine (`agent.jobs.run_task`
dispatches here when the spec's agent kind is `openai-agents`).

The SDK runs its own loop; the harness is its approver and its ledger:

    acquire (lease epoch) -> the head checkpoint's AgentState.sdk holds the SDK's RunState
    (`RunState.to_json()`; its lists stored as shared chunks, checkpoints.history), or nothing
    yet (start with spec.agent.input)
    loop:
      decide the pending approvals of the RunState (`state.get_interruptions()`):
          every function tool of the agent (and of every agent it hands off to) asks for
          approval (`needs_approval` wrapped to always ask), so every turn that calls a tool
          stops at an interruption and its RunState — with the model's response — is written
          in a checkpoint (`after_model`) before any tool runs;
          a call's ledger row (ToolCall, call id `oa<branch>:<SDK call id>`) takes the
          policy's decision: the tool's own `needs_approval` -> review; our rules (harness.yaml,
          admin rules, the spec's `review.always`) -> allow / review / deny;
          review -> one ReviewRequest per call (kind openai-agents), task waiting_review, the
          job ends; the decision comes back as `RunState.approve` / `reject` (an edit: the
          tool runs with the edited arguments)
      Runner.run(agent, state): the approved tools run through the harness's wrapper (the row
      goes running -> succeeded/failed in fenced writes; a row that already succeeded replays
      its output instead of running again) until the next interruption or the final output
    end: final output -> succeeded; a guardrail tripwire -> failed (`guardrail_tripwire`);
    max turns -> budget_exceeded; any other exception of the agent -> failed (`agent_error`).

A worker killed mid-run is redispatched and resumes from the last checkpoint: the model's turn
is not asked again (its response is in the RunState), tools that finished replay from the
ledger, a tool that was running when the worker died (outcome unknown) is not run again unasked:
the native loop's `unknown_outcome` review (agent.sdk_run.unknown) decides it. Rollback and
retry are the harness's own (checkpoints.recovery): the workspace and the RunState go back
together, calls on the new branch get new call ids.

The modules, from the bottom: `values` (KIND, clipped text, JSON, Approval and approval_of),
`loading` (agent_load, bound_model), then AgentsRun's parts: `core` (RunCore: the run's state,
events, usage, call ids, the checkpoint and the fenced write), `model_turns` (ModelTurns and
the SDK's Hooks), `tool_calls` (ToolInvocation: a call through the ledger), `mcp_sandbox`
(McpSandbox: the agent's MCP servers, a stdio one in the task's sandbox, or refused),
`wrapping` (AgentWrapping: the agent graph, wrapped), `reviews` (ReviewPauses: reviews opened,
approvals rechecked), `approvals` (ApprovalGate: the policy's decisions),
`start` (RunStart: a new task or the head checkpoint resumed), `endings` (RunEndings), and
`run` (AgentsRun itself: execute, the turns; openai_agents_task_run, the job's entry, enqueued
as "agent.openai_agents_runner:openai_agents_task_run"). Callers import from this package.
"""

from __future__ import annotations

from agent.openai_agents_runner.endings import RESULT_MAX_CHARS
from agent.openai_agents_runner.loading import AgentNotRegistered, agent_load, bound_model
from agent.openai_agents_runner.reviews import DECISIONS, REVIEW_KIND
from agent.openai_agents_runner.run import AgentsRun, openai_agents_task_run
from agent.openai_agents_runner.values import KIND, TEXT_MAX_CHARS, Approval, approval_of

__all__ = [
    "DECISIONS",
    "KIND",
    "RESULT_MAX_CHARS",
    "REVIEW_KIND",
    "TEXT_MAX_CHARS",
    "AgentNotRegistered",
    "AgentsRun",
    "Approval",
    "agent_load",
    "approval_of",
    "bound_model",
    "openai_agents_task_run",
]
