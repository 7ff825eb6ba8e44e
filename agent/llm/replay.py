"""The replay model: re-runs a task from the recorded `model_decision` events of an earlier
task, for debugging and demos, or from the decisions a saved case holds (cases.Case: its own
copy, so it outlives the recorded task). Turn N of the new task answers with the decision the
earlier task recorded for its turn N (after a rollback, the newest decision for that turn wins:
it is the one the recorded task went on with). Replays cost nothing and report no tokens."""

from __future__ import annotations

from typing import Any

from agent.llm.base import ModelAdapter, ModelCall, ModelDecision, ModelError
from tasks.agent_state import AgentState
from tasks.selectors import model_decisions_by_turn
from tasks.spec import ReplayModelSpec
from tasks.tools.registry import ToolSpec


def recorded_decisions(*, task_id: str) -> dict[int, dict[str, Any]]:
    """{turn number (1-based): model_decision payload} for a task."""
    return model_decisions_by_turn(task_id=task_id)


class ReplayModel(ModelAdapter):
    name = "replay"

    def __init__(self, spec: ReplayModelSpec) -> None:
        self.source = spec.task_id
        self._turns: dict[int, dict[str, Any]] | None = None

    @classmethod
    def of_turns(cls, turns: dict[int, dict[str, Any]], *, source: str) -> ReplayModel:
        """A replay of recorded decisions held elsewhere ({turn: model_decision payload})."""
        model = cls.__new__(cls)
        model.source = source
        model._turns = turns
        return model

    def decide(
        self, *, state: AgentState, tools: list[ToolSpec], timeout_s: float
    ) -> ModelDecision:
        if self._turns is None:
            self._turns = recorded_decisions(task_id=self.source)
            self.source = f"task {self.source}"
        turn = state.turn_index + 1
        payload = self._turns.get(turn)
        if payload is None:
            raise ModelError(
                f"the recording of {self.source} has no decision for turn "
                f"{turn} ({len(self._turns)} turns recorded)",
                error_class="permanent",
            )
        calls = [
            ModelCall(
                tool=c.get("tool", ""), args=dict(c.get("args") or {}), raw_error=c.get("raw_error")
            )
            for c in payload.get("calls") or []
        ]
        model = f"replay:{self.source.removeprefix('task ')}"
        if calls:
            return ModelDecision(calls=calls, text=payload.get("text") or "", model=model)
        final = payload.get("final")
        return ModelDecision(
            final=final if final is not None else payload.get("text") or "",
            text=payload.get("text") or "",
            model=model,
        )
