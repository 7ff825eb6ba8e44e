"""The run's end (RunEndings, part of AgentsRun): the final output -> succeeded (a stop is
agent.sdk_run's ForeignRun.finish_stopped)."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from agent.openai_agents_runner.core import RunCore
from agent.openai_agents_runner.values import jsonable, short_text
from tasks.events import EventType

RESULT_MAX_CHARS = 5000


class RunEndings(RunCore):
    """AgentsRun's ending: finish."""

    def finish(self, result: Any) -> str:
        output = result.final_output
        text = output if isinstance(output, str) else json.dumps(jsonable(output))
        text = short_text(text, RESULT_MAX_CHARS)
        self.state.final = text
        self.state.phase = "done"
        self.event(
            EventType.TASK_FINISHED, {"result": text[:2000], "agent": result.last_agent.name}
        )
        with transaction.atomic():
            self.commit(checkpoint=("after_step", "step"))
            self.succeed(text, "agent finished")
        return "succeeded"
