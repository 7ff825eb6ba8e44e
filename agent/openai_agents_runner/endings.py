"""The run's end (RunEndings, part of AgentsRun): the final output -> succeeded, a stop
(cancel, timeout, budget, guardrail, error) -> the state its error class leads to."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from agent.openai_agents_runner.core import RunCore
from agent.openai_agents_runner.values import jsonable, short_text
from agent.runtime.finish import stop_transition
from agent.runtime.run import StopRun
from tasks import services
from tasks.events import EventType
from tasks.states import LeaseLost, TaskStatus

RESULT_MAX_CHARS = 5000


class RunEndings(RunCore):
    """AgentsRun's endings: finish, finish_stopped."""

    def finish(self, result: Any) -> str:
        output = result.final_output
        text = output if isinstance(output, str) else json.dumps(jsonable(output))
        text = short_text(text, RESULT_MAX_CHARS)
        self.state.final = text
        self.state.phase = "done"
        self.step_event(
            EventType.TASK_FINISHED, {"result": text[:2000], "agent": result.last_agent.name}
        )
        with transaction.atomic():
            self.commit(checkpoint=("after_step", "step"))
            services.task_transition(
                task_id=self.task_id,
                to=TaskStatus.SUCCEEDED,
                expect_epoch=self.epoch,
                reason="agent finished",
                fields={"result": text, **self.usage()},
            )
        return "succeeded"

    def finish_stopped(self, stop: StopRun) -> str:
        self.step_event(
            EventType.TASK_STOPPED,
            {"error_class": stop.error_class, "message": stop.message[:2000]},
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
