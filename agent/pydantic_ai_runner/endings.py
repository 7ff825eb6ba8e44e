"""How a run segment ends (RunEndings, part of PydanticAIRun): paused for review (`pause`;
`escalate`: a call whose outcome is unknown), waiting in retry_wait after a transient
model error (`retry_model`), or succeeded (`finish`); a stop is agent.sdk_run's
ForeignRun.finish_stopped."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, NoReturn

from django.utils import timezone

from agent.pydantic_ai_runner.constants import RESULT_MAX_CHARS, TEXT_MAX_CHARS
from agent.pydantic_ai_runner.core import RunCore
from agent.pydantic_ai_runner.messages import jsonable
from agent.retry import TRANSIENT, retry_policy
from agent.runtime.run import Paused, StopRun
from agent.sdk_run.unknown import unknown_outcomes_ask
from tasks import services
from tasks.agent_state import ErrorInfo
from tasks.events import EventType
from tasks.models import ToolCall
from tasks.spec import PydanticAIAgentSpec
from tasks.states import LeaseLost, TaskStatus


def _text(value: Any, limit: int = TEXT_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more]"


class RunEndings(RunCore):
    """The ends of a run segment: each writes its last commit and the task's transition."""

    @property
    def agent_spec(self) -> PydanticAIAgentSpec:
        """The task's `agent`: a Pydantic AI agent's (agent.jobs runs only those here)."""
        agent = self.spec.agent
        assert isinstance(agent, PydanticAIAgentSpec), f"not a Pydantic AI task: {agent!r}"
        return agent

    def pause(
        self,
        *,
        reason: str,
        trigger: str | None = None,
        inserts: Sequence[Any] = (),
        updates: Sequence[tuple[Any, list[str]]] = (),
        then: Callable[[Any], None] | None = None,
    ) -> NoReturn:
        def transition(checkpoint: Any) -> None:
            if then is not None:
                then(checkpoint)
            self.wait_for_review(reason)

        self.commit(trigger=trigger, inserts=list(inserts), updates=list(updates), then=transition)
        raise Paused()

    def escalate(self, row: ToolCall) -> str:
        """A tool that was running when its worker died, not declared idempotent: whether it
        took effect is unknown, so a person decides (agent.sdk_run.unknown: mark it done with
        its result, run it again, fail the task)."""
        try:
            unknown_outcomes_ask(self, [row])
        except Paused:
            return "paused"
        except LeaseLost:
            return "lease_lost"

    def retry_model(self, exc: Exception) -> str:
        """A transient model error: back off through RQ's scheduler (retry_wait, then the task
        resumes from its last checkpoint: the model is asked again), up to the policy's
        attempts; then the task fails with `model_error`."""
        message = f"{type(exc).__name__}: {exc}"[:2000]
        attempt = self.state.model_retries + 1
        policy = retry_policy(config=self.config, task_override=self.spec.retry)
        if attempt >= policy.max_attempts:
            return self.finish_stopped(
                StopRun("model_error", f"{message} (after {attempt} attempts)")
            )
        delay_s = policy.delay_s(attempt)
        retry_at = timezone.now() + timedelta(seconds=delay_s)
        self.state.model_retries = attempt
        self.state.last_error = ErrorInfo(
            error_class=TRANSIENT, message=message, step_index=self.state.step_index
        )
        self.event(
            EventType.RETRY_SCHEDULED,
            {
                "attempt": attempt,
                "error_class": TRANSIENT,
                "message": message[:500],
                "delay_s": round(delay_s, 3),
                "retry_at": retry_at.isoformat(),
            },
        )
        fields = {"retry_at": retry_at, "retry_count": self.task.retry_count + 1}

        def wait(_checkpoint: Any) -> None:
            services.task_enqueue(task=self.task, delay_s=delay_s)
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.RETRY_WAIT,
                expect_epoch=self.epoch,
                reason=f"retry in {delay_s:.1f}s after a transient model error",
                fields={"worker_id": "", **fields},
            )

        try:
            self.commit(trigger="on_retryable_error", then=wait)
        except LeaseLost:
            return "lease_lost"
        return "paused"

    def finish(self, output: Any, messages: list[Any]) -> str:
        self.sdk["messages"] = self.messages_dumped(messages)
        result = _text(jsonable(output), RESULT_MAX_CHARS)
        self.state.final = result
        self.state.phase = "done"
        self.state.step_index += 1
        self.state.budget.steps += 1
        self.event(EventType.STEP_FINISHED, {"step": self.state.step_index})
        self.event(EventType.TASK_FINISHED, {"result": result[:2000]})
        self.commit(
            trigger="after_step", then=lambda _checkpoint: self.succeed(result, "agent finished")
        )
        return "succeeded"
