"""Recorded model turns (RecordedTurns, part of AgentsRun).

The SDK runs a job's turns in one `Runner.run` while the gate allows their calls in the SDK's
loop (ApprovalGate.gate_inline): no RunState is resumed, taken and serialised per turn, which
cost the more the longer the run. What makes a turn durable before its calls run is the model's
response, recorded in the state (`sdk.turns`: per turn the response as the RunState serialises
model responses, and the branch its calls ran on; stored as history chunks like the RunState's
lists) and written in an `after_model` checkpoint by the fenced write that marks its first call
running (RunCore.commit).

A run resumed from such a checkpoint starts the SDK from the RunState it holds (the last
pause's, or none: the task's input) and answers the model from the recorded turns first, as
DBOS replays a workflow's steps: their calls replay from the ledger (a call that was running
when a worker died stops at the gate: its outcome is unknown), and the SDK is where it was. At
a pause and at the end the RunState is serialised whole again and the turns start over."""

from __future__ import annotations

from typing import Any

from agents import ModelResponse

# The SDK's own (de)serialisation of a RunState's model responses, so a recorded turn is what a
# RunState would hold of it.
from agents.run_state import _deserialize_model_responses, _serialize_raw_item_value
from agents.usage import serialize_usage

from agent.openai_agents_runner.core import RunCore
from agent.openai_agents_runner.values import approval_of, field


def _function_calls(output: list[Any]) -> list[str]:
    return [
        str(field(item, "call_id"))
        for item in output
        if field(item, "type") == "function_call" and field(item, "call_id")
    ]


class RecordedTurns(RunCore):
    """AgentsRun's recorded turns: turns_restore, turn_replayed, turn_recorded."""

    def turns_restore(self, state: Any) -> None:
        """The turns the state holds after its RunState (`state`, None: none yet), to answer
        the model with first. The calls that ran before the checkpoint was written (those of
        the RunState's pending approvals and of every turn but the last) keep the branch they
        ran on, so after a rollback to it they replay; the last turn's run again."""
        turns = list((self.state.sdk or {}).get("turns") or [])
        self.turns_replay = _deserialize_model_responses([turn["response"] for turn in turns])
        if turns and state is not None:
            for item in state.get_interruptions():
                self.call_branches[approval_of(item).sdk_call_id] = int(turns[0]["branch"])
        for index, turn in enumerate(turns):
            for sdk_call_id in _function_calls(turn["response"]["output"]):
                self.recorded_calls.add(sdk_call_id)
                if index < len(turns) - 1:
                    self.call_branches[sdk_call_id] = int(turn["branch"])

    def turn_replayed(self) -> ModelResponse | None:
        """The next recorded response, if the model call is one the run already made."""
        return self.turns_replay.pop(0) if self.turns_replay else None

    def turn_recorded(self, response: ModelResponse) -> None:
        """A new response of the model: in the state, for the next write's checkpoint."""
        if not self.inline:
            return
        output = [_serialize_raw_item_value(item) for item in response.output]
        serialized = {
            "usage": serialize_usage(response.usage),
            "output": output,
            "response_id": response.response_id,
            "request_id": response.request_id,
        }
        sdk = self.state.sdk if self.state.sdk is not None else {}
        sdk.setdefault("turns", []).append({"branch": self.sdk_branch(), "response": serialized})
        self.state.sdk = sdk
        self.recorded_calls.update(_function_calls(output))
        self.turns_unwritten = True
