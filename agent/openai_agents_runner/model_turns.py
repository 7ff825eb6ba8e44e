"""Model turns (ModelTurns, part of AgentsRun): a step begun, the model named, a turn counted
and put on the timeline; Hooks, the SDK's lifecycle hooks that call them (model turns and
handoffs) and time each model call as a `chat` span."""

from __future__ import annotations

import time
from typing import Any

from agents import RunHooks

from agent.openai_agents_runner.turns import RecordedTurns
from agent.openai_agents_runner.values import call_arguments, field, short_text
from agent.tracing import ModelCall, model_call
from harness_base.metrics import STEP_SECONDS, metric_observe
from tasks import beacon
from tasks.events import EventType


class ModelTurns(RecordedTurns):
    """AgentsRun's model turns: step_begin, model_name, model_turn."""

    def step_begin(self) -> None:
        """A model call starts: the step before it (a model turn and the tool calls it asked
        for) has ended. The turn that answers ends no step, like the harness's own loop."""
        now = time.monotonic()
        if self.step_began is not None:
            metric_observe(STEP_SECONDS, now - self.step_began)
        self.step_began = self.turn_began = now

    def turn_next(self) -> int:
        return self.state.turn_index + 1

    def aligned(self, input: str | list[Any]) -> str | list[Any]:
        """A model request's input with the alignments in it, each where the run resumed."""
        alignments = (self.state.sdk or {}).get("alignments") or []
        if not alignments:
            return input
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        for entry in alignments:
            if entry.get("at") is None:
                entry["at"] = len(items)
        placed = sorted(enumerate(alignments), key=lambda p: (p[1]["at"], p[0]), reverse=True)
        for _, entry in placed:
            items.insert(min(entry["at"], len(items)), {"role": "user", "content": entry["text"]})
        return items

    def model_name(self, agent: Any) -> str:
        """The model the SDK calls for `agent` (the run's bound model overrides the agent's)."""
        model = self.run_model or getattr(agent, "model", None)
        model = getattr(model, "inner", model)  # harness_model.HarnessModel
        if model is None or isinstance(model, str):
            return model or ""
        return str(getattr(model, "model", "") or type(model).__name__)

    def model_turn(self, agent: Any, response: Any) -> None:
        self.state.budget.steps += 1
        self.state.step_index += 1
        self.state.turn_index += 1
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "input_tokens", 0) or 0)
        completion = int(getattr(usage, "output_tokens", 0) or 0)
        self.state.budget.tokens += prompt + completion
        calls, text = [], []
        for item in getattr(response, "output", None) or []:
            kind = field(item, "type")
            if kind == "function_call":
                sdk_call_id = str(field(item, "call_id") or "")
                calls.append(
                    {
                        "tool": field(item, "name"),
                        # The ledger's id (a case's recording reads the call's row by it) and
                        # the SDK's (a replay's model answers with it: replay).
                        "call_id": self.call_id(sdk_call_id),
                        "sdk_call_id": sdk_call_id,
                        "args": call_arguments(field(item, "arguments")),
                    }
                )
            elif kind == "message":
                for part in field(item, "content") or []:
                    if field(part, "type") == "output_text":
                        text.append(field(part, "text") or "")
            elif kind:
                calls.append({"tool": str(kind), "call_id": field(item, "id")})
        began, self.turn_began = self.turn_began, None
        self.event(
            EventType.MODEL_DECISION,
            {
                "turn": self.state.turn_index,
                "agent": agent.name,
                "model": self.model_name(agent),
                **(
                    {"duration_ms": round((time.monotonic() - began) * 1000, 3)}
                    if began is not None
                    else {}
                ),
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "calls": calls,
                "text": short_text(" ".join(text)),
                **({"final": short_text(" ".join(text))} if text and not calls else {}),
            },
        )


class Hooks(RunHooks):
    """The SDK's lifecycle, on the timeline: model turns and handoffs."""

    def __init__(self, run: ModelTurns) -> None:
        self.run = run
        # The model call in flight (the SDK makes one at a time): its `chat` span; whether a
        # recorded turn answers it (counted and on the timeline when it was made).
        self.chat: ModelCall | None = None
        self.replayed = False

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        self.replayed = bool(self.run.turns_replay)
        if self.replayed:
            return
        if self.run.inline:
            # Between the turns of the one Runner.run: the lease, a cancel, the clocks, the
            # budget, as before each Runner.run of a turn.
            self.run.boundary_checks()
        # The model call is promised to the worker within the turn timeout (tasks.beacon).
        beacon.expect("turn", self.run.turn_s)
        self.run.turn_agent = agent.name
        self.run.step_begin()
        self.chat = model_call(
            provider="openai", model=self.run.model_name(agent), parent=self.run.trace_parent
        )

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        if self.replayed:
            self.replayed = False
            return
        beacon.progress()
        self.run.model_turn(agent, response)
        if self.chat is not None:
            usage = getattr(response, "usage", None)
            calls = any(
                field(item, "type") not in (None, "message", "reasoning")
                for item in getattr(response, "output", None) or []
            )
            self.chat.ended(
                input_tokens=getattr(usage, "input_tokens", None),
                output_tokens=getattr(usage, "output_tokens", None),
                finish_reason="tool_calls" if calls else "stop",
            )
            self.chat = None

    def llm_failed(self, exc: BaseException) -> None:
        """The model call in flight (if any) failed: on_llm_end will not come for it."""
        if self.chat is not None:
            self.chat.failed(type(exc).__name__, str(exc))
            self.chat = None

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        self.run.event(
            EventType.AGENT_HANDOFF, {"from_agent": from_agent.name, "to_agent": to_agent.name}
        )
