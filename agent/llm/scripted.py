"""The scripted model: the embedded default and the test model. Turn N of the script answers
the task's N-th model turn (`AgentState.turn_index`), so a resumed or rolled-back task replays
deterministically from where its state says it is."""

from __future__ import annotations

import time

from agent.llm.base import ModelAdapter, ModelCall, ModelDecision, ModelError
from tasks.agent_state import AgentState
from tasks.spec import ScriptedModelSpec
from tasks.tools.registry import ToolSpec


class ScriptedModel(ModelAdapter):
    name = "scripted"

    def __init__(self, spec: ScriptedModelSpec) -> None:
        self.script = spec.script

    def decide(
        self, *, state: AgentState, tools: list[ToolSpec], timeout_s: float
    ) -> ModelDecision:
        if state.turn_index >= len(self.script):
            raise ModelError(
                f"the script has {len(self.script)} turns and turn {state.turn_index + 1} was "
                "requested; end scripts with a 'final' turn",
                error_class="permanent",
            )
        turn = self.script[state.turn_index]
        if turn.delay_s:
            time.sleep(turn.delay_s)
        tokens = turn.tokens
        if turn.final is not None:
            return ModelDecision(
                final=turn.final, text=turn.final, completion_tokens=tokens, model="scripted"
            )
        if turn.call is not None:
            calls = [ModelCall(tool=turn.call, args=dict(turn.args))]
        else:
            calls = [ModelCall(tool=c.call, args=dict(c.args)) for c in turn.calls or []]
        return ModelDecision(calls=calls, completion_tokens=tokens, model="scripted")
