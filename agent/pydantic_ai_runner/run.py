"""PydanticAIRun, built from its parts, and its job: `segment` (start or resume, drive, then
pause or finish), `ended_by` (Pydantic AI's own ways to end: an unknown outcome, a transient
model error; the rest of the ladder is agent.sdk_run's) and pydantic_ai_task_run (the RQ
job's entry, agent.jobs.AGENT_RUNNERS)."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import DeferredToolRequests
from pydantic_ai.toolsets import FunctionToolset

from agent.pydantic_ai_runner.agents import agent_model
from agent.pydantic_ai_runner.approvals import RunApprovals
from agent.pydantic_ai_runner.constants import TRANSIENT_MODEL_ERRORS
from agent.pydantic_ai_runner.drive import RunDrive
from agent.pydantic_ai_runner.resume import RunStart
from agent.pydantic_ai_runner.tool_calls import Escalate
from agent.pydantic_ai_runner.versions import agent_version_parts
from agent.runtime.run import StopRun
from agent.sdk_run import HARNESS_EXCEPTIONS, harness_cause


def pydantic_ai_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names a Pydantic AI agent."""
    return PydanticAIRun.job(task_id=task_id)


class PydanticAIRun(RunDrive, RunStart, RunApprovals):
    """One run segment of a Pydantic AI task, from the lease to its end. The parts, from
    the bottom: core (RunCore), endings, tool_results, tool_calls, recording, decisions,
    approvals, resume, drive."""

    def segment(self) -> str:
        agent = self.load()
        self.version_parts = agent_version_parts(spec=self.task.spec, agent=agent)
        self.tool_names = frozenset(
            name
            for toolset in agent.toolsets
            if isinstance(toolset, FunctionToolset)
            for name in toolset.tools
        )
        try:
            # A replay of a saved case: the case's recorded decisions.
            model = (
                self.replay_model() if self.replay else agent_model(self.agent_spec.model, agent)
            )
        except ValueError as exc:
            raise StopRun("model_endpoint", str(exc)) from None
        prompt, results = self.start_or_resume()
        try:
            output, messages = asyncio.run(self.drive(agent, model, prompt, results))
        except BaseExceptionGroup as group:  # raised inside a tool's task group
            raise harness_cause(group, (*HARNESS_EXCEPTIONS, Escalate)) from None
        if isinstance(output, DeferredToolRequests):
            self.pause_for_approvals(output, messages)
        return self.finish(output, messages)

    def ended_by(self, exc: Exception) -> str | None:
        """A call of unknown outcome asks a person; a transient model error waits to retry."""
        if isinstance(exc, Escalate):
            return self.escalate(exc.row)
        if isinstance(exc, TRANSIENT_MODEL_ERRORS):
            return self.retry_model(exc)
        return None
