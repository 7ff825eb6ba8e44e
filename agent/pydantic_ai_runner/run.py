"""PydanticAIRun, built from its parts, and its job: `execute` (start or resume, drive, then
one ending for each way the segment stops) and pydantic_ai_task_run (the RQ job's entry,
agent.jobs.AGENT_RUNNERS)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from pydantic_ai import DeferredToolRequests
from pydantic_ai.toolsets import FunctionToolset

from agent.pydantic_ai_runner.agents import AgentNotRegistered, agent_load, agent_model
from agent.pydantic_ai_runner.approvals import RunApprovals
from agent.pydantic_ai_runner.constants import TRANSIENT_MODEL_ERRORS
from agent.pydantic_ai_runner.drive import RunDrive
from agent.pydantic_ai_runner.resume import RunStart
from agent.pydantic_ai_runner.tool_calls import Escalate
from agent.pydantic_ai_runner.versions import agent_version_parts
from agent.runtime.run import Paused, StopRun, connection_lost, with_lease_loaded
from tasks import beacon
from tasks.states import LeaseLost

log = logging.getLogger(__name__)


def pydantic_ai_task_run(*, task_id: Any) -> str:
    """As agent.runtime.task_run, for a task whose spec names a Pydantic AI agent."""
    return with_lease_loaded(
        task_id=task_id,
        load=agent_load,
        name_key="name",
        run=lambda task, worker_id, loaded: PydanticAIRun(task, worker_id, agent=loaded).execute(),
    )


def _ours(group: BaseExceptionGroup) -> BaseException:
    """The harness's own exception inside a group (a pause, a lost lease, a stop, an
    escalation), else the first one."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if isinstance(exc, Paused | LeaseLost | StopRun | Escalate):
            return exc
    return leaves[0] if leaves else group


class PydanticAIRun(RunDrive, RunStart, RunApprovals):
    """One run segment of a Pydantic AI task, from the lease to its end. The parts, from
    the bottom: core (RunCore), endings, tool_results, tool_calls, recording, decisions,
    approvals, resume, drive."""

    def execute(self) -> str:
        self.watchdog.start()
        try:
            agent = self.agent or agent_load(self.spec.agent.name)
            self.version_parts = agent_version_parts(spec=self.task.spec, agent=agent)
            self.tool_names = frozenset(
                name
                for toolset in agent.toolsets
                if isinstance(toolset, FunctionToolset)
                for name in toolset.tools
            )
            try:
                model = agent_model(self.spec.agent.model, agent)
            except ValueError as exc:
                raise StopRun("model_endpoint", str(exc)) from None
            prompt, results = self.start_or_resume()
            try:
                output, messages = async_to_sync(self.drive)(agent, model, prompt, results)
            except BaseExceptionGroup as group:  # raised inside a tool's task group
                raise _ours(group) from None
            finally:
                beacon.claim()  # the job's thread runs the task again
            if isinstance(output, DeferredToolRequests):
                self.pause_for_approvals(output, messages)
            return self.finish(output, messages)
        except Paused:
            return "paused"
        except LeaseLost as exc:
            log.warning("task %s: %s; stopping without further writes", self.task_id, exc)
            return "lease_lost"
        except StopRun as stop:
            return self.finish_stopped(stop)
        except Escalate as exc:
            return self.escalate(exc.row)
        except TRANSIENT_MODEL_ERRORS as exc:
            return self.retry_model(exc)
        except AgentNotRegistered as exc:
            return self.finish_stopped(StopRun("agent_not_registered", str(exc)))
        except Exception as exc:  # the agent's own error: the task fails, its state is kept
            if connection_lost(exc):
                raise  # not the task's failure: with_lease gives the task back
            log.exception("task %s: Pydantic AI agent failed", self.task_id)
            return self.finish_stopped(StopRun("agent_error", f"{type(exc).__name__}: {exc}"))
        finally:
            self.watchdog.finish()
