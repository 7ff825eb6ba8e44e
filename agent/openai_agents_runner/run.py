"""AgentsRun: one run segment of an OpenAI Agents SDK agent as a task (execute: the wrapped
agent driven turn by turn until it finishes, pauses for review or stops), built from its parts
(RunStart, ApprovalGate, AgentWrapping, ModelTurns, RunEndings); openai_agents_task_run, the
job's entry."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    Runner,
    RunState,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
)

from agent.openai_agents_runner.endings import RunEndings
from agent.openai_agents_runner.harness_model import HarnessModel
from agent.openai_agents_runner.hosted import HostedGateModel
from agent.openai_agents_runner.loading import bound_model
from agent.openai_agents_runner.model_turns import Hooks, ModelTurns
from agent.openai_agents_runner.replay import ReplayTurns
from agent.openai_agents_runner.start import RunStart
from agent.openai_agents_runner.values import KIND, jsonable, short_text
from agent.openai_agents_runner.versions import agent_version_parts
from agent.openai_agents_runner.wrapping import AgentWrapping
from agent.runtime.run import StopRun
from agent.sdk_run import harness_cause
from agent.sdk_run.inline import inline
from tasks.events import EventType
from tasks.spec import model_endpoint

log = logging.getLogger(__name__)


class AgentsRun(RunStart, AgentWrapping, ModelTurns, RunEndings):
    """One run segment: the SDK's loop under the harness's gate and ledger."""

    def run_config(self) -> RunConfig:
        """The model endpoint is bound as for the harness's own loop: a spec names an endpoint
        the operator allows (HARNESS_MODEL_ENDPOINTS) and the key bound to it stays in the
        worker's environment; it then serves every agent of the run."""
        kwargs: dict[str, Any] = {"tracing_disabled": True, "workflow_name": str(self.task_id)}
        if self.replay is not None:
            # A replay of a saved case: the case's recorded decisions serve every agent.
            kwargs["model"] = self.run_model = ReplayTurns(self)
        elif self.agent_spec.model is not None:
            self.run_model = bound_model(model_endpoint(self.agent_spec.model))
            kwargs["model"] = HarnessModel(self.run_model, self)
            if self.has_hosted:
                kwargs["model"] = HostedGateModel(self, kwargs["model"])
        return RunConfig(**kwargs)

    def segment(self) -> str:
        registered = self.load()
        self.version_parts = agent_version_parts(spec=self.task.spec, agent=registered)
        agent = self.harness_agent(registered)
        self.boundary_checks()
        self.start()
        try:
            return asyncio.run(self.drive(agent))
        except Exception as exc:
            # The SDK may wrap what the harness raised inside a tool call (a cancel seen, a
            # lost lease): the harness's own exception decides how the run ends.
            raise harness_cause(exc) from None

    def ended_by(self, exc: Exception) -> StopRun | None:
        """A guardrail's tripwire (on the timeline, then failed); max turns: the budget."""
        if isinstance(exc, MaxTurnsExceeded):
            return StopRun("budget_exceeded", str(exc)[:500])
        if isinstance(exc, (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered)):
            name = exc.guardrail_result.guardrail.get_name()
            which = "input" if isinstance(exc, InputGuardrailTripwireTriggered) else "output"
            output: GuardrailFunctionOutput | ToolGuardrailFunctionOutput
            output = exc.guardrail_result.output
        elif isinstance(
            exc, (ToolInputGuardrailTripwireTriggered, ToolOutputGuardrailTripwireTriggered)
        ):
            name = exc.guardrail.get_name()
            which = (
                "tool input"
                if isinstance(exc, ToolInputGuardrailTripwireTriggered)
                else "tool output"
            )
            output = exc.output
        else:
            return None
        info = short_text(jsonable(output.output_info))
        self.event(EventType.GUARDRAIL_TRIPPED, {"guardrail": name, "kind": which, "info": info})
        return StopRun("guardrail_tripwire", f"{which} guardrail {name!r} tripped its wire: {info}")

    async def drive(self, agent: Agent) -> str:
        connected: list[Any] = []
        try:
            connected = await self.servers_connect()
            return await self.turns(agent)
        finally:
            await self.servers_close(connected)

    async def turns(self, agent: Agent) -> str:
        run_config = self.run_config()
        hooks = Hooks(self)
        context = {"harness_workspace": str(self.workspace), "harness_task_id": str(self.task_id)}
        # One Runner.run for the job: the gate decides in the SDK's loop, the model's turns are
        # recorded (turns.RecordedTurns). Not for a saved case's replay (its model answers from
        # the recording) nor with hosted tools (their gate is the model's: hosted).
        self.inline = self.replay is None and not self.has_hosted
        serialized = (self.state.sdk or {}).get("run_state")
        if serialized:
            # The RunState's dict (to_json); a checkpoint written before holds its JSON text.
            load = RunState.from_string if isinstance(serialized, str) else RunState.from_json
            state: Any = await load(agent, serialized, context_override=context)
            # The step paused for its calls' reviews goes on: they run before the next turn.
            self.step_began = time.monotonic()
        else:
            state = None
        self.turns_restore(state)
        while True:
            if state is not None:
                inline(self.decide, state)
            inline(self.boundary_checks)
            try:
                result = await Runner.run(
                    agent,
                    state if state is not None else self.first_input(),
                    context=context,
                    max_turns=self.spec.budget.max_steps,
                    hooks=hooks,
                    run_config=run_config,
                )
            except BaseException as exc:
                hooks.llm_failed(exc)
                raise
            state = result.to_state()
            alignments = self.alignments()
            self.state.sdk = {
                **({"alignments": alignments} if alignments else {}),
                "kind": KIND,
                "agent": self.agent_spec.name,
                "branch": self.sdk_branch(),
                # Its dict: to_string is the same dict as an indented JSON text (slower to
                # write, and parsed again to store its history as chunks).
                "run_state": state.to_json(),
                "current_agent": result.last_agent.name,
            }
            # The RunState holds every turn so far: none to record until the SDK goes on.
            self.turns_unwritten = False
            self.turns_replay = []
            if not result.interruptions:
                return inline(self.finish, result)
            # The model's response and its pending calls, before any of them runs.
            inline(self.commit, checkpoint=("after_model", "step"))


def openai_agents_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names an OpenAI Agents SDK agent."""
    return AgentsRun.job(task_id=task_id)
