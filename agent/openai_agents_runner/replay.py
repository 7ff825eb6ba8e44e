"""An OpenAI Agents SDK task replaying a saved case (the shared part is agent.sdk_run.replay):
ReplayTurns, the SDK's `Model` answering turn N with the calls (their SDK ids kept, so the
replay's ledger ids are the recording's) or the final answer the case recorded for its turn N;
and RunReplay (part of AgentsRun): a new call claimed from the recording at the gate
(`replay_claim`), and a matched call's outcome — the recorded one, without running the tool
(`replay_answer`), or the live one checked against it (`replay_compare`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelResponse, Usage
from agents.testing import assistant_message, function_call

from agent.openai_agents_runner.core import RunCore
from agent.runtime.run import StopRun
from review.policy import PolicyDecision
from tasks.models import ToolCall, ToolCallStatus


class ReplayTurns(Model):
    """The case's decisions as the run's model (the agents' own models are not asked)."""

    def __init__(self, run: RunCore) -> None:
        self.run = run

    def diverged(self, reason: str) -> StopRun:
        assert self.run.replay is not None
        return self.run.replay.diverged(self.run, call_id="", tool="", args={}, reason=reason)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        replay = self.run.replay
        assert replay is not None
        turn = self.run.state.turn_index + 1
        decision = replay.decisions.get(turn)
        if decision is None:
            raise self.diverged(
                f"the agent asked the model for turn {turn}; the recording has "
                f"{len(replay.decisions)} turns"
            )
        output: list[Any] = []
        for call in decision.get("calls") or []:
            if not call.get("sdk_call_id"):
                raise self.diverged(
                    f"the recording's turn {turn} holds a {call.get('tool')} item a replay "
                    "cannot give"
                )
            output.append(
                function_call(call["tool"], call.get("args") or {}, call_id=call["sdk_call_id"])
            )
        if not output:
            text = decision.get("final") or decision.get("text") or ""
            output.append(assistant_message(text, item_id=f"replay_t{turn}"))
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("a replay answers run(), not run_streamed()")


class RunReplay(RunCore):
    """AgentsRun's replay of a case: replay_claim, replay_live, replay_answer, replay_compare."""

    def replay_claim(
        self, *, call_id: str, tool: str, args: Any, decision: PolicyDecision
    ) -> PolicyDecision:
        """The recorded call answering a new one (kept for its invocation), checked against
        the policy's decision; a call reviewed in the recording goes on without a person."""
        assert self.replay is not None
        recorded = self.replay.claim(
            self,
            call_id=call_id,
            tool=tool,
            args=args,
            action=decision.action,
            rules=decision.rules,
        )
        self.replay_recorded[call_id] = recorded
        if decision.action == "review":
            return PolicyDecision(action="allow", reason="reviewed in the recording")
        return decision

    def replay_live(self, tool: str) -> bool:
        """Whether a matched call runs: an MCP tool whose hints make it read or write."""
        assert self.replay is not None
        return self.replay.live({"risk": self.mcp_risk.get(tool)}, "agent")

    def replay_answer(
        self, row: ToolCall, recorded: dict[str, Any]
    ) -> tuple[Any, Exception | None]:
        """The recorded outcome: (the output, None) or (None, the error to raise)."""
        assert self.replay is not None
        status, value = self.replay.answer(self, row=row, recorded=recorded)
        if status == ToolCallStatus.SUCCEEDED:
            return value, None
        return None, RuntimeError(value or "the tool failed")

    def replay_compare(self, row: ToolCall, recorded: dict[str, Any]) -> None:
        assert self.replay is not None
        self.replay.compare(self, row=row, recorded=recorded)
