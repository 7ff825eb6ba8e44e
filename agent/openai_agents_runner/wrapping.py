"""The agent, wrapped (AgentWrapping, part of AgentsRun): a copy of the operator's agent
graph whose function tools (and MCP servers' tools) ask the harness's gate for approval
(ApprovalGate.gate_inline, in the SDK's loop) and run through the harness's ledger
(ToolInvocation), its MCP servers as the harness runs them (McpSandbox), the model bound to the
operator's endpoint."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

from agents import Agent, FunctionTool, Handoff, Model

from agent.openai_agents_runner.approvals import ApprovalGate
from agent.openai_agents_runner.harness_model import HarnessModel, StreamingRun
from agent.openai_agents_runner.hosted import HostedGateModel, HostedTools, is_hosted
from agent.openai_agents_runner.loading import bound_model
from agent.openai_agents_runner.local_tools import local_tools_refuse
from agent.openai_agents_runner.mcp_sandbox import McpSandbox
from agent.openai_agents_runner.tool_calls import ToolInvocation
from agent.sdk_run.inline import inline
from tasks.spec import OpenAIModelSpec, model_endpoint
from tasks.tools.mcp import tool_policy


class AgentWrapping(ApprovalGate, HostedTools, ToolInvocation, McpSandbox):
    """AgentsRun's agent graph, wrapped: harness_agent, wrap_tool."""

    def harness_agent(self, root: Agent) -> Agent:
        """A copy of the agent graph (the agent and every agent it can hand off to) whose
        function tools run through the harness: they ask for approval (the harness answers:
        its policy, or a person) and their calls go through the ledger. The operator's
        objects are not changed."""
        copies: dict[int, Agent] = {}

        def copy(agent: Agent) -> Agent:
            if id(agent) in copies:
                return copies[id(agent)]
            local_tools_refuse(list(agent.tools), agent_name=agent.name)
            clone = agent.clone(
                tools=[self.wrap_tool(t) for t in agent.tools],
                # Each server as the harness runs it: a stdio one in the task's sandbox.
                mcp_servers=[
                    self.server_sandboxed(s, agent_name=agent.name) for s in agent.mcp_servers
                ],
            )
            self.tool_names.update(t.name for t in agent.tools if isinstance(t, FunctionTool))
            copies[id(agent)] = clone
            if not isinstance(agent.model, Model) and self.agent_spec.model is None:
                # No model object of its own (none, or a name): the operator's default
                # endpoint (OPENAI_BASE_URL with its bound key), never the SDK's default one.
                endpoint = model_endpoint(OpenAIModelSpec(kind="openai", model=agent.model))
                clone.model = bound_model(endpoint)
            if isinstance(clone.model, Model):
                # Streamed to the live view, aligned after a recovery (harness_model).
                # `self` is an AgentsRun, whose ModelTurns stream and record the turns.
                clone.model = HarnessModel(clone.model, cast(StreamingRun, self))
            if any(is_hosted(t) for t in agent.tools):
                # Hosted tools run at the provider inside the model's turn: the gate stands in
                # front of the model (agent.openai_agents_runner.hosted).
                self.has_hosted = True
                if isinstance(clone.model, Model):
                    clone.model = HostedGateModel(self, clone.model)
            if agent.mcp_servers:
                listed = clone.get_mcp_tools

                async def mcp_tools(run_context: Any, listed: Any = listed) -> list[Any]:
                    return [self.wrap_tool(t) for t in await listed(run_context)]

                # The MCP servers' tools go through the harness like the function tools.
                object.__setattr__(clone, "get_mcp_tools", mcp_tools)
            clone.handoffs = [handoff_copy(h) for h in agent.handoffs]
            return clone

        def handoff_copy(entry: Any) -> Any:
            if isinstance(entry, Agent):
                return copy(entry)
            target = entry._agent_ref() if isinstance(entry, Handoff) and entry._agent_ref else None
            if not isinstance(target, Agent):
                return entry
            target_copy = copy(target)
            original = entry.on_invoke_handoff

            async def invoke(context: Any, arguments: str) -> Any:
                await original(context, arguments)
                return target_copy

            return dataclasses.replace(entry, on_invoke_handoff=invoke)

        return copy(root)

    def wrap_tool(self, tool: Any) -> Any:
        if not isinstance(tool, FunctionTool):
            return tool  # hosted tools run at the provider; MCP approvals come as interruptions
        original_invoke = self.quota_guarded(tool, tool.on_invoke_tool)
        original_needs = tool.needs_approval
        run = self

        async def needs_approval(context: Any, params: dict[str, Any], call_id: str) -> bool:
            asked: object = original_needs  # a bool, or a callable (sync or async) deciding
            if callable(asked):
                asked = asked(context, params, call_id)
                if asyncio.iscoroutine(asked):
                    asked = await asked
            run.sdk_asked[call_id] = bool(asked)
            # The ledger and the policy's rules are read and written in the thread of the
            # run's other writes.
            return bool(inline(run.gate_inline, tool.name, params, call_id))

        async def invoke(context: Any, arguments: str) -> Any:
            return await run.invoke(context, arguments, tool=tool.name, original=original_invoke)

        wrapped = dataclasses.replace(tool, on_invoke_tool=invoke, needs_approval=needs_approval)
        annotations = getattr(tool, "_mcp_annotations", None)
        if annotations is not None or getattr(tool, "_mcp_title", None) is not None:
            # An MCP server's tool: its annotations set the risk, as for the harness's MCP tools.
            dump = getattr(annotations, "model_dump", None)
            hints = dump(exclude_none=True, by_alias=True) if dump else dict(annotations or {})
            self.mcp_risk[tool.name] = tool_policy(hints)[0]
            for name in ("_mcp_annotations", "_mcp_title"):
                if hasattr(tool, name):
                    object.__setattr__(wrapped, name, getattr(tool, name))
        self.tools_of[tool.name] = wrapped
        return wrapped
