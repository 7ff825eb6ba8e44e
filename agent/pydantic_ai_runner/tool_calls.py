"""A tool call before it runs (ToolCallHooks, part of PydanticAIRun; called from HarnessTools
in the job's thread): `tool_begin` reads the ledger and the review rules and returns a
Plan (replay the stored result, refuse, have the model retry, ask for approval, or run with
the row written `running` first), or raises Escalate for a call whose worker died while it
ran."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.pydantic_ai_runner.constants import DEFAULT_RISK
from agent.pydantic_ai_runner.messages import jsonable
from agent.pydantic_ai_runner.replay import RunReplay
from agent.runtime.run import StopRun
from agent.sdk_run.unknown import INTERRUPTED, settled_output
from review.policy import agent_tool_policy
from tasks import services
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus


@dataclass
class Plan:
    """What the tool hook does with one call (decided in the job's thread)."""

    action: str  # run | replay | refuse | retry | approval
    value: Any = None
    row: ToolCall | None = None
    # A replay of a case: the recorded call answering this one, and whether the tool runs
    # (its answer then checked against the recorded one) or the recorded answer stands.
    recorded: dict[str, Any] | None = None
    live: bool = False


class Escalate(Exception):
    """A call's worker died while it ran and its outcome is unknown: a human decides."""

    def __init__(self, row: ToolCall) -> None:
        super().__init__(row.call_id)
        self.row = row


class ToolCallHooks(RunReplay):
    """What the harness does with a tool call before the tool runs."""

    def tool_begin(self, *, call: Any, tool_def: Any, args: Any, approved: bool) -> Plan:
        call_id = self.call_id(call.tool_call_id)
        recorded: dict[str, Any] | None = None
        arguments = jsonable(args if isinstance(args, dict) else call.args_as_dict())
        row = self.ledger.get(call_id)
        status = row.status if row is not None else None
        if row is not None and status == ToolCallStatus.SUCCEEDED:
            self.event(EventType.TOOL_REPLAYED, {"call_id": call_id, "tool": row.tool})
            self.commit()
            # Its own value, or what an operator marked it done with (a call of unknown outcome).
            return Plan("replay", value=settled_output(row, "value"))
        if row is not None and status in (ToolCallStatus.DENIED, ToolCallStatus.REJECTED):
            return Plan("refuse", value=(row.result or {}).get("observation", row.error_message))
        if (
            row is not None
            and status in (ToolCallStatus.FAILED, ToolCallStatus.TIMED_OUT)
            and not self.rerun_failed
        ):
            self.event(EventType.TOOL_REPLAYED, {"call_id": call_id, "tool": row.tool})
            return Plan("retry", value=row.error_message or "the tool failed")
        if (
            row is not None
            and status == ToolCallStatus.RUNNING
            and (tool_def.metadata or {}).get("idempotent")
        ):
            self.event(EventType.TOOL_RERUN_IDEMPOTENT, {"call_id": call_id, "tool": row.tool})
        elif row is not None and status in INTERRUPTED:
            raise Escalate(row)
        if row is not None and status == ToolCallStatus.APPROVED:
            if canonical_hash(arguments) != canonical_hash(row.arguments):
                raise StopRun(
                    "internal_error", f"call {call_id}: approved arguments changed after approval"
                )
        elif status is None or status == ToolCallStatus.AWAITING_REVIEW:
            risk = str((tool_def.metadata or {}).get("risk") or DEFAULT_RISK)
            decision = agent_tool_policy(
                tool_name=call.tool_name,
                args=arguments,
                risk=risk,
                input_schema=tool_def.parameters_json_schema,
                spec=self.task.spec,
            )
            if self.replay is not None:
                # A replay never waits for a person: a call reviewed in the recording stands.
                recorded = self.replay.claim(
                    self,
                    call_id=call_id,
                    tool=call.tool_name,
                    args=arguments,
                    action=decision.action,
                    rules=decision.rules,
                )
                approved = approved or bool(recorded.get("reviewed"))
            if decision.action == "review" and not approved:
                return Plan("approval", value={"rules": decision.rules, "reason": decision.reason})
            if row is None:
                row = ToolCall(
                    task_id=self.task_id,
                    call_id=call_id,
                    tool=call.tool_name[:100],
                    arguments=arguments,
                    risk=risk[:20],
                    step_index=self.state.step_index,
                )
                # As this step's model_decision event lists it (recording).
                self.proposed[call_id] = canonical_hash(jsonable(call.args_as_dict()))
            if decision.action == "deny":
                feedback = (
                    f"{call.tool_name} was denied by policy: {decision.reason}; choose a safer "
                    "action or explain in the final answer why it is needed"
                )
                services.toolcall_transition(
                    call=row,
                    to=ToolCallStatus.DENIED,
                    fields={
                        "error_class": "denied",
                        "error_message": decision.reason[:2000],
                        "result": {"observation": feedback},
                    },
                    write=False,
                )
                self.event(
                    EventType.TOOL_REFUSED,
                    {"call_id": call_id, "tool": row.tool, "error_class": "denied"},
                )
                self.write_row(row)
                return Plan("refuse", value=feedback)
        assert row is not None  # found in the ledger, or built above for a new call
        self.call_started(row)
        # The intent is durable before the tool runs: a crash during it is never re-run blindly.
        self.write_row(row)
        self.calls_running += 1
        if recorded is not None:
            live = self.replay is not None and self.replay.live(tool_def.metadata, DEFAULT_RISK)
            return Plan("run", row=row, recorded=recorded, live=live)
        return Plan("run", row=row)
